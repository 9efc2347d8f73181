# The broker's reader of a subscription's failure policy as its consumers set
# it at subscribe time (the official client's `properties=`, keys in
# letterbox.failure.consumer_properties): PIP-22's "the last created consumer's
# configuration wins". The policy types and the parsing are the failure
# core's; this module only turns a bad value into the NotAllowed error the
# client sees.
from __future__ import annotations

from collections.abc import Mapping

from letterbox.errors import NotAllowed
from letterbox.failure import (
    FailurePolicy,
    PolicyError,
    declares_policy,
    policy_from_consumer_properties,
)
from letterbox.failure.key_quarantine import check_key_failure


def consumer_policy(metadata: Mapping[str, str], sub_type: int | None = None) -> FailurePolicy | None:
    """The policy a subscribing consumer's properties set, or None if they set none;
    `sub_type` (the subscribe's): refuse what that type cannot honour (park on Shared)."""
    if not declares_policy(metadata):
        return None
    try:
        policy = policy_from_consumer_properties(metadata)
        if sub_type is not None:
            check_key_failure(policy.on_key_failure, sub_type)
        return policy
    except PolicyError as exc:
        raise NotAllowed(str(exc)) from None
