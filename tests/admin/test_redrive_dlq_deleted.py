"""Deleting a dead letter topic while a redrive task runs on it: refused without force
(412 naming the task, as for a topic with clients), and with force the task is cancelled
first and recorded `cancelled` with what it moved. Before, the topic was deleted under the
running task, which then reported `finished` with 0 remaining although most of its
messages had gone with the topic."""
from __future__ import annotations

import json
import uuid

import pulsar

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

P = "/admin/v2/persistent/public/default"
T = "persistent://public/default/"


def test_deleting_a_dlq_under_a_running_redrive(broker: BrokerProcess) -> None:
    u = uuid.uuid4().hex[:6]
    src, dlq = f"delsrc-{u}", f"delsrc-{u}-s-DLQ"
    assert call(broker.admin_url, "PUT", f"{P}/{src}")[0] == 204
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    producer = client.create_producer(T + dlq, batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode(), properties={"DEAD_LETTER_REASON": "expired", "REAL_TOPIC": T + src})
    producer.close()
    status, task = call(broker.admin_url, "POST", f"{P}/{dlq}/letterbox/redrive",
                        json.dumps({"background": True, "ratePerSecond": 1}))
    assert status == 202, task
    tid = task["taskId"]
    assert wait_until(lambda: call(broker.admin_url, "GET", f"{P}/{dlq}/letterbox/redrive/{tid}")[1]["moved"] >= 1, 20)

    status, reply = call(broker.admin_url, "DELETE", f"{P}/{dlq}")
    assert status == 412 and "redrive" in reply["reason"] and tid in reply["reason"], (status, reply)
    assert call(broker.admin_url, "GET", f"{P}/{dlq}/letterbox/redrive/{tid}")[1]["state"] == "running"

    assert call(broker.admin_url, "DELETE", f"{P}/{dlq}?force=true")[0] == 204
    # the task's record outlives the topic: made again, the DLQ lists it as cancelled
    producer = client.create_producer(T + dlq, batching_enabled=False)
    producer.send(b"again", properties={"DEAD_LETTER_REASON": "expired", "REAL_TOPIC": T + src})
    client.close()
    status, tasks = call(broker.admin_url, "GET", f"{P}/{dlq}/letterbox/redriveTasks")
    assert status == 200, tasks
    old = next(t for t in tasks if t["taskId"] == tid)
    assert old["state"] == "cancelled", old
    moved = old["moved"]
    assert 1 <= moved < 20, old
    assert call(broker.admin_url, "GET", f"{P}/{src}/internalStats")[1]["numberOfEntries"] == moved
    status, reply = call(broker.admin_url, "POST", f"{P}/{dlq}/letterbox/redrive", "{}")  # not blocked
    assert (status, reply["moved"]) == (200, 1), reply
