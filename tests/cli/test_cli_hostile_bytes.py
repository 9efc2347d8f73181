"""A message whose key or properties are not UTF-8 (stored byte-exact, as Pulsar does):
`letterbox consume` and `letterbox admin topics examine-message` show it, never a
traceback (the official Python client cannot read such a key: the CLI says so)."""
from __future__ import annotations

import os
import subprocess
import sys

from letterbox.cli.client import NOT_TEXT
from letterbox.protocol import pb
from tests.broker.hostile_wire import INVALID_UTF8, marker, metadata, send_frame
from tests.broker.test_robustness import RawConn
from tests.conftest import BrokerProcess


def letterbox(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    return subprocess.run([sys.executable, "-m", "letterbox", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_consume_and_examine_show_bytes_that_are_not_utf8(broker: BrokerProcess) -> None:
    topic = "persistent://public/default/cli-bytes"
    raw = RawConn(broker.port)
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    raw.send(send_frame(1, 0, b"x", metadata("p", 0, partition_key=marker(INVALID_UTF8)), INVALID_UTF8))
    raw.expect(pb.BaseCommand.SEND_RECEIPT)
    raw.send(send_frame(1, 1, b"y", metadata("p", 1, properties=[pb.KeyValue(key="a", value=marker(INVALID_UTF8))]),
                        INVALID_UTF8))
    raw.expect(pb.BaseCommand.SEND_RECEIPT)
    raw.close()
    proc = letterbox("admin", "--admin-url", broker.admin_url, "topics", "examine-message", topic)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "\\xff\\xfe\\xc3(" in proc.stdout, proc.stdout
    proc = letterbox("consume", "--service-url", broker.url, topic, "-s", "cli", "-n", "2", "-p", "Earliest",
                     "--output", "json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.count(NOT_TEXT) == 2, proc.stdout
