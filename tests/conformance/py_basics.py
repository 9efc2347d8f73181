"""Python scenarios: publish and consume, acknowledgement kinds, subscription types."""
from __future__ import annotations

from typing import Any

import pulsar

from tests.conformance.records import error_name, message
from tests.conformance.registry import scenario
from tests.conformance.targets import Target, client, receive_all

Earliest = pulsar.InitialPosition.Earliest


@scenario
def produce_consume_components(t: Target, p: str) -> Any:
    """Every message component a producer sets comes back as it was sent."""
    topic = f"{p}-components"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(3):
            prod.send(f"m{i}".encode(), properties={"i": str(i), "kind": "x"}, partition_key=f"k{i}",
                      ordering_key=f"o{i}", event_timestamp=1_000 + i)
        out = []
        for m in receive_all(cons, 2000):
            rec = message(m, p)
            rec["ordering_key"] = m.ordering_key() or None
            rec["event_timestamp"] = m.event_timestamp()
            rec["topic"] = m.topic_name().replace(p, "{p}")
            cons.acknowledge(m)
            out.append(rec)
        return out


@scenario
def unacked_come_back_to_next_consumer(t: Target, p: str) -> Any:
    """Shared: what one consumer did not acknowledge goes to the next one, with a count of 0
    (a consumer that closed is not a failed delivery)."""
    topic = f"{p}-unacked"
    with client(t) as c:
        first = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(5):
            prod.send(f"m{i}".encode())
        got = receive_all(first, 2000)
        for m in got:
            if m.data() in (b"m0", b"m2"):
                first.acknowledge(m)
        first.close()
        second = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        return {"first": [m.data().decode() for m in got],
                "second": [message(m, p, props=False) for m in receive_all(second, 2000)]}


@scenario
def cumulative_ack_exclusive(t: Target, p: str) -> Any:
    topic = f"{p}-cumulative"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(5):
            prod.send(f"m{i}".encode())
        got = [cons.receive(5000) for _ in range(3)]
        cons.acknowledge_cumulative(got[2])
        cons.close()
        again = c.subscribe(topic, "s")
        return [m.data().decode() for m in receive_all(again, 2000)]


@scenario
def cumulative_ack_on_shared_refused(t: Target, p: str) -> Any:
    topic = f"{p}-cumshared"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"m0")
        m = cons.receive(5000)
        try:
            cons.acknowledge_cumulative(m)
            outcome = "accepted"
        except Exception as e:
            outcome = error_name(e)
        cons.close()
        again = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        return {"cumulative": outcome, "after": [x.data().decode() for x in receive_all(again, 2000)]}


@scenario
def exclusive_second_consumer_busy(t: Target, p: str) -> Any:
    topic = f"{p}-exclusive"
    with client(t) as c:
        c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Exclusive)
        try:
            c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Exclusive)
            return "accepted"
        except Exception as e:
            return error_name(e)


@scenario
def failover_standby_takes_over(t: Target, p: str) -> Any:
    topic = f"{p}-failover"
    with client(t) as c:
        a = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a",
                        initial_position=Earliest)
        b = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(3):
            prod.send(f"m{i}".encode())
        first = receive_all(a, 1500) or receive_all(b, 1500)
        active = a if first and first[0].data() and receive_nothing(b) else b
        for m in first:
            active.acknowledge(m)
        active.close()
        other = b if active is a else a
        for i in range(3, 5):
            prod.send(f"m{i}".encode())
        return {"first": [m.data().decode() for m in first],
                "after_failover": [m.data().decode() for m in receive_all(other, 3000)]}


def receive_nothing(consumer: Any) -> bool:
    try:
        consumer.receive(300)
    except pulsar.Timeout:
        return True
    return False


@scenario
def key_shared_keeps_key_order(t: Target, p: str) -> Any:
    topic = f"{p}-keyshared"
    with client(t) as c:
        cons = [c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, initial_position=Earliest)
                for _ in range(2)]
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(20):
            prod.send(f"m{i}".encode(), partition_key=f"k{i % 4}")
        per_key: dict[str, list[str]] = {}
        owners: dict[str, set[int]] = {}
        for n, cn in enumerate(cons):
            for m in receive_all(cn, 1500):
                per_key.setdefault(m.partition_key(), []).append(m.data().decode())
                owners.setdefault(m.partition_key(), set()).add(n)
                cn.acknowledge(m)
        return {"per_key": dict(sorted(per_key.items())),
                "one_consumer_per_key": all(len(v) == 1 for v in owners.values())}
