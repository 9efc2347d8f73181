"""A redrive never writes where a producer could not: into a terminated topic (it took no
more messages, but a redrive appended after its last position) or onto a partitioned
topic's parent name (the redrive failed half way, after moving earlier chunks). Both are
refused up front (412 naming the topic), with nothing moved."""
from __future__ import annotations

import json
import uuid
from typing import Any

import pulsar

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"


def put_dead_letters(broker: BrokerProcess, dlq: str, real_topics: list[str], extra: dict[str, str] | None = None) -> None:
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    producer = client.create_producer(T + dlq, batching_enabled=False)
    for i, real in enumerate(real_topics):
        producer.send(f"m{i}".encode(), properties={"DEAD_LETTER_REASON": "expired", "REAL_TOPIC": T + real,
                                                    **(extra or {})})
    client.close()


def live(broker: BrokerProcess, dlq: str) -> int:
    status, body = call(broker.admin_url, "GET", f"{P}/{dlq}/letterbox/deadLetters?limit=1000")
    assert status == 200, body
    return len(body)


def entries(broker: BrokerProcess, topic: str) -> int:
    status, body = call(broker.admin_url, "GET", f"{P}/{topic}/internalStats")
    assert status == 200, body
    return int(body["numberOfEntries"])


def redrive(broker: BrokerProcess, dlq: str, body: dict[str, Any]) -> tuple[int, Any]:
    return call(broker.admin_url, "POST", f"{P}/{dlq}/letterbox/redrive", json.dumps(body))


def test_no_redrive_into_a_terminated_topic(broker: BrokerProcess) -> None:
    u = uuid.uuid4().hex[:6]
    done, other = f"done-{u}", f"open-{u}"
    for topic in (done, other):
        assert call(broker.admin_url, "PUT", f"{P}/{topic}")[0] == 204
    for topic in (done, other):
        assert call(broker.admin_url, "PUT", f"{P}/{topic}/subscription/s", '"earliest"')[0] == 204
    assert call(broker.admin_url, "POST", f"{P}/{done}/terminate")[0] == 200
    dlq = f"{done}-s-DLQ"
    put_dead_letters(broker, dlq, [other, done], {"DEAD_LETTER_SUBSCRIPTION": "s"})
    for body in ({}, {"target": T + done}, {"subscriptionOnly": True, "reason": "expired"}):
        status, reply = redrive(broker, dlq, body)
        assert status == 412, (body, status, reply)
        assert "terminated" in str(reply), reply
        assert live(broker, dlq) == 2 and entries(broker, done) == 0 and entries(broker, other) == 0, body
    status, reply = redrive(broker, dlq, {"subscriptionOnly": True, "dryRun": True})
    assert status == 200 and reply["matched"] == 1, reply  # the terminated one cannot go back
    status, reply = redrive(broker, dlq, {"target": T + other})  # an open target still works
    assert (status, reply["moved"]) == (200, 2), reply


def test_no_redrive_onto_a_partitioned_parent(broker: BrokerProcess) -> None:
    u = uuid.uuid4().hex[:6]
    parted, plain = f"parted-{u}", f"plain-{u}"
    assert call(broker.admin_url, "PUT", f"{P}/{parted}/partitions", "2")[0] == 204
    assert call(broker.admin_url, "PUT", f"{P}/{plain}")[0] == 204
    dlq = f"mixed-{u}-DLQ"
    put_dead_letters(broker, dlq, [plain] * 100 + [parted])  # the parent is in the second chunk
    for body in ({}, {"target": T + parted}):
        status, reply = redrive(broker, dlq, body)
        assert status == 412, (body, status, reply)
        assert "partitioned" in str(reply) and parted in str(reply), reply
        assert live(broker, dlq) == 101 and entries(broker, plain) == 0, body
    status, reply = redrive(broker, dlq, {"target": T + parted + "-partition-1"})  # a partition works
    assert (status, reply["moved"]) == (200, 101), reply
