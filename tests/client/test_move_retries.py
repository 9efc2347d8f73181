"""RetryConsumer moves survive a broker restart: the move is retried with
backoff until the broker is back (move_retry_seconds), and is done once."""
from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pulsar
import pytest

from letterbox.client import BrokerMoveError, RetryConsumer
from letterbox.client.broker_moves import BrokerMoves, Move
from tests.admin.helpers import call
from tests.conftest import _quiet_logger, wait_until

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"


def test_move_completes_across_a_broker_restart(broker_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    b1 = broker_factory(data)
    ports = ["--port", str(b1.port), "--admin-port", str(b1.admin_port)]
    client = pulsar.Client(b1.url, operation_timeout_seconds=30, logger=_quiet_logger())
    consumer = RetryConsumer(client, T + "moves", "s", admin_url=b1.admin_url, move_retry_seconds=60)
    producer = client.create_producer(T + "moves")
    producer.send(b"retry me", properties={"k": "v"})
    msg = consumer.receive(10_000)

    b1.stop()  # the broker goes away before the move is asked for
    outcome: list[object] = []

    def move() -> None:
        started = time.monotonic()
        try:
            consumer.reconsume_later(msg, timedelta(seconds=1))
            outcome.append(time.monotonic() - started)
        except Exception as exc:  # reported below
            outcome.append(exc)

    mover = threading.Thread(target=move, daemon=True)
    mover.start()
    time.sleep(2.5)  # longer than the old ~0.75 s retry budget: the move must still be pending
    assert not outcome, f"the move ended while the broker was down: {outcome}"
    b2 = broker_factory(data, args=ports)
    mover.join(60)
    assert outcome and isinstance(outcome[0], float), outcome
    assert outcome[0] >= 2.5

    # moved exactly once: on the retry topic, acknowledged in the subscription
    status, stats = call(b2.admin_url, "GET", P + "/moves-s-RETRY/internalStats")
    assert status == 200 and stats["numberOfEntries"] == 1
    assert wait_until(lambda: call(b2.admin_url, "GET", P + "/moves/stats")[1]
                      ["subscriptions"]["s"]["msgBacklog"] == 0, 20)
    client.close()


def test_move_gives_up_after_its_retry_time() -> None:
    moves = BrokerMoves("http://127.0.0.1:9", retry_for=1.0)  # nothing listens on the discard port
    started = time.monotonic()
    with pytest.raises(BrokerMoveError) as info:
        moves.move(Move(T + "x", "s", "1:0:-1:-1", T + "x-s-RETRY", {}))
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 5
    assert "cannot reach the letterbox admin API" in str(info.value) and "attempts" in str(info.value)
    with pytest.raises(ValueError):
        BrokerMoves("http://127.0.0.1:9", retry_for=-1)
