"""Redrive and purge of chosen dead letters (`messageIds`, what the console's "selected" actions
send): only those move or are purged; a wrong type is 400, an empty or oversized list 412."""
from __future__ import annotations

import json
import uuid

import pulsar

from tests.conftest import BrokerProcess
from tests.console.dead_letters import backlog, live_dead_letters, make_dead_letters, rest_path
from tests.security.http import call


def test_redrive_and_purge_by_message_ids(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/ids-{uuid.uuid4().hex[:6]}"
    dlq = make_dead_letters(client, broker.admin_url, topic, "s", nacked=6, terminated=0)
    ids = [m["messageId"] for m in live_dead_letters(broker.admin_url, dlq)]
    assert len(ids) == 6
    base = rest_path(dlq) + "/letterbox"
    status, _, reply = call(broker.admin_url, "POST", base + "/redrive", {"messageIds": ids[1:3], "dryRun": True})
    assert (status, reply["matched"]) == (200, 2), reply
    status, _, reply = call(broker.admin_url, "POST", base + "/redrive", {"messageIds": [ids[1], ids[2], "9:9:-1:-1"]})
    assert (status, reply["moved"], reply["remaining"]) == (200, 2, 0), reply
    assert backlog(broker.admin_url, topic, "s") == 2
    status, _, reply = call(broker.admin_url, "POST", base + "/purge", {"messageIds": [ids[0]]})
    assert (status, reply["purged"]) == (200, 1), reply
    assert [m["messageId"] for m in live_dead_letters(broker.admin_url, dlq)] == ids[3:]
    for body, code, words in [({"messageIds": "2:0:-1:-1"}, 400, "list of message id strings"),
                              ({"messageIds": [1]}, 400, "list of message id strings"),
                              ({"messageIds": []}, 412, "1 to 10000"),
                              ({"messageIds": ["x"] * 10_001}, 412, "got 10001")]:
        status, _, reply = call(broker.admin_url, "POST", base + "/redrive", body)
        assert status == code and words in reply["reason"], (body if len(json.dumps(body)) < 99 else "...", reply)
    assert len(live_dead_letters(broker.admin_url, dlq)) == 3
