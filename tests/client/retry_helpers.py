"""Drive a message through a RetryConsumer until it is dead-lettered, and count its retries:
shared by the admin-redrive and the Spark-redrive acceptance tests."""
from __future__ import annotations

import pulsar

from letterbox.client import RetryConsumer

MAX_RETRIES = 3


def retries_until_dead_lettered(consumer: RetryConsumer, payload: bytes) -> list[str | None]:
    """Receive `payload` and reconsume it until the consumer dead-letters it; returns the
    RECONSUMETIMES each delivery carried (None: none). Other messages fail the test."""
    seen: list[str | None] = []
    for _ in range(MAX_RETRIES + 2):
        msg = consumer.receive(15_000)
        assert msg.data() == payload, msg.data()
        seen.append(msg.properties().get("RECONSUMETIMES"))
        consumer.reconsume_later(msg)
        if len(seen) == MAX_RETRIES + 1:
            break
    # the last reconsume_later went to the dead letter topic: nothing else comes
    try:
        extra = consumer.receive(1_500)
    except pulsar.Timeout:
        return seen
    raise AssertionError(f"a message came after the dead letter: {extra.properties()}")


def dead_letters(client: pulsar.Client, dlq: str, skip: frozenset[str] = frozenset()) -> pulsar.Message:
    """The first message of `dlq` whose id is not in `skip` (a redriven dead letter is
    removed from the DLQ once no subscription needs it); raises pulsar.Timeout."""
    reader = client.create_reader(dlq, pulsar.MessageId.earliest)
    try:
        while True:
            msg = reader.read_next(15_000)
            if str(msg.message_id()) not in skip:
                return msg
    finally:
        reader.close()
