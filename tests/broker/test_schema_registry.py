"""Schema registry (issue 15 item 4) through the official client over TCP: schema versions
per topic, each message carrying its version, GET_SCHEMA by version (the client's AvroSchema
downloads the writer schema of each message), the namespace schemaCompatibilityStrategy
(BACKWARD, FORWARD, FULL, ALWAYS_INCOMPATIBLE) with Avro checks, IncompatibleSchema for a
producer or consumer the strategy refuses, and versions surviving a restart."""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema, Boolean, Integer, JsonSchema, Record, String

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger

EARLIEST = pulsar.InitialPosition.Earliest


def _user_v1() -> type[Record]:
    class User(Record):
        _avro_namespace = "shop"
        name = String(required=True)
        age = Integer(required=True)

    return User


UserV1 = _user_v1()


def _user_v2() -> type[Record]:
    class User(Record):  # v1 plus an optional field with a default (null)
        _avro_namespace = "shop"
        name = String(required=True)
        age = Integer(required=True)
        email = String(required_default=True)

    return User


def _user_v3() -> type[Record]:
    class User(Record):  # v2 without the required field `age`
        _avro_namespace = "shop"
        name = String(required=True)
        email = String(required_default=True)

    return User


def _user_required_extra() -> type[Record]:
    class User(Record):  # v1 plus a required field without a default
        _avro_namespace = "shop"
        name = String(required=True)
        age = Integer(required=True)
        city = String(required=True)

    return User


@pytest.fixture
def namespace(broker: BrokerProcess) -> str:
    ns = f"public/schemas-{uuid.uuid4().hex[:8]}"
    status, body = call(broker.admin_url, "PUT", f"/admin/v2/namespaces/{ns}")
    assert status == 204, body
    return ns


