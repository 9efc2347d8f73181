# Consumer properties that explain themselves on the client side. The broker
# refuses a subscribe whose `letterbox.*` properties are misspelled or badly
# valued with NotAllowed and a message naming the key, but the official client
# keeps the server's message out of the exception (a bare NotAllowedError).
# Here the same check (letterbox.failure.consumer_properties, the broker's own)
# runs before the subscribe, and a NotAllowedError that the properties explain
# is turned into ConsumerPropertyError with that message; any other refusal is
# re-raised as it came.
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import pulsar

from letterbox.failure import PolicyError, policy_from_consumer_properties
from letterbox.failure.consumer_properties import declares_policy


class ConsumerPropertyError(PolicyError):
    """A `letterbox.*` consumer property is unknown or has a value the broker refuses."""


def check_consumer_properties(properties: Mapping[str, str] | None) -> None:
    """Raise ConsumerPropertyError, naming the key and what it accepts, if the broker would refuse them."""
    if not properties or not declares_policy(properties):
        return
    try:
        policy_from_consumer_properties(properties)
    except PolicyError as exc:
        raise ConsumerPropertyError(f"subscribe refused: {exc}") from None


@contextlib.contextmanager
def explained_refusal(properties: Mapping[str, str] | None) -> Iterator[None]:
    """Around a subscribe: a NotAllowedError caused by the properties becomes ConsumerPropertyError."""
    try:
        yield
    except pulsar.exceptions.NotAllowedError as exc:
        try:
            check_consumer_properties(properties)
        except ConsumerPropertyError as explained:
            raise explained from exc
        raise


def subscribe(client: pulsar.Client, topic: Any, subscription_name: str, **kwargs: Any) -> pulsar.Consumer:
    """`client.subscribe(...)` with the `letterbox.*` properties checked and refusals explained."""
    properties = kwargs.get("properties")
    check_consumer_properties(properties)
    with explained_refusal(properties):
        return client.subscribe(topic, subscription_name, **kwargs)
