"""Python scenarios: letterbox's broker-side failure policies, switched on through the consumer's
`letterbox.*` properties (docs/failure-handling.md). Apache Pulsar keeps consumer properties as
metadata and ignores them, so these are deliberate differences: each record shows both."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, client, receive_all

Earliest = pulsar.InitialPosition.Earliest


@scenario
def broker_backoff_property(t: Target, p: str) -> Any:
    """Exclusive, nack delay 100 ms, `letterbox.backoff.min_ms=3000`: is the nacked message back
    within 1.5 s, within 10 s, and with what count."""
    topic = f"{p}-backoff"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest, negative_ack_redelivery_delay_ms=100,
                           properties={"letterbox.backoff.min_ms": "3000"})
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"m0")
        cons.negative_acknowledge(cons.receive(5000))
        start = time.monotonic()
        back = receive_all(cons, 10_000, limit=1)
        took = time.monotonic() - start
        for m in back:
            cons.acknowledge(m)
        cons.close()
        return {"back_within_1_5s": bool(back) and took < 1.5, "back_within_10s": bool(back),
                "count": back[0].redelivery_count() if back else None}


@scenario
def broker_dead_letter_property(t: Target, p: str) -> Any:
    """Exclusive, `letterbox.dlq.max_redeliveries=1`: the deliveries the consumer sees when it
    nacks everything (at most 4), and what the dead letter topic's subscription holds (payload,
    key and the names of its properties)."""
    topic = f"{p}-brokerdlq"
    with client(t) as c:
        dlq = c.subscribe(f"{topic}-s-DLQ", "audit", initial_position=Earliest)
        cons = c.subscribe(topic, "s", initial_position=Earliest, negative_ack_redelivery_delay_ms=100,
                           properties={"letterbox.dlq.max_redeliveries": "1"})
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"poison", partition_key="k", properties={"app": "x"})
        seen: list[int] = []
        while len(seen) < 4:
            try:
                m = cons.receive(2500)
            except pulsar.Timeout:
                break
            seen.append(m.redelivery_count())
            if len(seen) < 4:
                cons.negative_acknowledge(m)
            else:
                cons.acknowledge(m)
        dead = [{"data": m.data().decode(), "key": m.partition_key() or None,
                 "property_names": sorted(m.properties()),
                 "reason": m.properties().get("DEAD_LETTER_REASON")} for m in receive_all(dlq, 2000)]
        cons.close()
        dlq.close()
        return {"deliveries": seen, "dead": dead}
