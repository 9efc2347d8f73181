"""letterbox.client explains a refused `letterbox.*` consumer property: the official
client raises a bare NotAllowedError; RetryConsumer, AsyncRetryConsumer and
letterbox.client.subscribe raise ConsumerPropertyError whose message names the key
and the accepted keys or values."""
from __future__ import annotations

import asyncio
import uuid

import pulsar
import pytest

from letterbox.client import AsyncRetryConsumer, ConsumerPropertyError, RetryConsumer, subscribe
from letterbox.client.property_errors import explained_refusal
from tests.conftest import BrokerProcess

KNOWN = ("letterbox.backoff.min_ms", "letterbox.dlq.max_redeliveries", "letterbox.dlq.initial_subscription")


def _topic() -> str:
    return f"props-{uuid.uuid4().hex[:8]}"


@pytest.mark.letterbox_extension("asserts the broker's refusal of a bad letterbox.* consumer property; a "
                                 "--pulsar-compatible-only broker ignores those properties, as Apache Pulsar")
def test_official_client_alone_gives_a_bare_error(client: pulsar.Client) -> None:
    with pytest.raises(pulsar.exceptions.NotAllowedError) as info:
        client.subscribe(_topic(), "s", properties={"letterbox.dlq.max_redelivery": "3"})
    assert "max_redelivery" not in str(info.value)  # why letterbox.client has to explain it


def test_misspelled_key_names_the_key_and_the_known_keys(broker: BrokerProcess, client: pulsar.Client) -> None:
    for make in (
        lambda props: subscribe(client, _topic(), "s", properties=props),
        lambda props: RetryConsumer(client, _topic(), "s", admin_url=broker.admin_url, properties=props),
    ):
        with pytest.raises(ConsumerPropertyError) as info:
            make({"letterbox.dlq.max_redelivery": "3"})
        text = str(info.value)
        assert "unknown consumer property letterbox.dlq.max_redelivery" in text
        assert all(k in text for k in KNOWN)


def test_bad_value_names_the_key_and_what_it_accepts(broker: BrokerProcess, client: pulsar.Client) -> None:
    with pytest.raises(ConsumerPropertyError) as info:
        subscribe(client, _topic(), "s", properties={"letterbox.dlq.max_redeliveries": "zero"})
    assert "letterbox.dlq.max_redeliveries must be an integer of at least 1, got 'zero'" in str(info.value)
    with pytest.raises(ConsumerPropertyError, match=r"letterbox\.backoff\.multiplier must be between 1 and 100"):
        RetryConsumer(client, _topic(), "s", admin_url=broker.admin_url,
                      properties={"letterbox.backoff.min_ms": "10", "letterbox.backoff.multiplier": "500"})


def test_good_properties_subscribe(client: pulsar.Client) -> None:
    consumer = subscribe(client, _topic(), "s", properties={"letterbox.dlq.max_redeliveries": "3", "team": "ops"})
    consumer.close()


@pytest.mark.letterbox_extension("asserts the broker's refusal of a bad letterbox.* consumer property; a "
                                 "--pulsar-compatible-only broker ignores those properties, as Apache Pulsar")
def test_the_brokers_refusal_is_translated(client: pulsar.Client) -> None:
    # the refusal as it comes from the broker (no client-side check first): explained the same way
    props = {"letterbox.dlq.max_redelivery": "3"}
    with pytest.raises(ConsumerPropertyError) as info, explained_refusal(props):
        client.subscribe(_topic(), "s", properties=props)
    assert isinstance(info.value.__cause__, pulsar.exceptions.NotAllowedError)
    assert "letterbox.dlq.max_redelivery" in str(info.value)
    # a NotAllowedError the properties do not explain is left as it is
    with pytest.raises(pulsar.exceptions.NotAllowedError), explained_refusal({"team": "ops"}):
        raise pulsar.exceptions.NotAllowedError("something else")


def test_async_retry_consumer_explains_too(broker: BrokerProcess) -> None:
    import pulsar.asyncio as pulsar_asyncio

    async def run() -> str:
        aclient = pulsar_asyncio.Client(broker.url)
        try:
            with pytest.raises(ConsumerPropertyError) as info:
                await AsyncRetryConsumer.create(aclient, _topic(), "s", admin_url=broker.admin_url,
                                                properties={"letterbox.dlq.max_redelivery": "3"})
            return str(info.value)
        finally:
            await aclient.close()

    assert "unknown consumer property letterbox.dlq.max_redelivery" in asyncio.run(run())
