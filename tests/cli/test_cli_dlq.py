"""`letterbox dlq ...` against a real broker: dead letters made by the broker
(max redeliveries) and by terminate (PIP-372), then listed, peeked,
redriven in chunks (idempotently) and purged through the CLI."""
from __future__ import annotations

import json

import pulsar
import pytest

import letterbox.cli.dlq
from letterbox.client import DeadLetterPolicy, RetryConsumer
from tests.cli.helpers import dlq, ok, ok_json, run
from tests.conftest import BrokerProcess, wait_until

SRC = "persistent://public/default/cli-dlq-src"
DLQ = SRC + "-work-DLQ"
N = 20  # even i: terminated, odd i: max-redeliveries


def _dead_letter_counts(broker: BrokerProcess) -> dict[str, int]:
    for entry in ok_json(dlq(broker, "list", "public/default", "-o", "json")):
        if entry["topic"] == DLQ:
            return dict(entry["byReason"])
    return {}


@pytest.fixture(scope="module")
def dead_letters(broker: BrokerProcess) -> None:
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        producer = client.create_producer(SRC)
        for i in range(N):
            producer.send(f"msg-{i}".encode(), partition_key=f"key-{i}", properties={"i": str(i), "app": "cli"})
        consumer = RetryConsumer(client, SRC, "work", enable_retry=False, admin_url=broker.admin_url,
                                 dead_letter_policy=DeadLetterPolicy(max_redeliver_count=1),
                                 initial_position=pulsar.InitialPosition.Earliest,
                                 negative_ack_redelivery_delay_ms=100)

        def work() -> bool:
            try:
                msg = consumer.receive(timeout_millis=200)
            except pulsar.Timeout:
                return _dead_letter_counts(broker) == {"terminated": N // 2, "max-redeliveries": N // 2}
            if int(msg.properties()["i"]) % 2 == 0:
                consumer.terminate(msg, "bad input")
            else:
                consumer.negative_acknowledge(msg)
            return False

        assert wait_until(work, timeout=60, interval=0)
        consumer.close()
    finally:
        client.close()


def test_list_counts_dead_letters_by_reason_and_source(broker: BrokerProcess, dead_letters: None) -> None:
    entry = next(e for e in ok_json(dlq(broker, "list", "public/default", "-o", "json")) if e["topic"] == DLQ)
    assert entry["messages"] == N
    assert entry["byReason"] == {"terminated": N // 2, "max-redeliveries": N // 2}
    assert entry["sourceTopics"] == {SRC: N}
    human = ok(dlq(broker, "list", "public/default"))
    row = next(line for line in human.splitlines() if line.startswith(DLQ))
    assert "terminated=10" in row and "max-redeliveries=10" in row and f"{SRC}=20" in row


def test_peek_shows_reason_key_properties_and_payload(broker: BrokerProcess, dead_letters: None) -> None:
    letters = ok_json(dlq(broker, "peek", DLQ, "-n", "3", "--reason", "terminated", "-o", "json"))
    assert len(letters) == 3
    for m in letters:
        i = int(m["properties"]["i"])
        assert i % 2 == 0
        assert m["properties"]["DEAD_LETTER_REASON"] == "terminated"
        assert m["properties"]["REAL_TOPIC"] == SRC
        assert m["key"] == f"key-{i}" and m["payloadText"] == f"msg-{i}"
    human = ok(dlq(broker, "peek", "cli-dlq-src-work-DLQ", "-n", "1", "--reason", "max-redeliveries"))
    assert "DEAD_LETTER_REASON: max-redeliveries" in human
    assert "Key: key-1" in human and "msg-1" in human


def _drain(broker: BrokerProcess, count: int) -> list[dict[str, object]]:
    out = ok(run("consume", SRC, "-s", "work", "-t", "shared", "-n", str(count), "--wait", "10",
                 "-o", "json", "-u", broker.url))
    return [json.loads(line) for line in out.splitlines()]


def test_redrive_by_reason_in_chunks_then_resume(broker: BrokerProcess, dead_letters: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(letterbox.cli.dlq, "CHUNK", 3)  # several calls per run
    dry = ok_json(dlq(broker, "redrive", DLQ, "--reason", "terminated", "--dry-run", "-o", "json"))
    assert dry == {"matched": N // 2, "moved": 0, "remaining": N // 2, "dryRun": True}
    assert _dead_letter_counts(broker)["terminated"] == N // 2  # a dry run moves nothing

    out = ok(dlq(broker, "redrive", DLQ, "--reason", "terminated"))
    assert f"Moved {N // 2} messages matching reason terminated" in out
    back = _drain(broker, N // 2)
    assert sorted(int(str(r["payload"]).split("-")[1]) for r in back) == list(range(0, N, 2))
    for r in back:
        props = r["properties"]
        assert isinstance(props, dict)
        assert r["key"] == f"key-{props['i']}" and props["app"] == "cli"
        assert r["redeliveryCount"] == 0
    assert _dead_letter_counts(broker).get("terminated", 0) == 0
    assert _dead_letter_counts(broker)["max-redeliveries"] == N // 2

    # A run cut short (--max-messages) and run again moves each message once.
    first = ok_json(dlq(broker, "redrive", DLQ, "--reason", "max-redeliveries", "--max-messages", "4",
                        "-o", "json"))
    assert first["moved"] == 4 and first["remaining"] == N // 2 - 4
    second = ok_json(dlq(broker, "redrive", DLQ, "--reason", "max-redeliveries", "-o", "json"))
    assert second["moved"] == N // 2 - 4 and second["remaining"] == 0
    again = ok(dlq(broker, "redrive", DLQ, "--reason", "max-redeliveries"))
    assert "Nothing to redrive" in again
    back = _drain(broker, N // 2)
    assert sorted(int(str(r["payload"]).split("-")[1]) for r in back) == list(range(1, N, 2))
    nothing_more = run("consume", SRC, "-s", "work", "-t", "shared", "-n", "1", "--wait", "1", "-u", broker.url)
    assert nothing_more.exit_code == 1  # no duplicates came back


def test_redrive_to_another_topic_and_purge(broker: BrokerProcess, client: pulsar.Client) -> None:
    dlq_topic = "persistent://public/default/cli-purge-DLQ"
    producer = client.create_producer(dlq_topic)
    for i in range(6):
        producer.send(f"p{i}".encode(), properties={"DEAD_LETTER_REASON": "expired", "REAL_TOPIC": SRC,
                                                    "tenant": "a" if i < 2 else "b"})
    ok(run("consume", "cli-redriven", "-s", "check", "-n", "0", "--wait", "0", "-u", broker.url))
    moved = ok_json(dlq(broker, "redrive", dlq_topic, "--to", "cli-redriven", "-p", "tenant=a", "-o", "json"))
    assert moved["moved"] == 2
    got = ok(run("consume", "cli-redriven", "-s", "check", "-n", "2", "-o", "json", "-u", broker.url))
    assert sorted(json.loads(line)["payload"] for line in got.splitlines()) == ["p0", "p1"]

    assert ok_json(dlq(broker, "purge", dlq_topic, "--dry-run", "-o", "json")) == {"purged": 4, "dryRun": True}
    refused = dlq(broker, "purge", dlq_topic, input="n\n")
    assert refused.exit_code == 1 and "Permanently delete 4 messages" in refused.stderr
    assert ok_json(dlq(broker, "purge", dlq_topic, "--dry-run", "-o", "json"))["purged"] == 4
    assert ok(dlq(broker, "purge", dlq_topic, "--yes")) == (
        f"Purged 4 messages from {dlq_topic}\n")
    assert ok_json(dlq(broker, "peek", dlq_topic, "-o", "json")) == []
