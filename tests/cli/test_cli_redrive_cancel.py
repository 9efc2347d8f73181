"""`letterbox dlq redrive-cancel` stops a slow redrive running on the broker;
`--rate` outside 1..100,000 is refused before anything is asked."""
from __future__ import annotations

import json
import threading
from typing import Any

import pulsar

from tests.admin.helpers import call
from tests.cli.helpers import dlq, ok
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

P = "/admin/v2/persistent/public/default"


def test_redrive_cancel(broker: BrokerProcess) -> None:
    base = broker.admin_url
    assert call(base, "PUT", P + "/cancel-src")[0] == 204
    assert call(base, "PUT", P + "/cancel-src/subscription/s", '"earliest"')[0] == 204
    assert call(base, "POST", "/admin/v2/namespaces/public/default/letterbox/deadLetterPolicy",
                '{"maxRedeliverCount": 5}')[0] == 204
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    producer = client.create_producer("persistent://public/default/cancel-src", batching_enabled=False)
    for i in range(30):
        producer.send(f"m{i}".encode())
    client.close()
    assert call(base, "POST", P + "/cancel-src/subscription/s/expireMessages/0")[0] == 204
    assert wait_until(lambda: len(call(base, "GET", P + "/cancel-src-s-DLQ/letterbox/deadLetters")[1]) == 30, 20)

    outcome: list[tuple[int, Any]] = []
    body = json.dumps({"target": "persistent://public/default/cancel-dst", "ratePerSecond": 1})
    runner = threading.Thread(target=lambda: outcome.append(
        call(base, "POST", P + "/cancel-src-s-DLQ/letterbox/redrive", body)), daemon=True)
    runner.start()
    assert wait_until(lambda: call(base, "GET", P + "/cancel-dst/internalStats")[0] == 200, 20)
    assert "Cancelled the redrive" in ok(dlq(broker, "redrive-cancel", "cancel-src-s-DLQ"))
    runner.join(15)
    assert outcome and outcome[0][0] == 200 and outcome[0][1]["cancelled"] is True
    again = dlq(broker, "redrive-cancel", "cancel-src-s-DLQ")
    assert again.exit_code != 0 and "No redrive is running" in again.stderr
    bad = dlq(broker, "redrive", "cancel-src-s-DLQ", "--rate", "0.5")
    assert bad.exit_code == 2 and "--rate" in bad.stderr
