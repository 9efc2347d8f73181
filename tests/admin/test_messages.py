"""Message endpoints: peek the n-th message of a subscription, get by ledger/entry, examine."""
from __future__ import annotations

from typing import Any

import pulsar

from tests.admin.helpers import call, call_raw
from tests.conftest import BrokerProcess

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"


def test_peek_get_and_examine(broker: BrokerProcess, client: Any) -> None:
    base = broker.admin_url
    consumer = client.subscribe(T + "peeked", "s")
    producer = client.create_producer(T + "peeked", batching_enabled=False, producer_name="peeker")
    ids = [
        producer.send(f"body-{i}".encode(), partition_key=f"key-{i}", properties={"colour": f"c{i}"},
                      event_timestamp=1_700_000_000_000 + i)
        for i in range(3)
    ]
    status, headers, body = call_raw(base, "GET", P + "/peeked/subscription/s/position/2")
    assert status == 200 and body == b"body-1"
    assert headers["X-Pulsar-Message-ID"] == f"{ids[1].ledger_id()}:{ids[1].entry_id()}"
    assert headers["X-Pulsar-PROPERTY-colour"] == "c1"
    assert headers["X-Pulsar-partition-key"] == "key-1"
    assert headers["X-Pulsar-producer-name"] == "peeker"
    assert headers["X-Pulsar-sequence-id"] == "1"
    assert headers["X-Pulsar-event-time"] == "2023-11-14T22:13:20.001Z"
    assert headers["X-Pulsar-publish-time"].endswith("Z") and headers["X-Pulsar-Is-Encrypted"] == "false"
    # peeking does not consume: the backlog is unchanged and the consumer still gets everything
    assert call(base, "GET", P + "/peeked/stats")[1]["subscriptions"]["s"]["msgBacklog"] == 3
    status, err = call(base, "GET", P + "/peeked/subscription/s/position/4")
    assert status == 404 and "reason" in err
    assert call(base, "GET", P + "/peeked/subscription/s/position/0")[0] == 412
    assert call(base, "GET", P + "/peeked/subscription/ghost/position/1")[0] == 404

    status, headers, body = call_raw(base, "GET", P + f"/peeked/ledger/{ids[2].ledger_id()}/entry/{ids[2].entry_id()}")
    assert status == 200 and body == b"body-2" and headers["X-Pulsar-PROPERTY-colour"] == "c2"
    assert call(base, "GET", P + f"/peeked/ledger/{ids[2].ledger_id()}/entry/99")[0] == 404
    assert call(base, "GET", P + f"/peeked/ledger/{ids[2].ledger_id() + 7}/entry/0")[0] == 404

    status, _, body = call_raw(base, "GET", P + "/peeked/examinemessage?initialPosition=earliest&messagePosition=1")
    assert status == 200 and body == b"body-0"
    status, _, body = call_raw(base, "GET", P + "/peeked/examinemessage?initialPosition=latest&messagePosition=1")
    assert status == 200 and body == b"body-2"
    assert call(base, "GET", P + "/peeked/examinemessage?initialPosition=middle")[0] == 412
    assert call(base, "GET", P + "/peeked/examinemessage?messagePosition=9")[0] == 404
    assert call(base, "GET", P + "/ghost-topic/examinemessage")[0] == 404
    msg = consumer.receive(timeout_millis=5000)
    assert msg.data() == b"body-0"
    consumer.close()


def test_batch_is_returned_whole_with_batch_headers(broker: BrokerProcess, client: Any) -> None:
    base = broker.admin_url
    consumer = client.subscribe(T + "peek-batch", "s")
    producer = client.create_producer(
        T + "peek-batch", batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=1000,
        compression_type=pulsar.CompressionType.LZ4,
    )
    for i in range(5):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    status, headers, body = call_raw(base, "GET", P + "/peek-batch/subscription/s/position/1")
    assert status == 200
    assert headers["X-Pulsar-num-batch-message"] == "5"
    assert int(headers["X-Pulsar-batch-size"]) > 0
    assert headers["X-Pulsar-compression"] == "LZ4"
    # the body is the decompressed batch payload: every message is in it
    assert all(f"b{i}".encode() in body for i in range(5))
    consumer.close()


def test_partitioned_and_non_persistent_are_405(broker: BrokerProcess) -> None:
    base = broker.admin_url
    assert call(base, "PUT", P + "/peek-parts/partitions", "2")[0] == 204
    assert call(base, "GET", P + "/peek-parts/examinemessage")[0] == 405
    assert call(base, "GET", P + "/peek-parts/subscription/s/position/1")[0] == 405
    assert call(base, "GET", "/admin/v2/non-persistent/public/default/np/examinemessage")[0] == 405
