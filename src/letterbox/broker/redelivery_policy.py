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


def consumer_policy(metadata: Mapping[str, str]) -> FailurePolicy | None:
    """The policy a subscribing consumer's properties set, or None if they set none."""
    if not declares_policy(metadata):
        return None
    try:
        return policy_from_consumer_properties(metadata)
    except PolicyError as exc:
        raise NotAllowed(str(exc)) from None
