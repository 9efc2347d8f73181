"""Messages the broker moves keep their schema (issue 15, schema registry): a dead letter,
a retry moved by the move route, a message redriven back to its source (plain and
subscription-only) and a parked key's messages register their source's schema version on
the target topic and carry the target's version number, so a consumer of the target with
the source's schema subscribes and decodes each message with the schema it was written
with (Pulsar's client-side DLQ producer registers the consumer's schema there). A target
whose compatibility strategy refuses the schema still gets the message, without a version."""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema, JsonSchema

from tests.admin.helpers import call
from tests.broker.test_schema_registry import UserV1, _user_v2, version_of
from tests.conftest import BrokerProcess, _quiet_logger

UserV2 = _user_v2()
P = "/admin/v2/persistent/public/default/"
EARLIEST = pulsar.InitialPosition.Earliest
DLQ_POLICY = {"letterbox.dlq.max_redeliveries": "1"}
V1, V2 = UserV1.schema(), UserV2.schema()  # the definitions the client registers


def definitions(broker: BrokerProcess, ns_topic: str) -> dict[int, Any]:
    """{version: parsed definition} of a topic's registry."""
    status, body = call(broker.admin_url, "GET", f"/admin/v2/schemas/{ns_topic}/schemas")
    assert status == 200, body
    return {v["version"]: json.loads(v["data"]) for v in body["getSchemaResponses"]}


def receive_all(consumer: pulsar.Consumer, count: int, ack: bool = True) -> list[pulsar.Message]:
    out = []
    for _ in range(count):
        msg = consumer.receive(15_000)
        if ack:
            consumer.acknowledge(msg)
        out.append(msg)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
    return out


def fail_until_dead(consumer: pulsar.Consumer, poison: set[str], expected_acks: set[str]) -> None:
    """Nack the poison names until the broker dead-letters them; ack the others."""
    acked: set[str] = set()
    while True:
        try:
            msg = consumer.receive(3000)
        except pulsar.Timeout:
            break
        if msg.value().name in poison:
            consumer.negative_acknowledge(msg)
        else:
            consumer.acknowledge(msg)
            acked.add(msg.value().name)
    assert acked == expected_acks


def publish_two_versions(client: pulsar.Client, topic: str) -> None:
    """ada written with v1, bob and cy with v2."""
    p1 = client.create_producer(topic, schema=AvroSchema(UserV1), batching_enabled=False)
    p1.send(UserV1(name="ada", age=36))
    p2 = client.create_producer(topic, schema=AvroSchema(UserV2), batching_enabled=False)
    p2.send(UserV2(name="bob", age=41, email="bob@example.com"))
    p2.send(UserV2(name="cy", age=7, email=None))
    p1.close()
    p2.close()


def test_dead_letters_carry_their_schema_and_redrive_brings_the_source_version_back(
        broker: BrokerProcess, client: pulsar.Client) -> None:
    name = f"moved-avro-{uuid.uuid4().hex[:6]}"
    topic, dlq = f"persistent://public/default/{name}", f"persistent://public/default/{name}-work-DLQ"
    consumer = client.subscribe(topic, "work", schema=AvroSchema(UserV2), consumer_type=pulsar.ConsumerType.Shared,
                                properties=DLQ_POLICY, initial_position=EARLIEST, negative_ack_redelivery_delay_ms=20)
    publish_two_versions(client, topic)
    fail_until_dead(consumer, {"ada", "bob"}, expected_acks={"cy"})
    source = definitions(broker, f"public/default/{name}")
    assert sorted(map(json.dumps, source.values())) == sorted(map(json.dumps, [V1, V2]))

    # the DLQ holds the two source versions; each dead letter names the one it was written with
    on_dlq = definitions(broker, f"public/default/{name}-work-DLQ")
    assert sorted(map(json.dumps, on_dlq.values())) == sorted(map(json.dumps, [V1, V2]))
    ops = client.subscribe(dlq, "ops", schema=AvroSchema(UserV2), initial_position=EARLIEST)
    # read, not acknowledged: dead letters every subscription acknowledged are trimmed, and the
    # redrive below needs them
    ada, bob = sorted(receive_all(ops, 2, ack=False), key=lambda m: m.value().name)
    assert on_dlq[version_of(ada)] == V1 and on_dlq[version_of(bob)] == V2
    assert (ada.value().name, ada.value().age, ada.value().email) == ("ada", 36, None)
    assert (bob.value().name, bob.value().email) == ("bob", "bob@example.com")
    ops.close()
    # a consumer with the older schema is one of the DLQ's versions too
    client.subscribe(dlq, "ops-v1", schema=AvroSchema(UserV1)).close()

    # redriven back to the source: the source's own versions again, no new one
    status, result = call(broker.admin_url, "POST", P + f"{name}-work-DLQ/letterbox/redrive", "{}")
    assert status == 200 and result["moved"] == 2, result
    back = sorted(receive_all(consumer, 2), key=lambda m: m.value().name)
    assert [(m.value().name, source[version_of(m)]) for m in back] == [("ada", V1), ("bob", V2)]
    assert back[0].value().age == 36 and back[1].value().email == "bob@example.com"
    assert definitions(broker, f"public/default/{name}") == source
    consumer.close()


