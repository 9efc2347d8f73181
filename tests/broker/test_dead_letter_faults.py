"""The broker's own dead-letter path (max redeliveries) on a full disk: a move that cannot
commit leaves its messages in the subscription, redeliverable and counted (metric, one log
line, no traceback); once space returns they reach the dead letter topic exactly once, and a
restart changes nothing. Needs root for the tmpfs (skips elsewhere)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pulsar

from tests.broker.test_storage_faults import (
    N,
    P,
    T,
    api,
    backlog,
    client_for,
    dead_letter_origins,
    fill,
    healthy,
    metric,
    mid,
)
from tests.broker.test_storage_faults import small_fs as small_fs  # a fixture
from tests.conftest import BrokerProcess, wait_until

PROPS = {"letterbox.dlq.max_redeliveries": "1"}
TOPIC = "dlq-fault-src"
DLQ = f"{TOPIC}-s-DLQ"


def _dead(broker: BrokerProcess) -> list[str]:
    """The dead letters' origins (none while the DLQ does not exist)."""
    if api(broker, "GET", f"{P}/{DLQ}/stats")[0] == 404:
        return []
    return dead_letter_origins(broker, DLQ)


def _nack_everything(consumer: pulsar.Consumer, seconds: float) -> set[str]:
    """Receive and nack whatever comes for `seconds`; the ids seen."""
    seen: set[str] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            msg = consumer.receive(timeout_millis=200)
        except pulsar.Timeout:
            continue
        seen.add(mid(msg))
        consumer.negative_acknowledge(msg)
    return seen


def test_broker_dead_lettering_on_a_full_disk(small_fs: Path, broker_factory: Any) -> None:
    data = small_fs / "data"
    broker: BrokerProcess = broker_factory(data)
    client = client_for(broker)
    consumer = client.subscribe(T + TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared, properties=PROPS,
                                negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(T + TOPIC, batching_enabled=False)
    for i in range(N):
        producer.send(f"m{i}".encode())
    held = [consumer.receive(10_000) for _ in range(N)]
    ids = {mid(m) for m in held}
    assert len(ids) == N
    # the first message reaches the DLQ while there is space (this also creates the DLQ)
    consumer.negative_acknowledge(held[0])
    again = consumer.receive(10_000)
    assert mid(again) == mid(held[0])
    consumer.negative_acknowledge(again)
    assert wait_until(lambda: len(_dead(broker)) == 1, 10)
    done_before = set(_dead(broker))
    # the others fail once (count 1) and come back
    for m in held[1:]:
        consumer.negative_acknowledge(m)
    back = [consumer.receive(10_000) for _ in range(N - 1)]
    assert {mid(m) for m in back} == ids - done_before

    filler = fill(small_fs)
    # each further failure takes them past their maximum: a move that cannot commit
    for m in back:
        consumer.negative_acknowledge(m)
    redelivered = _nack_everything(consumer, 4.0)
    assert redelivered == ids - done_before, "the messages stay in the subscription and come back"
    assert _dead(broker) == list(done_before)
    assert backlog(broker, TOPIC, "s") == N - 1
    assert metric(broker, "letterbox_move_storage_failures_total", operation="dead_letter") >= 1
    assert sum("Traceback" in line for line in broker.lines) == 0, broker.log()
    failures_logged = [line for line in broker.lines if "dead_letter of" in line]
    assert len(failures_logged) == 1, failures_logged

    os.remove(filler)
    assert wait_until(lambda: healthy(broker), 5.0), "still degraded 5 s after space returned"
    _nack_everything(consumer, 3.0)  # the next failure of each moves it
    assert wait_until(lambda: len(_dead(broker)) == N, 10)
    moved = _dead(broker)
    assert sorted(moved) == sorted(ids), "each message in the DLQ exactly once"
    assert backlog(broker, TOPIC, "s") == 0
    client.close()

    assert broker.stop() == 0, broker.log()
    broker = broker_factory(data)
    assert sorted(_dead(broker)) == sorted(ids)
    assert backlog(broker, TOPIC, "s") == 0
    assert sum("Traceback" in line for line in broker.lines) == 0, broker.log()
