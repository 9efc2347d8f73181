"""`letterbox produce` and `letterbox consume` against a real broker."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pulsar

from tests.cli.helpers import ok, ok_json, run
from tests.conftest import BrokerProcess


def test_produce_then_consume_round_trip_json(broker: BrokerProcess) -> None:
    ok(run("consume", "cli-rt", "-s", "reader", "-n", "0", "--wait", "0", "-u", broker.url))  # subscribe first
    sent = ok_json(run("produce", "cli-rt", "-m", "hello", "-m", "wörld", "-n", "2", "-k", "order-7",
                       "-p", "source=cli", "-p", "expr=a=b", "-u", broker.url, "-o", "json"))
    assert sent["topic"] == "persistent://public/default/cli-rt"
    assert sent["produced"] == 4 and len(set(sent["messageIds"])) == 4
    out = ok(run("consume", "cli-rt", "-s", "reader", "-n", "4", "-o", "json", "-u", broker.url))
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["payload"] for r in records] == ["hello", "wörld", "hello", "wörld"]
    assert [r["messageId"] for r in records] == sent["messageIds"]
    for r in records:
        assert r["key"] == "order-7"
        assert r["properties"] == {"source": "cli", "expr": "a=b"}
        assert r["topic"] == "persistent://public/default/cli-rt"
        assert r["redeliveryCount"] == 0
        assert r["publishTime"] > 0


def test_consume_human_output_and_ack(broker: BrokerProcess, client: pulsar.Client) -> None:
    producer = client.create_producer("cli-human")
    ok(run("consume", "cli-human", "-s", "s", "-n", "0", "--wait", "0", "-u", broker.url))
    producer.send(b"first", partition_key="k1", properties={"a": "1"})
    producer.send(b"\xff\x00binary")
    result = run("consume", "cli-human", "-s", "s", "-n", "2", "-t", "shared", "-u", broker.url)
    out = ok(result)
    assert out.count("----- got message -----") == 2
    assert "Key: k1" in out and "Properties: a=1" in out and "Payload: first" in out
    assert "Payload: (binary, 8 bytes) ff0062696e617279" in out
    assert "2 messages successfully consumed" in result.stderr
    # Both were acknowledged: nothing is left for the subscription.
    empty = run("consume", "cli-human", "-s", "s", "-n", "1", "--wait", "1", "-t", "shared", "-u", broker.url)
    assert empty.exit_code == 1
    assert "received 0 of 1 messages: none arrived in 1s" in empty.stderr


def test_produce_from_file_and_earliest_position(broker: BrokerProcess, tmp_path: Path) -> None:
    payload = tmp_path / "body.bin"
    payload.write_bytes(bytes(range(256)))
    out = ok(run("produce", "cli-file", "-f", str(payload), "-u", broker.url))
    assert out == "1 messages successfully produced to persistent://public/default/cli-file\n"
    rec = json.loads(ok(run("consume", "cli-file", "-s", "late", "-p", "earliest", "-o", "json",
                            "-u", broker.url)))
    assert rec["payload"] is None
    assert base64.b64decode(rec["payloadBase64"]) == bytes(range(256))


def test_http_service_url_works_through_lookup(broker: BrokerProcess) -> None:
    ok(run("produce", "cli-http", "-m", "via-lookup", "-u", broker.admin_url))
    rec = json.loads(ok(run("consume", "cli-http", "-s", "x", "-p", "earliest", "-o", "json",
                            "-u", broker.admin_url)))
    assert rec["payload"] == "via-lookup"


def test_bad_service_url_scheme_is_a_usage_error(broker: BrokerProcess) -> None:
    result = run("produce", "t", "-m", "x", "-u", "127.0.0.1:6650")
    assert result.exit_code == 2
    assert "use pulsar://HOST:PORT" in result.stderr
