"""Python scenarios: delayed delivery (deliver_after / deliver_at), honoured on Shared and
Key_Shared, ignored on Exclusive and Failover. Timing is recorded as coarse facts only: nothing
in the first second, received within ten."""
from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pulsar

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, short

Earliest = pulsar.InitialPosition.Earliest


def _delayed(t: Target, p: str, name: str, ctype: pulsar.ConsumerType, after_s: float = 1.0, **delay: Any) -> Any:
    """A delayed message d, then an immediate one m1: the order they arrive in, and whether d came
    more than `after_s` seconds after m1 (coarse: well below the delay)."""
    topic = f"{p}-{name}"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=ctype, initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"d", **delay)
        prod.send(b"m1")
        arrived: dict[str, float] = {}
        for _ in range(2):
            try:
                m = cons.receive(10_000)
            except pulsar.Timeout:
                break
            arrived[m.data().decode()] = time.monotonic()
            cons.acknowledge(m)
        cons.close()
        prod.close()
        late = "d" in arrived and "m1" in arrived and arrived["d"] - arrived["m1"] > after_s
        return {"order": list(arrived), f"d_over_{after_s:g}s_after_m1": late}


@scenario
def delayed_deliver_after_shared(t: Target, p: str) -> Any:
    return _delayed(t, p, "delay-shared", pulsar.ConsumerType.Shared, deliver_after=timedelta(seconds=3))


@scenario
def delayed_one_second_shared(t: Target, p: str) -> Any:
    """A delay of one second: Apache Pulsar hands out a delayed message up to its
    delayedDeliveryTickTimeMillis (1 s) early, so this one arrives at once; letterbox waits."""
    return _delayed(t, p, "delay-1s", pulsar.ConsumerType.Shared, after_s=0.5, deliver_after=timedelta(seconds=1))


@scenario
def delayed_deliver_at_key_shared(t: Target, p: str) -> Any:
    return _delayed(t, p, "delay-keyshared", pulsar.ConsumerType.KeyShared,
                    deliver_at=int(time.time() * 1000) + 3000)


@scenario
def delayed_ignored_on_exclusive(t: Target, p: str) -> Any:
    """Exclusive: a message to deliver in 5 s arrives at once, in publish order."""
    return _delayed(t, p, "delay-exclusive", pulsar.ConsumerType.Exclusive, deliver_after=timedelta(seconds=5))


@scenario
def delayed_ignored_on_failover(t: Target, p: str) -> Any:
    return _delayed(t, p, "delay-failover", pulsar.ConsumerType.Failover, deliver_after=timedelta(seconds=5))


@scenario
def delayed_in_subscription_stats(t: Target, p: str) -> Any:
    """While a delayed message waits, the subscription's stats: backlog and msgDelayed."""
    topic = f"{p}-delaystats"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"d", deliver_after=timedelta(seconds=4))
        prod.send(b"m1")
        first = cons.receive(5000)
        cons.acknowledge(first)
        time.sleep(1.0)
        _, st = admin(t, "GET", f"/admin/v2/persistent/public/default/{short(topic)}/stats")
        sub = st["subscriptions"]["s"]
        then = cons.receive(10_000)
        cons.acknowledge(then)
        cons.close()
        return {"first": first.data().decode(), "msgBacklog": sub["msgBacklog"], "msgDelayed": sub["msgDelayed"],
                "then": then.data().decode()}


@scenario
def delayed_redelivery_after_nack_keeps_delay_semantics(t: Target, p: str) -> Any:
    """A delayed message, once delivered and nacked, comes back after the nack delay (not after a
    second delay)."""
    topic = f"{p}-delaynack"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=Earliest,
                           negative_ack_redelivery_delay_ms=300)
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"d", deliver_after=timedelta(seconds=2))
        m = cons.receive(10_000)
        cons.negative_acknowledge(m)
        again = cons.receive(12_000)
        cons.acknowledge(again)
        cons.close()
        return [[m.data().decode(), m.redelivery_count()], [again.data().decode(), again.redelivery_count()]]
