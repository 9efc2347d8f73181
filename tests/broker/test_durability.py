"""kill -9 the broker mid-stream: receipted messages survive, acked ones stay acked."""
from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pulsar
import pytest

from tests.conftest import BrokerProcess


@pytest.mark.slow
def test_kill9_keeps_receipted_and_acked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    topic = f"persistent://public/default/durable-{uuid.uuid4().hex[:8]}"
    n = 10_000
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        # batch-index acks: without them the client holds back the ack of a partly
        # acked batch, and the acked half of that batch would legitimately come back
        consumer = client.subscribe(topic, "dur", initial_position=pulsar.InitialPosition.Earliest,
                                    consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=200,
                                          block_if_queue_full=True)
        receipted: set[int] = set()
        lock = threading.Lock()
        done = threading.Event()

        def on_sent(i: int) -> object:
            def cb(res: pulsar.Result, _mid: pulsar.MessageId) -> None:
                if res == pulsar.Result.Ok:
                    with lock:
                        receipted.add(i)
                        if len(receipted) == n:
                            done.set()
            return cb

        for i in range(n):
            producer.send_async(str(i).encode(), on_sent(i))
        producer.flush()
        assert done.wait(60)
        acked: set[int] = set()
        for _ in range(n // 2):
            msg = consumer.receive(10_000)
            consumer.acknowledge(msg)
            acked.add(int(msg.data()))
        # let the client's grouped acks reach the broker before the crash
        consumer.close()
    finally:
        client.close()
    broker.kill()  # SIGKILL: no chance to flush anything

    broker = BrokerProcess(data).start()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        consumer = client.subscribe(topic, "dur", consumer_type=pulsar.ConsumerType.Shared,
                                    batch_index_ack_enabled=True)
        seen: set[int] = set()
        while True:
            try:
                msg = consumer.receive(2_000)
            except pulsar.Timeout:
                break
            seen.add(int(msg.data()))
            consumer.acknowledge(msg)
        assert receipted - acked <= seen, "a receipted, unacked message was lost"
        assert not (seen & acked), f"{len(seen & acked)} acked messages came back"
        # consumption resumes: new messages flow
        producer = client.create_producer(topic)
        producer.send(b"after-restart")
        assert consumer.receive(10_000).data() == b"after-restart"
    finally:
        client.close()
        broker.stop()
