"""Python scenarios: typed values through schemas (Avro records and strings decoded by consumers,
an old record read with a newer reader schema), a nack on a partitioned topic, a reader of an
empty topic, the consumer's get_last_message_id."""
from __future__ import annotations

from typing import Any

import pulsar
from pulsar.schema import AvroSchema, StringSchema

from tests.conformance.records import error_name
from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, receive_all, short

Earliest = pulsar.InitialPosition.Earliest

V1 = {"type": "record", "name": "User", "namespace": "conformance",
      "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
V2 = {"type": "record", "name": "User", "namespace": "conformance",
      "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                 {"name": "email", "type": ["null", "string"], "default": None}]}


def _version(m: Any) -> Any:
    """The schema version a message carries, as a number (the client hands out its 8 bytes)."""
    v = m.schema_version()
    raw = v.encode("latin-1") if isinstance(v, str) else (v or b"")
    return int.from_bytes(raw, "big") if raw else None


@scenario
def schema_avro_values_and_newer_reader(t: Target, p: str) -> Any:
    """Avro values written with v1 and then v2 (an optional field added): a consumer with v2 reads
    both (the v1 one with the field's default), a consumer with v1 reads both too; the schema
    versions the messages carry."""
    topic = f"{p}-avrovalues"
    with client(t) as c:
        p1 = c.create_producer(topic, schema=AvroSchema(None, schema_definition=V1))
        p1.send({"name": "ann", "age": 30})
        p1.close()
        p2 = c.create_producer(topic, schema=AvroSchema(None, schema_definition=V2))
        p2.send({"name": "bob", "age": 40, "email": "b@x"})
        p2.close()
        out: dict[str, Any] = {}
        for label, definition in (("reader_v2", V2), ("reader_v1", V1)):
            try:
                cons = c.subscribe(topic, label, initial_position=Earliest,
                                   schema=AvroSchema(None, schema_definition=definition))
            except Exception as e:
                out[label] = error_name(e)
                continue
            got = receive_all(cons, 2000)
            out[label] = [{"value": m.value(), "version": _version(m)} for m in got]
            cons.close()
        return out


@scenario
def schema_string_values(t: Target, p: str) -> Any:
    """StringSchema: values decoded, and a bytes consumer sees the UTF-8 payload."""
    topic = f"{p}-strings"
    with client(t) as c:
        typed = c.subscribe(topic, "typed", initial_position=Earliest, schema=StringSchema())
        raw = c.subscribe(topic, "raw", initial_position=Earliest)
        prod = c.create_producer(topic, schema=StringSchema())
        for s in ("hello", "grüße", ""):
            prod.send(s)
        prod.close()
        out = {"typed": [m.value() for m in receive_all(typed, 1500)],
               "raw": [m.data().decode() for m in receive_all(raw, 1500)]}
        _, schema = admin(t, "GET", f"/admin/v2/schemas/public/default/{short(topic)}/schema")
        out["registered_type"] = schema.get("type") if isinstance(schema, dict) else schema
        typed.close()
        raw.close()
        return out


@scenario
def nack_on_partitioned_topic(t: Target, p: str) -> Any:
    """Shared on a 2-partition topic: the nacked messages come back (counted once), the rest not."""
    topic = f"{p}-partnack"
    admin(t, "PUT", f"/admin/v2/persistent/public/default/{short(topic)}/partitions", 2)
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200)
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(4):
            prod.send(f"m{i}".encode(), partition_key=f"k{i}")
        prod.close()
        for m in [cons.receive(5000) for _ in range(4)]:
            if m.data() in (b"m0", b"m3"):
                cons.negative_acknowledge(m)
            else:
                cons.acknowledge(m)
        back = receive_all(cons, 12_000, limit=2) + receive_all(cons, 1000)
        for m in back:
            cons.acknowledge(m)
        cons.close()
        return sorted([m.data().decode(), m.redelivery_count()] for m in back)


@scenario
def reader_of_empty_topic(t: Target, p: str) -> Any:
    """A reader from the earliest id of a topic with no message: nothing available, read_next
    times out; after one publish it is available and read."""
    topic = f"{p}-emptyread"
    with client(t) as c:
        admin(t, "PUT", f"/admin/v2/persistent/public/default/{short(topic)}")
        r = c.create_reader(topic, pulsar.MessageId.earliest)
        before = r.has_message_available()
        try:
            r.read_next(1000)
            timed_out = False
        except pulsar.Timeout:
            timed_out = True
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"m0")
        prod.close()
        after = r.has_message_available()
        read = r.read_next(5000).data().decode()
        r.close()
        return {"available_before": before, "read_timed_out": timed_out, "available_after": after, "read": read}


@scenario
def consumer_last_message_id(t: Target, p: str) -> Any:
    """consumer.get_last_message_id(): on an empty topic, then equal to the last id sent."""
    topic = f"{p}-lastmsg"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        empty = cons.get_last_message_id()
        prod = c.create_producer(topic, batching_enabled=False)
        ids = [prod.send(f"m{i}".encode()) for i in range(3)]
        prod.close()
        last = cons.get_last_message_id()
        cons.close()
        return {"empty_entry_id": empty.entry_id(), "equals_last_sent": str(last) == str(ids[-1]),
                "equals_first_sent": str(last) == str(ids[0])}
