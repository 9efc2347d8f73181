"""Python scenarios: consumer and producer features around the failure-handling core: a DLQ
without an initial subscription, nack inside a batch without batch-index acks, unsubscribe,
initial positions, multi-topic and pattern consumers, a reader on a partitioned topic, named
producers and their sequence ids, non-persistent topics."""
from __future__ import annotations

import re
import time
from typing import Any

import pulsar

from tests.conformance.records import error_name
from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, receive_all, short

Earliest = pulsar.InitialPosition.Earliest
Shared = pulsar.ConsumerType.Shared


def _data(msgs: list[Any]) -> list[str]:
    return [m.data().decode() for m in msgs]


@scenario
def dlq_without_initial_subscription(t: Target, p: str) -> Any:
    """A dead letter topic created by the client's DLQ producer with no initial subscription: a
    consumer that subscribes to it at the earliest position afterwards finds the dead letter."""
    topic = f"{p}-dlqnosub"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200,
                           dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1))
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"poison")
        counts = []
        for _ in range(2):
            m = cons.receive(12_000)
            counts.append(m.redelivery_count())
            cons.negative_acknowledge(m)
        deadline = time.monotonic() + 10  # the client sends the dead letter on its next nack tick
        while time.monotonic() < deadline:
            _, st = admin(t, "GET", f"/admin/v2/persistent/public/default/{short(topic)}-s-DLQ/stats")
            if isinstance(st, dict) and st.get("msgInCounter", 0) >= 1:
                break
            time.sleep(0.2)
        dlq = c.subscribe(f"{topic}-s-DLQ", "late", initial_position=Earliest)
        found = _data(receive_all(dlq, 2000))
        dlq.close()
        cons.close()
        return {"counts": counts, "found_later": found}


@scenario
def batch_nack_without_index_ack(t: Target, p: str) -> Any:
    """Without batch_index_ack_enabled: one message of a batch nacked, the others acked first:
    what comes back."""
    topic = f"{p}-batchnacknoidx"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=300)
        prod = c.create_producer(topic, batching_enabled=True, batching_max_messages=4,
                                 batching_max_publish_delay_ms=5000)
        for i in range(4):
            prod.send_async(f"m{i}".encode(), None)
        prod.flush()
        for m in [cons.receive(5000) for _ in range(4)]:
            if m.data() == b"m1":
                cons.negative_acknowledge(m)
            else:
                cons.acknowledge(m)
        back = receive_all(cons, 12_000, limit=1) + receive_all(cons, 1500)
        for m in back:
            cons.acknowledge(m)
        cons.close()
        return sorted([m.data().decode(), m.redelivery_count()] for m in back)


@scenario
def unsubscribe_rules(t: Target, p: str) -> Any:
    """unsubscribe with another consumer of the subscription connected, then alone; the
    subscription list after each."""
    topic = f"{p}-unsub"
    path = f"/admin/v2/persistent/public/default/{short(topic)}/subscriptions"
    with client(t) as c:
        a = c.subscribe(topic, "s", consumer_type=Shared)
        b = c.subscribe(topic, "s", consumer_type=Shared)
        try:
            a.unsubscribe()
            first = "ok"
        except Exception as e:
            first = error_name(e)
        after_first = admin(t, "GET", path)[1]
        b.close()
        try:
            a.unsubscribe()
            second = "ok"
        except Exception as e:
            second = error_name(e)
        after_second = admin(t, "GET", path)[1]
        return {"with_other_consumer": first, "subs": after_first, "alone": second, "subs_after": after_second}


@scenario
def initial_positions(t: Target, p: str) -> Any:
    """Two new subscriptions on a topic with a backlog: Earliest gets it, Latest only what follows."""
    topic = f"{p}-initpos"
    with client(t) as c:
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(3):
            prod.send(f"m{i}".encode())
        early = c.subscribe(topic, "early", initial_position=Earliest)
        late = c.subscribe(topic, "late", initial_position=pulsar.InitialPosition.Latest)
        prod.send(b"m3")
        out = {"earliest": _data(receive_all(early, 1500)), "latest": _data(receive_all(late, 1500))}
        early.close()
        late.close()
        prod.close()
        return out