def test_subscription_only_redrive_keeps_the_source_version(broker: BrokerProcess, client: pulsar.Client) -> None:
    name = f"moved-sub-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{name}"
    assert call(broker.admin_url, "PUT", P + name)[0] == 204
    for sub in ("S1", "S2"):
        assert call(broker.admin_url, "PUT", P + f"{name}/subscription/{sub}", '"earliest"')[0] == 204
    s1 = client.subscribe(topic, "S1", schema=AvroSchema(UserV2), consumer_type=pulsar.ConsumerType.Shared,
                          properties=DLQ_POLICY, negative_ack_redelivery_delay_ms=20)
    publish_two_versions(client, topic)
    fail_until_dead(s1, {"ada"}, expected_acks={"bob", "cy"})
    status, result = call(broker.admin_url, "POST", P + f"{name}-S1-DLQ/letterbox/redrive",
                          json.dumps({"subscriptionOnly": True}))
    assert status == 200 and result["moved"] == 1, result
    [again] = receive_all(s1, 1)
    assert (again.value().name, again.value().age) == ("ada", 36)
    assert definitions(broker, f"public/default/{name}")[version_of(again)] == V1
    s2 = client.subscribe(topic, "S2", schema=AvroSchema(UserV1), consumer_type=pulsar.ConsumerType.Shared)
    assert sorted(m.value().name for m in receive_all(s2, 3)) == ["ada", "bob", "cy"]  # no second ada
    s1.close()
    s2.close()


def test_parked_key_messages_carry_their_schema(broker: BrokerProcess, client: pulsar.Client) -> None:
    name = f"moved-park-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{name}"
    consumer = client.subscribe(topic, "s", schema=AvroSchema(UserV2), consumer_type=pulsar.ConsumerType.Failover,
                                properties={**DLQ_POLICY, "letterbox.dlq.on_key_failure": "park"},
                                initial_position=EARLIEST, negative_ack_redelivery_delay_ms=20)
    p2 = client.create_producer(topic, schema=AvroSchema(UserV2), batching_enabled=False)
    p2.send(UserV2(name="b1", age=1, email="b@x"), partition_key="B")  # source version 0: v2
    p1 = client.create_producer(topic, schema=AvroSchema(UserV1), batching_enabled=False)
    for i in range(1, 4):
        p1.send(UserV1(name=f"a{i}", age=i), partition_key="A")  # source version 1: v1
    fail_until_dead(consumer, {"a1"}, expected_acks={"b1"})
    assert definitions(broker, f"public/default/{name}") == {0: V2, 1: V1}
    assert definitions(broker, f"public/default/{name}-s-DLQ") == {0: V1}  # only v1 was moved there
    ops = client.subscribe(f"{topic}-s-DLQ", "ops", schema=AvroSchema(UserV2), initial_position=EARLIEST)
    dead = receive_all(ops, 3)
    assert [(m.value().name, m.value().age, m.value().email) for m in dead] == [
        ("a1", 1, None), ("a2", 2, None), ("a3", 3, None)]
    assert [m.properties()["DEAD_LETTER_REASON"] for m in dead] == ["max-redeliveries", "parked-behind",
                                                                     "parked-behind"]
    assert {version_of(m) for m in dead} == {0}
    for c in (ops, consumer, p1, p2):
        c.close()


