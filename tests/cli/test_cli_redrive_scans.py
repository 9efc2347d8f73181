"""`letterbox dlq redrive` walks the DLQ a bounded number of times, whatever its size.
Each redrive call counts and checks the whole DLQ on the broker (its dry-run count, its
up-front target checks, its final `remaining`), so the CLI's old series of calls of at
most 200 messages cost O(N^2): a 200,000-message DLQ meant 1,000 calls, each scanning
what remained twice (hours of broker CPU for a minute of moving). The CLI now moves
everything in ONE call (a redrive task inside the request) and shows its progress from
the task's record."""
from __future__ import annotations

import json
from typing import Any

import pulsar
import pytest

import letterbox.cli.dlq
from letterbox.cli.http import AdminClient
from tests.admin.helpers import call
from tests.cli.helpers import dlq, ok
from tests.conftest import BrokerProcess, _quiet_logger

P = "/admin/v2/persistent/public/default"
SRC = "persistent://public/default/cli-scan-src"
N = 40


def test_cli_redrive_calls_do_not_grow_with_the_dlq(broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    dlq_topic = SRC + "-s-DLQ"
    assert call(broker.admin_url, "PUT", P + "/cli-scan-src")[0] == 204
    assert call(broker.admin_url, "PUT", P + "/cli-scan-src/subscription/s", '"earliest"')[0] == 204
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    producer = client.create_producer(dlq_topic, batching_enabled=False)
    for i in range(N):
        producer.send(f"m{i}".encode(), properties={"DEAD_LETTER_REASON": "expired", "REAL_TOPIC": SRC})
    client.close()

    monkeypatch.setattr(letterbox.cli.dlq, "CHUNK", 5)  # the old loop: N / 5 calls
    redrive_calls: list[Any] = []
    real_request = AdminClient.request

    def counting(self: AdminClient, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        if method == "POST" and path.endswith("/letterbox/redrive"):
            redrive_calls.append(body)
        return real_request(self, method, path, body, **kw)

    monkeypatch.setattr(AdminClient, "request", counting)
    result = json.loads(ok(dlq(broker, "redrive", dlq_topic, "-o", "json")))
    assert result == {"matched": N, "moved": N, "remaining": 0, "dryRun": False}
    assert len(redrive_calls) <= 2, f"{len(redrive_calls)} redrive calls (each a whole-DLQ scan) for {N} messages"
    assert call(broker.admin_url, "GET", P + "/cli-scan-src/stats")[1]["subscriptions"]["s"]["msgBacklog"] == N
