"""Python scenarios: negative acknowledgement with a delay, redelivery counts on each subscription
type, redeliver-all and the ack timeout."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, client, receive_all

Earliest = pulsar.InitialPosition.Earliest
Shared = pulsar.ConsumerType.Shared


def _send(c: pulsar.Client, topic: str, n: int, **kwargs: Any) -> None:
    prod = c.create_producer(topic, batching_enabled=False)
    for i in range(n):
        prod.send(f"m{i}".encode(), **kwargs)
    prod.close()


def _seen(m: Any) -> list[Any]:
    return [m.data().decode(), m.redelivery_count()]


def _expect(cons: Any, n: int) -> list[Any]:
    """n messages waited for 12 s each (Apache Pulsar's Shared dispatcher sometimes takes seconds
    to redeliver), then whatever else comes within a second."""
    return receive_all(cons, 12_000, limit=n) + receive_all(cons, 1000)


def _nack_until(cons: Any, target: bytes, times: int, timeout_ms: int = 12_000) -> list[list[Any]]:
    """Receive; nack `target` `times` times (then ack it); ack everything else. What arrived, in order."""
    seen: list[list[Any]] = []
    nacks = 0
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        try:
            m = cons.receive(timeout_ms)
        except pulsar.Timeout:
            break
        seen.append(_seen(m))
        if m.data() == target and nacks < times:
            nacks += 1
            cons.negative_acknowledge(m)
        else:
            cons.acknowledge(m)
            if m.data() == target:
                break
    return seen


def _nack_counts(t: Target, p: str, name: str, ctype: pulsar.ConsumerType) -> Any:
    topic = f"{p}-{name}"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=ctype, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200)
        _send(c, topic, 3)
        first = [cons.receive(5000) for _ in range(3)]
        for m in first:
            if m.data() == b"m1":
                cons.negative_acknowledge(m)
            else:
                cons.acknowledge(m)
        later = _nack_until(cons, b"m1", 1)
        cons.close()
        return {"first": [_seen(m) for m in first], "later": later}


@scenario
def nack_redelivery_count_shared(t: Target, p: str) -> Any:
    """Shared: a message nacked twice comes back twice, counted 1, 2."""
    return _nack_counts(t, p, "nack-shared", Shared)


@scenario
def nack_redelivery_count_key_shared(t: Target, p: str) -> Any:
    return _nack_counts(t, p, "nack-keyshared", pulsar.ConsumerType.KeyShared)


@scenario
def nack_redelivery_count_exclusive(t: Target, p: str) -> Any:
    """Exclusive: the nacked message comes back (with what comes after it: the client asks for a
    redeliver-all on Exclusive), and the count it carries."""
    return _nack_counts(t, p, "nack-exclusive", pulsar.ConsumerType.Exclusive)


@scenario
def nack_redelivery_count_failover(t: Target, p: str) -> Any:
    return _nack_counts(t, p, "nack-failover", pulsar.ConsumerType.Failover)


@scenario
def nack_delay_not_before(t: Target, p: str) -> Any:
    """negative_ack_redelivery_delay_ms=2500: nothing comes back in the first second, the message
    comes back within ten."""
    topic = f"{p}-nackdelay"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=2500)
        _send(c, topic, 1)
        m = cons.receive(5000)
        cons.negative_acknowledge(m)
        try:
            cons.receive(1000)
            early = True
        except pulsar.Timeout:
            early = False
        again = cons.receive(10_000)
        cons.acknowledge(again)
        cons.close()
        return {"early": early, "again": _seen(again)}


@scenario
def nack_only_the_nacked(t: Target, p: str) -> Any:
    """Shared: of five messages, the two nacked come back (and only they), counted once."""
    topic = f"{p}-nackonly"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=200)
        _send(c, topic, 5)
        for m in [cons.receive(5000) for _ in range(5)]:
            if m.data() in (b"m1", b"m3"):
                cons.negative_acknowledge(m)
            else:
                cons.acknowledge(m)
        back = _expect(cons, 2)
        for m in back:
            cons.acknowledge(m)
        cons.close()
        return sorted(_seen(m) for m in back)


@scenario
def redeliver_unacknowledged_all(t: Target, p: str) -> Any:
    """Shared: consumer.redeliver_unacknowledged_messages() brings back what was not acked,
    counted once."""
    topic = f"{p}-redeliverall"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest)
        _send(c, topic, 4)
        for m in [cons.receive(5000) for _ in range(4)]:
            if m.data() in (b"m0", b"m2"):
                cons.acknowledge(m)
        time.sleep(0.5)
        cons.redeliver_unacknowledged_messages()
        back = _expect(cons, 2)
        for m in back:
            cons.acknowledge(m)
        cons.close()
        return sorted(_seen(m) for m in back)


@scenario
def ack_timeout_redelivers(t: Target, p: str) -> Any:
    """unacked_messages_timeout_ms=10000 (the client's minimum): the unacked message comes back,
    not within 5 s, counted once; the acked one never."""
    topic = f"{p}-acktimeout"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           unacked_messages_timeout_ms=10_000)
        _send(c, topic, 2)
        for m in [cons.receive(5000) for _ in range(2)]:
            if m.data() == b"m0":
                cons.acknowledge(m)
        try:
            cons.receive(5000)
            early = True
        except pulsar.Timeout:
            early = False
        again = cons.receive(12_000)
        cons.acknowledge(again)
        rest = receive_all(cons, 1000)
        cons.close()
        return {"early": early, "again": _seen(again), "rest": [_seen(m) for m in rest]}