@scenario
def multi_topic_consumer(t: Target, p: str) -> Any:
    """One consumer of a list of topics gets every topic's messages, each with its topic name."""
    topics = [f"{p}-multi-{i}" for i in range(3)]
    with client(t) as c:
        cons = c.subscribe(topics, "s", initial_position=Earliest)
        for i, topic in enumerate(topics):
            prod = c.create_producer(topic, batching_enabled=False)
            prod.send(f"from-{i}".encode())
            prod.close()
        got = receive_all(cons, 2000)
        for m in got:
            cons.acknowledge(m)
        cons.close()
        return sorted([m.data().decode(), m.topic_name().replace(p, "{p}")] for m in got)


@scenario
def pattern_consumer(t: Target, p: str) -> Any:
    """A consumer subscribed by regex gets the messages of existing matching topics only."""
    stem = short(p)
    with client(t) as c:
        for name in ("pat-a", "pat-b", "other"):
            admin(t, "PUT", f"/admin/v2/persistent/public/default/{stem}-{name}")
        cons = c.subscribe(re.compile(f"persistent://public/default/{re.escape(stem)}-pat-.*"), "s",
                           initial_position=Earliest)
        for name in ("pat-a", "pat-b", "other"):
            prod = c.create_producer(f"{p}-{name}", batching_enabled=False)
            prod.send(name.encode())
            prod.close()
        got = sorted(_data(receive_all(cons, 2000)))
        cons.close()
        return got


@scenario
def reader_on_partitioned_topic(t: Target, p: str) -> Any:
    """A reader from the earliest id on a partitioned topic reads every partition."""
    topic = f"{p}-partreader"
    admin(t, "PUT", f"/admin/v2/persistent/public/default/{short(topic)}/partitions", 2)
    with client(t) as c:
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(6):
            prod.send(f"m{i}".encode(), partition_key=f"k{i}")
        prod.close()
        try:
            r = c.create_reader(topic, pulsar.MessageId.earliest)
        except Exception as e:
            return {"reader": error_name(e)}
        got = []
        while len(got) < 20:
            try:
                got.append(r.read_next(2000).data().decode())
            except pulsar.Timeout:
                break
        r.close()
        return {"reader": "ok", "read": sorted(got)}


@scenario
def named_producer_sequence_ids(t: Target, p: str) -> Any:
    """A named producer's sequence ids, and a second producer with the same name (refused while
    the first is open); after a reconnect the producer's last_sequence_id."""
    topic = f"{p}-seq"
    with client(t) as c:
        prod = c.create_producer(topic, producer_name=f"{short(p)}-writer", batching_enabled=False)
        for i in range(3):
            prod.send(f"m{i}".encode())
        first_last = prod.last_sequence_id()
        try:
            c.create_producer(topic, producer_name=f"{short(p)}-writer").close()
            twin = "ok"
        except Exception as e:
            twin = error_name(e)
        name = prod.producer_name() == f"{short(p)}-writer"
        prod.close()
        again = c.create_producer(topic, producer_name=f"{short(p)}-writer", batching_enabled=False)
        resumed = again.last_sequence_id()
        again.close()
        return {"last_sequence_id": first_last, "same_name_twice": twin, "name_kept": name,
                "last_sequence_id_after_reconnect": resumed}


@scenario
def non_persistent_topic(t: Target, p: str) -> Any:
    """A non-persistent topic: a connected consumer gets what is published; a subscription made
    afterwards at the earliest position gets nothing of it."""
    topic = f"non-persistent://public/default/{short(p)}-np"
    with client(t) as c:
        cons = c.subscribe(topic, "s")
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(3):
            prod.send(f"m{i}".encode())
        live = _data(receive_all(cons, 1500))
        late = c.subscribe(topic, "late", initial_position=Earliest)
        later = _data(receive_all(late, 1000))
        for x in (cons, late, prod):
            x.close()
        return {"live": live, "late": later}