def _mid(msg: pulsar.Message) -> str:
    m = msg.message_id()
    return f"{m.ledger_id()}:{m.entry_id()}:{m.partition()}:{m.batch_index()}"


def test_moved_retry_registers_json_schema_and_a_refusing_target_gets_no_version(
        broker: BrokerProcess, client: pulsar.Client) -> None:
    name = f"moved-json-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{name}"
    consumer = client.subscribe(topic, "s", schema=JsonSchema(UserV2), consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, schema=JsonSchema(UserV2), batching_enabled=False)
    producer.send(UserV2(name="dee", age=5, email="d@x"))
    producer.send(UserV2(name="eve", age=6, email=None))
    dee, eve = consumer.receive(10_000), consumer.receive(10_000)
    retry = f"{topic}-s-RETRY"
    status, moved = call(broker.admin_url, "POST", P + f"{name}/subscription/s/letterbox/move",
                         json.dumps({"messageId": _mid(dee), "target": retry, "properties": {"RECONSUMETIMES": "1"}}))
    assert status == 200 and moved["moved"] is True, moved
    assert definitions(broker, f"public/default/{name}-s-RETRY") == {0: V2}
    retried = client.subscribe(retry, "s", schema=JsonSchema(UserV2), initial_position=EARLIEST)
    [again] = receive_all(retried, 1)
    assert (again.value().name, again.value().email, version_of(again)) == ("dee", "d@x", 0)
    assert again.properties()["RECONSUMETIMES"] == "1"

    # a target in a namespace that refuses any new schema: moved all the same, without a version
    ns = f"public/frozen-{uuid.uuid4().hex[:6]}"
    assert call(broker.admin_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    frozen = f"persistent://{ns}/parking"
    client.create_producer(frozen, schema=JsonSchema(UserV1)).close()  # its only version
    assert call(broker.admin_url, "POST", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy",
                '"ALWAYS_INCOMPATIBLE"')[0] == 204
    status, moved = call(broker.admin_url, "POST", P + f"{name}/subscription/s/letterbox/move",
                         json.dumps({"messageId": _mid(eve), "target": frozen}))
    assert status == 200 and moved["moved"] is True, moved
    assert len(definitions(broker, f"{ns}/parking")) == 1
    raw = client.create_reader(frozen, pulsar.MessageId.earliest)
    msg = raw.read_next(10_000)
    assert json.loads(msg.data())["name"] == "eve" and not msg.schema_version()
    raw.close()
    assert "the target refuses its schema" in broker.log()
    for c in (retried, consumer, producer):
        c.close()


def test_dead_letter_topic_with_pulsar_asyncio(broker: BrokerProcess, client: pulsar.Client) -> None:
    """The DLQ's consumer through pulsar.asyncio decodes the moved message with its schema."""
    import pulsar.asyncio as pulsar_asyncio

    name = f"moved-async-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://public/default/{name}"
    consumer = client.subscribe(topic, "work", schema=AvroSchema(UserV2), consumer_type=pulsar.ConsumerType.Shared,
                                properties=DLQ_POLICY, initial_position=EARLIEST, negative_ack_redelivery_delay_ms=20)
    publish_two_versions(client, topic)
    fail_until_dead(consumer, {"ada"}, expected_acks={"bob", "cy"})  # written with v1
    consumer.close()

    async def run() -> tuple[str, int, str | None]:
        aclient = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            ops = await aclient.subscribe(f"{topic}-work-DLQ", "ops", schema=AvroSchema(UserV2),
                                          initial_position=EARLIEST)
            msg = await asyncio.wait_for(ops.receive(), 15)
            await ops.acknowledge(msg)
            return msg.value().name, msg.value().age, msg.value().email
        finally:
            await aclient.close()

    assert asyncio.run(run()) == ("ada", 36, None)
