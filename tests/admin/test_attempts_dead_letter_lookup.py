"""The attempts route's dead-letter lookup opens only the DLQ entries holding the message id's
bytes: it must still find a dead letter inside a compressed batch (whose properties are not
plain bytes), not take an id that merely shares digits (1:1 vs 1:10), and skip other
subscriptions' dead letters of the same message."""
from __future__ import annotations

import uuid

import pulsar

from tests.admin.helpers import call, topic_stats
from tests.conftest import BrokerProcess, wait_until


def test_dead_letter_lookup_finds_the_right_dead_letter(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/attempts-lookup-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(topic, "work")
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"s{i}".encode()) for i in range(12)]
    for _ in ids:
        consumer.acknowledge(consumer.receive(10_000))
    # the client groups acknowledgements (100 ms): the lookup below looks for a dead letter only
    # once the broker has the message acknowledged, so wait for the acks to arrive
    assert wait_until(lambda: topic_stats(broker.admin_url, topic)["subscriptions"]["work"]["msgBacklog"] == 0, 30)

    def origin(i: int) -> str:
        return f"{ids[i].ledger_id()}:{ids[i].entry_id()}:-1:-1"

    def dead(i: int, sub: str = "work") -> dict[str, str]:
        return {"DEAD_LETTER_SUBSCRIPTION": sub, "ORIGIN_MESSAGE_ID": origin(i)}

    dlq = f"{topic}-work-DLQ"
    plain = client.create_producer(dlq, batching_enabled=True, batching_max_messages=50,
                                   batching_max_publish_delay_ms=50)
    for i in range(200):  # decoys: other ids (entry 10 and 11 share digits with entry 1), another sub
        plain.send_async(b"d", None, properties=dead(10 if i % 2 else 11) if i % 3 else dead(1, "other"))
    plain.send(b"plain dead letter of s2", properties=dead(2))
    plain.flush()
    packed = client.create_producer(dlq, batching_enabled=True, batching_max_messages=50,
                                    batching_max_publish_delay_ms=50, compression_type=pulsar.CompressionType.LZ4)
    for _ in range(20):
        packed.send_async(b"e" * 200, None, properties=dead(10))
    packed.send_async(b"packed dead letter of s1", None, properties=dead(1))
    packed.flush()
    stored = {}
    reader = client.create_reader(dlq, pulsar.MessageId.earliest)
    while reader.has_message_available():
        m = reader.read_next(10_000)
        stored[m.data()] = m.message_id()
    reader.close()

    def lookup(i: int) -> dict[str, object]:
        path = (f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/subscription/work/letterbox/"
                f"attempts/{ids[i].ledger_id()}:{ids[i].entry_id()}")
        status, body = call(broker.admin_url, "GET", path)
        assert status == 200, body
        return dict(body)

    for i, data in ((1, b"packed dead letter of s1"), (2, b"plain dead letter of s2")):
        body = lookup(i)
        assert body["source"] == "dead-letter", body
        mid = stored[data]
        dl = body["deadLetter"]
        assert isinstance(dl, dict) and dl["messageId"].startswith(f"{mid.ledger_id()}:{mid.entry_id()}:"), (body, mid)
    assert lookup(3)["source"] == "none"  # acknowledged, never dead-lettered
    for p in (plain, packed, producer, consumer):
        p.close()
