"""Python scenarios: the behaviours where letterbox once differed from Apache Pulsar, taken from
the official Python client's own test suite (seek after ack, compacted reader at a tombstone,
unknown listener name)."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from tests.conformance.records import error_name
from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, receive_all, short

Earliest = pulsar.InitialPosition.Earliest


@scenario
def seek_back_after_ack(t: Target, p: str) -> Any:
    """Replay after a fix: messages acknowledged seconds ago come back after a seek to them."""
    topic = f"{p}-seekback"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        ids = [prod.send(f"m{i}".encode()) for i in range(4)]
        for m in receive_all(cons, 1500):
            cons.acknowledge(m)
        time.sleep(1.0)  # the acks reach the broker (the client groups them for 100 ms)
        cons.seek(ids[1])
        return [m.data().decode() for m in receive_all(cons, 3000)]


@scenario
def seek_by_time_to_start(t: Target, p: str) -> Any:
    topic = f"{p}-seektime"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(3):
            prod.send(f"m{i}".encode())
        for m in receive_all(cons, 1500):
            cons.acknowledge(m)
        time.sleep(1.0)
        cons.seek(0)  # a publish time before everything
        return [m.data().decode() for m in receive_all(cons, 3000)]


@scenario
def compacted_reader_ends_at_tombstone(t: Target, p: str) -> Any:
    """A read_compacted reader whose topic ends with a tombstone: has_message_available turns
    false once the live messages are read."""
    topic = f"{p}-tombstone"
    with client(t) as c:
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"v1", partition_key="a")
        prod.send(b"v2", partition_key="b")
        prod.send(b"", partition_key="a")  # tombstone
        status, _ = admin(t, "PUT", f"/admin/v2/persistent/public/default/{short(topic)}/compaction")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            _, st = admin(t, "GET", f"/admin/v2/persistent/public/default/{short(topic)}/compaction")
            if isinstance(st, dict) and st.get("status") in ("SUCCESS", "ERROR"):
                break
            time.sleep(0.2)
        reader = c.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
        seen = []
        for _ in range(10):
            if not reader.has_message_available():
                break
            try:
                m = reader.read_next(3000)
            except pulsar.Timeout:
                seen.append("<timeout>")
                break
            seen.append(f"{m.partition_key()}={m.data().decode()}")
        return {"compaction": status, "read": seen, "available_at_end": reader.has_message_available()}


@scenario
def unknown_listener_name_refused(t: Target, p: str) -> Any:
    with client(t, listener_name="test") as c:
        try:
            c.create_producer(f"{p}-listener")
            return "created"
        except Exception as e:
            return error_name(e)
