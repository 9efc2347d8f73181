"""GET .../letterbox/attempts/{messageId} of an acknowledged message looks for its dead
letter in the subscription's dead letter topic, a scan of the whole topic: the scan must
leave the broker's event loop to other requests while it runs (before the fix, one such
GET stalled every producer, consumer and admin call of the broker until it was done)."""
from __future__ import annotations

import threading
import time
import uuid

import pulsar

from tests.admin.helpers import call
from tests.conftest import BrokerProcess

DEAD_LETTERS = 150_000


def test_attempts_of_an_acked_message_do_not_stall_the_broker(broker: BrokerProcess,
                                                             client: pulsar.Client) -> None:
    topic = f"persistent://public/default/attempts-scan-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(topic, "work")
    producer = client.create_producer(topic, batching_enabled=False)
    mid = producer.send(b"fine")
    consumer.acknowledge(consumer.receive(10_000))
    # a large dead letter topic, none of them this subscription's dead letter of this message:
    # dead letters of the same message id made by another subscription, so the lookup (which
    # opens only the entries holding the id's bytes) must open and decode every one of them
    dlq = client.create_producer(f"{topic}-work-DLQ", batching_enabled=True, batching_max_messages=1000,
                                 batching_max_publish_delay_ms=50)
    for i in range(DEAD_LETTERS):
        dlq.send_async(b"d" * 50, None, properties={"DEAD_LETTER_SUBSCRIPTION": f"other-{i}",
                                                    "ORIGIN_MESSAGE_ID": f"{mid.ledger_id()}:{mid.entry_id()}:-1:-1"})
    dlq.flush()
    path = (f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/subscription/work/letterbox/"
            f"attempts/{mid.ledger_id()}:{mid.entry_id()}:-1:-1")

    answer: dict[str, object] = {}

    def scan() -> None:
        answer["reply"] = call(broker.admin_url, "GET", path)
        answer["done"] = time.monotonic()

    scanner = threading.Thread(target=scan)
    started = time.monotonic()
    scanner.start()
    probes: list[float] = []  # completion times of cheap requests sent while the scan runs
    while scanner.is_alive():
        status, _ = call(broker.admin_url, "GET", "/admin/v2/letterbox/clock")
        assert status == 200
        probes.append(time.monotonic())
    scanner.join()
    status, body = answer["reply"]  # type: ignore[misc]
    assert status == 200 and body["acknowledged"] is True and body["source"] == "none", body
    during = [t for t in probes if started < t < answer["done"]]  # type: ignore[operator]
    # a stalled loop answers a probe only once the scan is over: at most the one or two
    # probes answered before the scan began; a loop that is left to others answers many
    assert len(during) >= 5, (f"{len(during)} other requests answered during a "
                              f"{answer['done'] - started:.2f} s scan")  # type: ignore[operator]
    consumer.close()
    producer.close()
    dlq.close()
