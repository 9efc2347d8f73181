"""Python scenarios: batches and acknowledgement at batch-index level (the reference broker runs
with acknowledgmentAtBatchIndexLevelEnabled=true): part of a batch acknowledged, then a
reconnect; one message of a batch nacked; cumulative acknowledgement inside a batch."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, client, receive_all

Earliest = pulsar.InitialPosition.Earliest
Shared = pulsar.ConsumerType.Shared


def _send_batch(c: pulsar.Client, topic: str, n: int) -> list[Any]:
    """n messages in one batch (batching_max_messages=n, a long publish delay, then flush)."""
    prod = c.create_producer(topic, batching_enabled=True, batching_max_messages=n,
                             batching_max_publish_delay_ms=5000)
    ids: list[Any] = [None] * n

    def done(i: int) -> Any:
        def cb(res: Any, mid: Any) -> None:
            ids[i] = mid
        return cb

    for i in range(n):
        prod.send_async(f"m{i}".encode(), done(i))
    prod.flush()
    prod.close()
    return ids


def _data(msgs: list[Any]) -> list[str]:
    return [m.data().decode() for m in msgs]


def _partial_ack_then_reconnect(t: Target, p: str, name: str, index_ack: bool) -> Any:
    topic = f"{p}-{name}"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           batch_index_ack_enabled=index_ack)
        _send_batch(c, topic, 5)
        first = [cons.receive(5000) for _ in range(5)]
        for m in first:
            if m.data() in (b"m0", b"m2", b"m4"):
                cons.acknowledge(m)
        time.sleep(0.5)  # the acks reach the broker
        cons.close()
        again = c.subscribe(topic, "s", consumer_type=Shared, batch_index_ack_enabled=index_ack)
        back = receive_all(again, 2000)
        for m in back:
            again.acknowledge(m)
        again.close()
        return {"first": _data(first), "after_reconnect": _data(back)}


@scenario
def batch_index_ack_partial_reconnect(t: Target, p: str) -> Any:
    """batch_index_ack_enabled: three of five batched messages acked, reconnect: only the other
    two come back."""
    return _partial_ack_then_reconnect(t, p, "batchidx", True)


@scenario
def batch_without_index_ack_partial_reconnect(t: Target, p: str) -> Any:
    """Without batch_index_ack_enabled the client acknowledges a batch only when all of it is
    acknowledged: after a reconnect the whole batch comes back."""
    return _partial_ack_then_reconnect(t, p, "batchnoidx", False)


@scenario
def batch_nack_one_message(t: Target, p: str) -> Any:
    """batch_index_ack_enabled: one message of a batch nacked, the others acked: what comes back."""
    topic = f"{p}-batchnack"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=Shared, initial_position=Earliest,
                           batch_index_ack_enabled=True, negative_ack_redelivery_delay_ms=300)
        _send_batch(c, topic, 4)
        for m in [cons.receive(5000) for _ in range(4)]:
            if m.data() == b"m1":
                cons.negative_acknowledge(m)
            else:
                cons.acknowledge(m)
        back = receive_all(cons, 12_000, limit=1) + receive_all(cons, 1500)
        for m in back:
            cons.acknowledge(m)
        cons.close()
        return [[m.data().decode(), m.redelivery_count()] for m in back]


@scenario
def batch_message_ids(t: Target, p: str) -> Any:
    """The ids of one batch: one entry, batch indexes 0..n-1, the same on the consumer side."""
    topic = f"{p}-batchids"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        sent = _send_batch(c, topic, 4)
        got = [cons.receive(5000) for _ in range(4)]
        for m in got:
            cons.acknowledge(m)
        cons.close()
        recv = [m.message_id() for m in got]
        return {"sent_batch_indexes": [i.batch_index() for i in sent],
                "one_entry": len({(i.ledger_id(), i.entry_id()) for i in sent}) == 1,
                "received_batch_indexes": [i.batch_index() for i in recv],
                "same_ids": [str(a) == str(b) for a, b in zip(sent, recv, strict=True)]}


@scenario
def batch_cumulative_ack_inside_batch(t: Target, p: str) -> Any:
    """Exclusive with batch-index acks: a cumulative ack of the third message of a batch, then a
    reconnect: the rest of the batch comes back."""
    topic = f"{p}-batchcumul"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest, batch_index_ack_enabled=True)
        _send_batch(c, topic, 5)
        got = [cons.receive(5000) for _ in range(5)]
        cons.acknowledge_cumulative(got[2])
        time.sleep(0.5)
        cons.close()
        again = c.subscribe(topic, "s", batch_index_ack_enabled=True)
        back = receive_all(again, 2000)
        again.close()
        return _data(back)


@scenario
def batch_receive_policy(t: Target, p: str) -> Any:
    """consumer.batch_receive() with max_num_messages=3: what each call returns."""
    topic = f"{p}-batchrecv"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest,
                           batch_receive_policy=pulsar.ConsumerBatchReceivePolicy(3, -1, 1000))
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(7):
            prod.send(f"m{i}".encode())
        time.sleep(0.5)
        calls = []
        for _ in range(4):
            msgs = list(cons.batch_receive())
            calls.append(_data(msgs))
            for m in msgs:
                cons.acknowledge(m)
        cons.close()
        return calls
