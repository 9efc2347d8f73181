"""Subscription-only redrive (the message goes back to the subscription it died in only) and
redrive tasks (GET/DELETE .../letterbox/redrive/{taskId}, persistent, resumed after kill -9)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pulsar

from tests.admin.helpers import call
from tests.admin.redrive_helpers import (
    DLQ_POLICY,
    P,
    T,
    backlog,
    dead_letter_in_s1,
    drain,
    live_dead_letters,
    two_subscriptions,
)
from tests.conftest import BrokerProcess, _quiet_logger, wait_until


def test_subscription_only_redrive_reaches_s1_not_s2(broker: BrokerProcess, client: Any) -> None:
    base = broker.admin_url
    topic, dlq = "subonly", "subonly-S1-DLQ"
    two_subscriptions(base, topic)
    dead_letter_in_s1(base, client, topic, ["a", "b", "c"], {"b"})
    assert backlog(base, topic, "S1") == 0
    assert backlog(base, topic, "S2") == 3
    letters = live_dead_letters(base, dlq)
    assert [m["payloadText"] for m in letters] == ["b"]
    assert letters[0]["properties"]["DEAD_LETTER_SUBSCRIPTION"] == "S1"

    path = f"{P}/{dlq}/letterbox/redrive"
    assert call(base, "POST", path, json.dumps({"subscriptionOnly": True, "dryRun": True})) == (
        200, {"matched": 1, "moved": 0, "remaining": 0 + 1, "dryRun": True})
    status, result = call(base, "POST", path, json.dumps({"subscriptionOnly": True}))
    assert (status, result) == (200, {"matched": 1, "moved": 1, "remaining": 0, "dryRun": False})
    assert live_dead_letters(base, dlq) == []
    # S1 has the message once more; S2's backlog did not change
    assert backlog(base, topic, "S1") == 1
    assert backlog(base, topic, "S2") == 3

    again = drain(client, topic, "S1")
    assert [m.data() for m in again] == [b"b"]
    props = again[0].properties()
    assert again[0].partition_key() == "key-b" and props["payload"] == "b"
    assert props["REAL_TOPIC"] == T + topic and "DEAD_LETTER_REASON" not in props
    assert again[0].redelivery_count() == 0
    seen_by_s2 = drain(client, topic, "S2")
    assert sorted(m.data() for m in seen_by_s2) == [b"a", b"b", b"c"]  # the originals only, once each


def test_subscription_only_mistakes(broker: BrokerProcess, client: Any) -> None:
    base = broker.admin_url
    topic, dlq = "subonly-gone", "subonly-gone-S1-DLQ"
    two_subscriptions(base, topic)
    dead_letter_in_s1(base, client, topic, ["x", "y"], {"y"})
    path = f"{P}/{dlq}/letterbox/redrive"
    status, body = call(base, "POST", path, json.dumps({"subscriptionOnly": True, "target": T + "elsewhere"}))
    assert status == 400 and "leave out target" in body["reason"]
    status, body = call(base, "POST", path, json.dumps({"subscriptionOnly": "yes"}))
    assert status == 400 and "subscriptionOnly must be true or false" in body["reason"]
    status, body = call(base, "POST", path, json.dumps({"background": 1}))
    assert status == 400 and "background" in body["reason"]
    # the subscription it died in is gone: refused with the reason, nothing moves
    assert call(base, "DELETE", f"{P}/{topic}/subscription/S1")[0] == 204
    status, body = call(base, "POST", path, json.dumps({"subscriptionOnly": True}))
    assert status == 404, body
    assert "subscription 'S1'" in body["reason"] and "does not exist" in body["reason"]
    assert [m["payloadText"] for m in live_dead_letters(base, dlq)] == ["y"]
    assert backlog(base, topic, "S2") == 2


def test_task_ids_bad_unknown_and_cancel(broker: BrokerProcess, client: Any) -> None:
    base = broker.admin_url
    topic, dlq = "subonly-task", "subonly-task-S1-DLQ"
    two_subscriptions(base, topic)
    payloads = [f"t{i}" for i in range(6)]
    dead_letter_in_s1(base, client, topic, payloads, set(payloads))
    tasks = f"{P}/{dlq}/letterbox/redrive"
    status, body = call(base, "GET", tasks + "/not-a-task")
    assert status == 400 and "16 hex digits" in body["reason"]
    status, body = call(base, "DELETE", tasks + "/XYZ")
    assert status == 400 and "Invalid redrive task id" in body["reason"]
    status, body = call(base, "GET", tasks + "/0123456789abcdef")
    assert status == 404 and "No redrive task 0123456789abcdef" in body["reason"]
    assert call(base, "DELETE", tasks + "/0123456789abcdef")[0] == 404
    assert call(base, "GET", f"{P}/ghost-DLQ/letterbox/redrive/0123456789abcdef")[0] == 404

    # a slow background task: 202 with its id, GET shows progress, DELETE cancels it
    status, task = call(base, "POST", tasks, json.dumps({"subscriptionOnly": True, "background": True,
                                                          "ratePerSecond": 1}))
    assert status == 202 and task["state"] == "running" and task["remaining"] == 6, task
    tid = task["taskId"]
    assert task["subscriptionOnly"] is True and task["background"] is True
    assert wait_until(lambda: call(base, "GET", f"{tasks}/{tid}")[1]["moved"] >= 1, 20)
    status, again = call(base, "POST", tasks, json.dumps({"subscriptionOnly": True}))
    assert status == 409 and "already running" in again["reason"]
    status, cancelled = call(base, "DELETE", f"{tasks}/{tid}")
    assert status == 200 and cancelled["cancelled"] is True and cancelled["state"] == "cancelled"
    assert wait_until(lambda: call(base, "GET", f"{tasks}/{tid}")[1]["endedAt"] is not None, 20)
    status, done = call(base, "GET", f"{tasks}/{tid}")
    assert status == 200 and done["state"] == "cancelled" and 1 <= done["moved"] < 6
    assert done["remaining"] == 6 - done["moved"] and done["remainingEstimated"] is False
    status, body = call(base, "DELETE", f"{tasks}/{tid}")
    assert status == 409 and "not running" in body["reason"]
    listed = call(base, "GET", f"{P}/{dlq}/letterbox/redriveTasks")[1]
    assert [t["taskId"] for t in listed] == [tid]
    # another DLQ does not know this task
    assert call(base, "GET", f"{P}/subonly-S1-DLQ/letterbox/redrive/{tid}")[0] in (404,)


def _dead_letters_of_s1(base: str, url: str, topic: str, dlq: str, n: int) -> None:
    two_subscriptions(base, topic)
    client = pulsar.Client(url, logger=_quiet_logger())
    client.subscribe(T + topic, "S1", properties=DLQ_POLICY).close()  # S1's dead-letter policy
    producer = client.create_producer(T + topic, batching_enabled=False)
    for i in range(n):
        producer.send(f"r{i}".encode())
    client.close()
    assert call(base, "POST", f"{P}/{topic}/subscription/S1/expireMessages/0")[0] == 204
    assert wait_until(lambda: len(live_dead_letters(base, dlq, True)) == n, 30)
    assert backlog(base, topic, "S2") == n


def _interrupted_task_finishes(broker_factory: Any, tmp_path: Path, topic: str, kill: bool) -> None:
    data = tmp_path / "data"
    b = broker_factory(data)
    base = b.admin_url
    dlq, n = f"{topic}-S1-DLQ", 150
    _dead_letters_of_s1(base, b.url, topic, dlq, n)
    status, task = call(base, "POST", f"{P}/{dlq}/letterbox/redrive",
                        json.dumps({"subscriptionOnly": True, "background": True, "ratePerSecond": 10}))
    assert status == 202, task
    tid = task["taskId"]
    url = f"{P}/{dlq}/letterbox/redrive/{tid}"
    assert wait_until(lambda: call(base, "GET", url)[1]["moved"] >= 30, 30)
    if kill:
        b.kill()  # kill -9 in the middle of the task
    else:
        assert b.stop() == 0  # a clean stop pauses the task; it is not cancelled

    b2 = broker_factory(data)
    base = b2.admin_url
    assert wait_until(lambda: call(base, "GET", url)[1]["state"] != "running", 60)
    status, done = call(base, "GET", url)
    assert status == 200 and done["state"] == "finished", done
    assert done["moved"] == n and done["remaining"] == 0 and done["restarts"] == 1, done
    assert live_dead_letters(base, dlq) == []
    assert backlog(base, topic, "S1") == n and backlog(base, topic, "S2") == n

    client = pulsar.Client(b2.url, logger=_quiet_logger())
    got = [m.data().decode() for m in drain(client, topic, "S1")]
    client.close()
    assert len(got) == n and sorted(got) == sorted(f"r{i}" for i in range(n))  # no duplicate, no loss


def test_task_resumes_after_kill_9(broker_factory: Any, tmp_path: Path) -> None:
    _interrupted_task_finishes(broker_factory, tmp_path, "resumed", kill=True)


def test_task_resumes_after_a_clean_stop(broker_factory: Any, tmp_path: Path) -> None:
    _interrupted_task_finishes(broker_factory, tmp_path, "paused", kill=False)


def test_subscription_only_on_a_partitioned_source(broker: BrokerProcess, client: Any) -> None:
    """REAL_TOPIC names a partition: the message goes back to S1 on that partition only."""
    base = broker.admin_url
    topic, dlq = "subonly-parts", "subonly-parts-S1-DLQ"
    assert call(base, "PUT", f"{P}/{topic}/partitions", "2")[0] == 204
    for i in range(2):
        for sub in ("S1", "S2"):
            status, body = call(base, "PUT", f"{P}/{topic}-partition-{i}/subscription/{sub}", '"earliest"')
            assert status == 204, body
    payloads = [f"p{i}" for i in range(8)]
    dead_letter_in_s1(base, client, topic, payloads, {"p3", "p6"})
    letters = live_dead_letters(base, dlq)
    assert sorted(m["payloadText"] for m in letters) == ["p3", "p6"]
    partitions = {m["payloadText"]: m["properties"]["REAL_TOPIC"] for m in letters}
    assert all(re.fullmatch(rf"{T}{topic}-partition-[01]", p) for p in partitions.values())

    def backlogs(sub: str) -> list[int]:
        return [backlog(base, f"{topic}-partition-{i}", sub) for i in range(2)]

    s2_before = backlogs("S2")
    assert sum(s2_before) == 8 and backlogs("S1") == [0, 0]
    status, result = call(base, "POST", f"{P}/{dlq}/letterbox/redrive", json.dumps({"subscriptionOnly": True}))
    assert (status, result["moved"]) == (200, 2), result
    assert backlogs("S2") == s2_before
    expected = [0, 0]
    for real in partitions.values():
        expected[int(real[-1])] += 1
    assert backlogs("S1") == expected  # each one back on the partition it came from
    assert sorted(m.data() for m in drain(client, topic, "S1")) == [b"p3", b"p6"]


def test_subscription_named_by_the_dlq_name(broker: BrokerProcess, client: Any) -> None:
    """A dead letter without DEAD_LETTER_SUBSCRIPTION (a client-side DLQ): the subscription is
    read from the DLQ's name <topic>-<subscription>-DLQ."""
    base = broker.admin_url
    topic = "subonly-named"
    two_subscriptions(base, topic)
    producer = client.create_producer(f"{T}{topic}-S1-DLQ", batching_enabled=False)
    producer.send(b"from-a-client-dlq", properties={"REAL_TOPIC": T + topic, "ORIGIN_MESSAGE_ID": "1:0:-1:-1"})
    producer.send(b"no-origin", properties={"DEAD_LETTER_REASON": "terminated"})
    producer.close()
    path = f"{P}/{topic}-S1-DLQ/letterbox/redrive"
    status, body = call(base, "POST", path, json.dumps({"subscriptionOnly": True}))
    assert status == 412 and "no (valid) REAL_TOPIC" in body["reason"], body
    flt = {"subscriptionOnly": True, "properties": {"ORIGIN_MESSAGE_ID": "1:0:-1:-1"}}
    assert call(base, "POST", path, json.dumps(flt))[1]["moved"] == 1
    assert backlog(base, topic, "S1") == 1 and backlog(base, topic, "S2") == 0
    assert [m.data() for m in drain(client, topic, "S1")] == [b"from-a-client-dlq"]
