"""Python scenarios: the official client's dead letter policy (pulsar.ConsumerDeadLetterPolicy):
when a message goes, where (the default `<topic>-<subscription>-DLQ` or a named topic), what it
carries there, and that the source subscription is done with it."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from tests.conformance.records import message, norm_text
from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, receive_all, short

Earliest = pulsar.InitialPosition.Earliest
Shared = pulsar.ConsumerType.Shared


def _fail_poison(cons: Any, poison: bytes, max_count: int, most: int = 6) -> list[list[Any]]:
    """Nack the deliveries of `poison` (at most `most`, later ones are acked), ack the rest; once
    the poison was nacked with the count that sends it to the DLQ (or `most` times), take what
    still comes within 1.5 s.
    Waits of 10 s: Apache Pulsar's Shared dispatcher sometimes takes seconds to redeliver."""
    seen: list[list[Any]] = []
    deadline = time.monotonic() + 20
    quiet = 10_000
    while time.monotonic() < deadline:
        try:
            m = cons.receive(quiet)
        except pulsar.Timeout:
            break
        seen.append([m.data().decode(), m.redelivery_count()])
        nacks = sum(1 for s in seen if s[0] == poison.decode())
        if m.data() != poison or nacks > most:
            cons.acknowledge(m)
            continue
        cons.negative_acknowledge(m)
        if m.redelivery_count() >= max_count or nacks == most:
            quiet = 1500
    return seen


def _dead(c: pulsar.Client, dlq: str, sub: str, p: str, expect: int = 1) -> list[dict[str, Any]]:
    """What the DLQ's subscription holds: `expect` messages waited for (10 s each), then 1 s more."""
    cons = c.subscribe(dlq, sub, consumer_type=Shared)
    got = []
    for _ in range(expect):
        try:
            got.append(cons.receive(10_000))
        except pulsar.Timeout:
            break
    got += receive_all(cons, 1000)
    out = []
    for m in got:
        rec = message(m, p)
        rec["topic"] = norm_text(m.topic_name(), p)
        out.append(rec)
        cons.acknowledge(m)
    cons.close()
    return out


def _left(c: pulsar.Client, topic: str) -> list[str]:
    cons = c.subscribe(topic, "s", consumer_type=Shared)
    left = [m.data().decode() for m in receive_all(cons, 1500)]
    cons.close()
    return left


def _policy(**kwargs: Any) -> pulsar.ConsumerDeadLetterPolicy:
    return pulsar.ConsumerDeadLetterPolicy(**kwargs)


@scenario
def dlq_default_topic_name(t: Target, p: str) -> Any:
    """max_redeliver_count=1: the poison message is delivered with counts 0, 1 and then lands in
    `<topic>-<sub>-DLQ`, whose initial subscription holds it; the source subscription is empty."""
    topic = f"{p}-dlqdefault"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200,
                           dead_letter_policy=_policy(max_redeliver_count=1, initial_subscription_name="audit"))
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"m0")
        prod.send(b"poison", partition_key="k", properties={"app": "x"})
        prod.send(b"m2")
        seen = _fail_poison(cons, b"poison", 1)
        dead = _dead(c, f"{topic}-s-DLQ", "audit", p)
        cons.close()
        return {"seen": seen, "dead": dead, "left": _left(c, topic)}


@scenario
def dlq_named_topic(t: Target, p: str) -> Any:
    """dead_letter_topic names the DLQ; the default one is not created."""
    topic = f"{p}-dlqnamed"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200,
                           dead_letter_policy=_policy(max_redeliver_count=1, dead_letter_topic=f"{p}-graveyard",
                                                      initial_subscription_name="audit"))
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"poison")
        seen = _fail_poison(cons, b"poison", 1)
        dead = _dead(c, f"{p}-graveyard", "audit", p)
        cons.close()
        status, _ = admin(t, "GET", f"/admin/v2/persistent/public/default/{short(topic)}-s-DLQ/stats")
        return {"seen": seen, "dead": dead, "default_dlq_stats": status}


@scenario
def dlq_keeps_message_components(t: Target, p: str) -> Any:
    """What the dead letter carries: payload, key, ordering key, event time, the application's
    properties and the ones the client adds."""
    topic = f"{p}-dlqcomponents"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200,
                           dead_letter_policy=_policy(max_redeliver_count=1, initial_subscription_name="audit"))
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"poison", partition_key="key-1", ordering_key="ok-1", event_timestamp=12345,
                  properties={"app": "x", "trace": "t-1"})
        _fail_poison(cons, b"poison", 1)
        dlq = c.subscribe(f"{topic}-s-DLQ", "audit")
        m = dlq.receive(10_000)
        cons.close()
        rec = message(m, p)
        rec.update(ordering_key=m.ordering_key() or None, event_timestamp=m.event_timestamp())
        dlq.acknowledge(m)
        dlq.close()
        return rec


@scenario
def dlq_several_messages(t: Target, p: str) -> Any:
    """Three poison messages among good ones: all three reach the DLQ, the good ones are consumed
    once each."""
    topic = f"{p}-dlqmany"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200,
                           dead_letter_policy=_policy(max_redeliver_count=1, initial_subscription_name="audit"))
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(6):
            prod.send(f"{'bad' if i % 2 else 'ok'}{i}".encode())
        good, deliveries, last = [], 0, set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                m = cons.receive(10_000 if len(last) < 3 else 1500)
            except pulsar.Timeout:
                break
            deliveries += 1
            if m.data().startswith(b"bad"):
                cons.negative_acknowledge(m)
                if m.redelivery_count() >= 1:
                    last.add(m.data())
            else:
                good.append(m.data().decode())
                cons.acknowledge(m)
        dead = sorted(d["data"] for d in _dead(c, f"{topic}-s-DLQ", "audit", p, expect=3))
        cons.close()
        return {"good": sorted(good), "deliveries": deliveries, "dead": dead, "left": _left(c, topic)}


@scenario
def dlq_exclusive_subscription(t: Target, p: str) -> Any:
    """The same policy on an Exclusive subscription (at most 4 nacks of the poison message, the
    later deliveries acked)."""
    topic = f"{p}-dlqexclusive"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest, negative_ack_redelivery_delay_ms=200,
                           dead_letter_policy=_policy(max_redeliver_count=2, initial_subscription_name="audit"))
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"poison")
        seen = _fail_poison(cons, b"poison", 2, most=4)
        dead = [d["data"] for d in _dead(c, f"{topic}-s-DLQ", "audit", p, expect=0)]
        _, st = admin(t, "GET", f"/admin/v2/persistent/public/default/{short(topic)}/stats")
        cons.close()
        # a coarse fact: the broker sent the message a handful of times, not in a loop
        sent = st["subscriptions"]["s"]["msgOutCounter"] if isinstance(st, dict) else None
        return {"seen": seen, "dead": dead, "sent_at_most_10": sent is not None and sent <= 10}


@scenario
def redelivery_count_across_reconnect(t: Target, p: str) -> Any:
    """Shared: a message nacked twice, then its consumer closes holding the third delivery; the
    count the next consumer sees."""
    topic = f"{p}-countreconnect"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200)
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"m0")
        seen = []
        for _ in range(2):
            m = cons.receive(10_000)
            seen.append(m.redelivery_count())
            cons.negative_acknowledge(m)
        m = cons.receive(10_000)
        seen.append(m.redelivery_count())
        cons.close()  # holding it
        again = c.subscribe(topic, "s", consumer_type=Shared)
        m = again.receive(10_000)
        seen.append(m.redelivery_count())
        again.acknowledge(m)
        again.close()
        return seen