@pytest.fixture
def pclient(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
    yield c
    c.close()


def set_strategy(broker: BrokerProcess, ns: str, strategy: str) -> None:
    status, body = call(broker.admin_url, "POST", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy",
                        json.dumps(strategy))
    assert status == 204, body


def all_versions(broker: BrokerProcess, ns_topic: str) -> Any:
    status, body = call(broker.admin_url, "GET", f"/admin/v2/schemas/{ns_topic}/schemas")
    assert status == 200, body
    return body


def version_of(msg: pulsar.Message) -> int:
    """The message's schema version as the client decodes it (what AvroSchema downloads by)."""
    assert msg.schema_version()  # the raw version bytes are there
    return int(msg._message.int_schema_version())


def test_backward_v2_with_optional_field_then_consumer_reads_both_versions(
        broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    set_strategy(broker, namespace, "BACKWARD")
    topic = f"persistent://{namespace}/users"
    user_v2 = _user_v2()
    p1 = pclient.create_producer(topic, schema=AvroSchema(UserV1))
    p1.send(UserV1(name="ada", age=36))
    p2 = pclient.create_producer(topic, schema=AvroSchema(user_v2))
    p2.send(user_v2(name="bob", age=41, email="bob@example.com"))
    consumer = pclient.subscribe(topic, "readers", schema=AvroSchema(user_v2), initial_position=EARLIEST)
    first, second = consumer.receive(10_000), consumer.receive(10_000)
    assert [version_of(first), version_of(second)] == [0, 1]
    assert (first.value().name, first.value().age, first.value().email) == ("ada", 36, None)
    assert (second.value().name, second.value().email) == ("bob", "bob@example.com")
    status, body = call(broker.admin_url, "GET", f"/admin/v2/schemas/{namespace}/users/schemas")
    assert status == 200
    assert [v["version"] for v in body["getSchemaResponses"]] == [0, 1]
    assert {v["type"] for v in body["getSchemaResponses"]} == {"AVRO"}
    # the same schema again is the same version, not a new one
    again = pclient.create_producer(topic, schema=AvroSchema(UserV1))
    again.send(UserV1(name="cy", age=7))
    assert version_of(consumer.receive(10_000)) == 0
    for c in (consumer, p1, p2, again):
        c.close()


def test_removing_a_required_field_is_refused_under_full_and_forward(
        broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    set_strategy(broker, namespace, "BACKWARD")
    topic = f"persistent://{namespace}/users"
    pclient.create_producer(topic, schema=AvroSchema(UserV1)).close()
    pclient.create_producer(topic, schema=AvroSchema(_user_v2())).close()
    # BACKWARD: a new required field without a default cannot read older data
    with pytest.raises(pulsar.IncompatibleSchema):
        pclient.create_producer(topic, schema=AvroSchema(_user_required_extra()))
    for strategy in ("FULL", "FORWARD"):
        set_strategy(broker, namespace, strategy)
        with pytest.raises(pulsar.IncompatibleSchema):  # readers of v2 need `age`
            pclient.create_producer(topic, schema=AvroSchema(_user_v3()))
    body = all_versions(broker, f"{namespace}/users")
    assert [v["version"] for v in body["getSchemaResponses"]] == [0, 1]  # nothing refused was stored


def test_always_incompatible_refuses_any_new_version(
        broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    set_strategy(broker, namespace, "ALWAYS_INCOMPATIBLE")
    topic = f"persistent://{namespace}/fixed"
    first = pclient.create_producer(topic, schema=AvroSchema(UserV1))
    with pytest.raises(pulsar.IncompatibleSchema):
        pclient.create_producer(topic, schema=AvroSchema(_user_v2()))
    same = pclient.create_producer(topic, schema=AvroSchema(UserV1))  # the stored schema is fine
    same.close()
    first.close()


def test_always_compatible_accepts_a_changed_type(
        broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    set_strategy(broker, namespace, "ALWAYS_COMPATIBLE")
    topic = f"persistent://{namespace}/anything"
    pclient.create_producer(topic, schema=AvroSchema(UserV1)).close()
    pclient.create_producer(topic, schema=JsonSchema(_user_v3())).close()
    body = all_versions(broker, f"{namespace}/anything")
    assert [v["type"] for v in body["getSchemaResponses"]] == ["AVRO", "JSON"]


def test_consumers_with_compatible_schema_share_a_subscription_incompatible_is_refused(
        broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    set_strategy(broker, namespace, "BACKWARD")
    topic = f"persistent://{namespace}/json-users"
    producer = pclient.create_producer(topic, schema=JsonSchema(UserV1))
    producer.send(UserV1(name="ada", age=36))
    c1 = pclient.subscribe(topic, "shared", schema=JsonSchema(UserV1), consumer_type=pulsar.ConsumerType.Shared,
                           initial_position=EARLIEST)
    user_v2 = _user_v2()
    c2 = pclient.subscribe(topic, "shared", schema=JsonSchema(user_v2), consumer_type=pulsar.ConsumerType.Shared,
                           initial_position=EARLIEST)
    with pytest.raises(pulsar.IncompatibleSchema):
        pclient.subscribe(topic, "shared", schema=JsonSchema(_user_required_extra()),
                          consumer_type=pulsar.ConsumerType.Shared)
    msg = c1.receive(10_000)
    assert msg.value().name == "ada"
    c1.acknowledge(msg)
    body = all_versions(broker, f"{namespace}/json-users")
    assert [v["version"] for v in body["getSchemaResponses"]] == [0]  # consumers add no version
    for c in (c1, c2, producer):
        c.close()


def test_schema_versions_survive_a_restart(broker_factory: Any, tmp_path: Any) -> None:
    data = tmp_path / "restart"
    b = broker_factory(data_dir=data)
    ns = "public/default"
    set_strategy(b, ns, "BACKWARD")
    topic = f"persistent://{ns}/durable-users"
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    user_v2 = _user_v2()
    client.create_producer(topic, schema=AvroSchema(UserV1)).send(UserV1(name="ada", age=36))
    client.create_producer(topic, schema=AvroSchema(user_v2)).send(user_v2(name="bob", age=41, email="b@x"))
    client.close()
    assert b.stop() == 0
    b2 = broker_factory(data_dir=data)
    status, body = call(b2.admin_url, "GET", f"/admin/v2/schemas/{ns}/durable-users/schemas")
    assert status == 200 and [v["version"] for v in body["getSchemaResponses"]] == [0, 1]
    status, body = call(b2.admin_url, "GET", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy")
    assert (status, body) == (200, "BACKWARD")
    client = pulsar.Client(b2.url, operation_timeout_seconds=10, logger=_quiet_logger())
    consumer = client.subscribe(topic, "after-restart", schema=AvroSchema(user_v2), initial_position=EARLIEST)
    got = [consumer.receive(10_000) for _ in range(2)]
    assert [version_of(m) for m in got] == [0, 1]
    assert [m.value().name for m in got] == ["ada", "bob"]
    with pytest.raises(pulsar.IncompatibleSchema):  # the strategy and the versions came back
        client.create_producer(topic, schema=AvroSchema(_user_required_extra()))
    client.close()


def test_asyncio_client_gets_versions_and_incompatible_schema(broker: BrokerProcess, namespace: str) -> None:
    import asyncio

    import pulsar.asyncio as pa

    set_strategy(broker, namespace, "BACKWARD")
    topic = f"persistent://{namespace}/async-users"
    user_v2 = _user_v2()

    async def scenario() -> tuple[list[int], list[str], pulsar.Result]:
        client = pa.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            p1 = await client.create_producer(topic, schema=JsonSchema(UserV1))
            await p1.send(UserV1(name="ada", age=36))
            p2 = await client.create_producer(topic, schema=JsonSchema(user_v2))
            await p2.send(user_v2(name="bob", age=41, email="b@x"))
            try:
                await client.create_producer(topic, schema=JsonSchema(_user_required_extra()))
                refused = pulsar.Result.Ok
            except pa.PulsarException as exc:
                refused = exc.error()
            consumer = await client.subscribe(topic, "async-readers", schema=JsonSchema(user_v2),
                                              initial_position=EARLIEST)
            got = [await consumer.receive() for _ in range(2)]
            return [version_of(m) for m in got], [m.value().name for m in got], refused
        finally:
            await client.close()

    versions, names, refused = asyncio.run(scenario())
    assert versions == [0, 1] and names == ["ada", "bob"]
    assert refused == pulsar.Result.IncompatibleSchema


def test_partitions_share_their_topics_versions(broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    set_strategy(broker, namespace, "BACKWARD")
    status, body = call(broker.admin_url, "PUT", f"/admin/v2/persistent/{namespace}/parts/partitions", "3")
    assert status == 204, body
    topic = f"persistent://{namespace}/parts"
    user_v2 = _user_v2()
    p1 = pclient.create_producer(topic, schema=AvroSchema(UserV1))
    for i in range(3):
        p1.send(UserV1(name=f"v1-{i}", age=i), partition_key=str(i))
    p2 = pclient.create_producer(topic, schema=AvroSchema(user_v2))
    for i in range(3):
        p2.send(user_v2(name=f"v2-{i}", age=i, email="e"), partition_key=str(i))
    consumer = pclient.subscribe(topic, "all", schema=AvroSchema(user_v2), initial_position=EARLIEST)
    got = {m.value().name: version_of(m) for m in (consumer.receive(10_000) for _ in range(6))}
    assert got == {**{f"v1-{i}": 0 for i in range(3)}, **{f"v2-{i}": 1 for i in range(3)}}
    assert [v["version"] for v in all_versions(broker, f"{namespace}/parts")["getSchemaResponses"]] == [0, 1]
    for c in (consumer, p1, p2):
        c.close()


def test_broker_default_strategy_applies_without_a_policy(broker_factory: Any) -> None:
    b = broker_factory(env={"LETTERBOX_SCHEMA_COMPATIBILITY_STRATEGY": "always_incompatible"})
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    topic = "persistent://public/default/broker-default"
    client.create_producer(topic, schema=AvroSchema(UserV1)).close()
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(_user_v2()))
    set_strategy(b, "public/default", "BACKWARD")  # a namespace policy wins over the broker's default
    client.create_producer(topic, schema=AvroSchema(_user_v2())).close()
    client.close()


def test_v3_removing_a_required_field_refused_under_full_accepted_under_backward_as_pulsar(
        broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    """The acceptance's v1 -> v2 (added optional field) -> v3 (removed the required `age`).
    Pulsar checks AVRO/JSON with Avro's validators (AvroSchemaBasedCompatibilityCheck):
    BACKWARD is "the new schema can read the latest version's data" (canReadStrategy, the
    latest only), and a reader ignores a field it does not have, so Pulsar ACCEPTS v3 under
    BACKWARD; it refuses it under FORWARD and FULL (a v2 reader cannot fill `age`, which has
    no default), and FULL is Pulsar's default (schemaCompatibilityStrategy=FULL). letterbox
    does the same: refused with IncompatibleSchema under the default, accepted under BACKWARD."""
    import asyncio

    import pulsar.asyncio as pa

    topic = f"persistent://{namespace}/evolving"
    user_v2, user_v3 = _user_v2(), _user_v3()
    p1 = pclient.create_producer(topic, schema=AvroSchema(UserV1))  # no policy: the broker's FULL
    p1.send(UserV1(name="ada", age=36))
    p2 = pclient.create_producer(topic, schema=AvroSchema(user_v2))  # an optional field: FULL allows it
    p2.send(user_v2(name="bob", age=41, email="bob@example.com"))
    with pytest.raises(pulsar.IncompatibleSchema):
        pclient.create_producer(topic, schema=AvroSchema(user_v3))

    async def refused_async() -> pulsar.Result:
        client = pa.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            await client.create_producer(topic, schema=AvroSchema(user_v3))
            return pulsar.Result.Ok
        except pa.PulsarException as exc:
            return exc.error()
        finally:
            await client.close()

    assert asyncio.run(refused_async()) == pulsar.Result.IncompatibleSchema
    assert [v["version"] for v in all_versions(broker, f"{namespace}/evolving")["getSchemaResponses"]] == [0, 1]

    set_strategy(broker, namespace, "BACKWARD")
    p3 = pclient.create_producer(topic, schema=AvroSchema(user_v3))  # v3 reads v2's data: accepted
    p3.send(user_v3(name="cy", email="cy@example.com"))
    consumer = pclient.subscribe(topic, "v3-readers", schema=AvroSchema(user_v3), initial_position=EARLIEST)
    got = [consumer.receive(10_000) for _ in range(3)]
    assert [version_of(m) for m in got] == [0, 1, 2]
    assert [(m.value().name, m.value().email) for m in got] == [
        ("ada", None), ("bob", "bob@example.com"), ("cy", "cy@example.com")]
    assert all(not hasattr(m.value(), "age") for m in got)  # v3 has no `age`
    for c in (consumer, p1, p2, p3):
        c.close()


def test_forward_accepts_a_nullable_field_made_required_and_old_reader_reads_both(
        broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    """The Python client's schema_test.test_schema_evolve, as Apache Pulsar answers it: under
    FORWARD the old schema must read the new one's data, and a reader of ["null", "int"] reads
    an "int"; the record's name (User1, User2) is not compared (Avro's resolving grammar,
    which Pulsar's checker runs, matches records by structure)."""
    class User1(Record):
        name = String()
        age = Integer()

    class User2(Record):
        _sorted_fields = True
        name = String()
        age = Integer(required=True)

    set_strategy(broker, namespace, "FORWARD")
    topic = f"persistent://{namespace}/evolve"
    p1 = pclient.create_producer(topic, schema=AvroSchema(User1))
    reader = pclient.create_reader(topic, schema=AvroSchema(User1), start_message_id=pulsar.MessageId.earliest)
    p2 = pclient.create_producer(topic, schema=AvroSchema(User2))
    p1.send(User1(name="one", age=100))
    p2.send(User2(name="two", age=200))
    got = [reader.read_next(10_000).value() for _ in range(2)]
    assert [(v.name, v.age) for v in got] == [("one", 100), ("two", 200)]
    for c in (reader, p1, p2):
        c.close()


def test_full_accepts_the_same_record_with_defaults_on_every_field(
        broker: BrokerProcess, pclient: pulsar.Client, namespace: str) -> None:
    """The Python client's schema_test.test_avro_required_default under the default FULL:
    accepted by Apache Pulsar (each schema reads the other's data; names are not compared)."""
    class Sub(Record):
        _sorted_fields = True
        x = Integer()
        z = String()

    class Example(Record):
        a = Integer()
        b = Boolean(required=True)
        f = String()
        j = Sub()

    class ExampleRequiredDefault(Record):
        _sorted_fields = True
        a = Integer(required_default=True)
        b = Boolean(required=True, required_default=True)
        f = String(required_default=True)
        j = Sub(required_default=True)

    topic = f"persistent://{namespace}/defaults"
    first = pclient.create_producer(topic, schema=AvroSchema(Example))
    second = pclient.create_producer(topic, schema=AvroSchema(ExampleRequiredDefault))
    assert [v["version"] for v in all_versions(broker, f"{namespace}/defaults")["getSchemaResponses"]] == [0, 1]
    first.close()
    second.close()
