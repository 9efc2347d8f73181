"""`letterbox import` and `letterbox redrive-back` with the reference Apache Pulsar: a Pulsar dead
letter topic (dead letters of the Pulsar client's own DLQ policy, and dead letters with letterbox's
reasons, as a migration brings them) is imported into a local letterbox filtered by reason, replayed
there, and sent back to its source topic on Pulsar after the fix: the consumer on Pulsar processes
every message of the reason once; reruns send nothing; mistakes get one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from typing import Any

import pulsar
import pytest

from tests.conformance.targets import Target, client

pytestmark = pytest.mark.timeout(600)


def _admin(url: str, method: str, path: str, body: Any = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()


def _namespace(t: Target, tenant: str, dedup: bool) -> None:
    _admin(t.admin_url, "PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
    _admin(t.admin_url, "PUT", f"/admin/v2/namespaces/{tenant}/ns")
    if dedup:
        _admin(t.admin_url, "POST", f"/admin/v2/namespaces/{tenant}/ns/deduplication", True)


def _cli(lb: Target, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    cmd = [sys.executable, "-m", "letterbox", *args, "--service-url", lb.service_url, "--admin-url", lb.admin_url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def _fill_pulsar_dlq(ref: Target, source: str) -> dict[str, str]:
    """The Pulsar client's DLQ policy dead-letters 4 messages (no reason); 12 `terminated` and 8
    `max-redeliveries` dead letters with letterbox's stamps join them. Returns payload -> reason."""
    dlq = f"{source}-s-DLQ"
    reasons: dict[str, str] = {}
    with client(ref) as c:
        consumer = c.subscribe(source, "s", consumer_type=pulsar.ConsumerType.Shared,
                               negative_ack_redelivery_delay_ms=100,
                               dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1))
        producer = c.create_producer(source)
        for i in range(4):
            producer.send(f"client-{i}".encode())
            reasons[f"client-{i}"] = ""
        nacked = 0
        while nacked < 8:  # each message: delivered, nacked, redelivered, nacked, then dead-lettered
            msg = consumer.receive(20_000)
            consumer.negative_acknowledge(msg)
            nacked += 1
        stamped = c.create_producer(dlq)
        for i in range(20):
            reason = "terminated" if i % 5 < 3 else "max-redeliveries"
            payload = f"stamped-{i}"
            stamped.send(payload.encode(), partition_key=f"k{i}", properties={
                "REAL_TOPIC": source, "ORIGIN_MESSAGE_ID": f"9:{i}:-1:-1", "DEAD_LETTER_REASON": reason,
                "DEAD_LETTER_TIME": str(1_700_000_000_000 + i), "app": str(i)})
            reasons[payload] = reason
        # the client's DLQ policy moves its last message asynchronously: read until all 24 are there
        reader = c.create_reader(dlq, pulsar.MessageId.earliest)
        count, deadline = 0, time.monotonic() + 60
        while count < 24 and time.monotonic() < deadline:
            try:
                reader.read_next(1_000)
                count += 1
            except pulsar.Timeout:
                pass
        assert count == 24, "the Pulsar client's DLQ policy and the stamped dead letters"
        consumer.close()
    return reasons


def _read(t: Target, topic: str) -> list[Any]:
    out = []
    with client(t) as c:
        reader = c.create_reader(topic, pulsar.MessageId.earliest)
        while reader.has_message_available():
            out.append(reader.read_next(10_000))
    return out


def test_import_a_pulsar_dlq_by_reason_replay_it_and_redrive_it_back(reference: Target,
                                                                     letterbox_target: Target) -> None:
    tenant = f"imp-{uuid.uuid4().hex[:8]}"
    _namespace(reference, tenant, dedup=True)
    _namespace(letterbox_target, tenant, dedup=False)  # import switches deduplication on
    source = f"persistent://{tenant}/ns/orders"
    reasons = _fill_pulsar_dlq(reference, source)
    dlq, local = f"{source}-s-DLQ", f"persistent://{tenant}/ns/terminated-home"
    pulsar_opts = ["--pulsar-url", reference.service_url]

    done = _cli(letterbox_target, "import", dlq, *pulsar_opts, "--reason", "terminated", "--as", local)
    assert done.returncode == 0, done.stderr
    home = _read(letterbox_target, local)
    assert sorted(m.data().decode() for m in home) == sorted(p for p, r in reasons.items() if r == "terminated")
    first = home[0]
    assert first.properties()["DEAD_LETTER_REASON"] == "terminated" and first.partition_key().startswith("k")
    assert first.properties()["MIGRATED_MESSAGE_ID"].count(":") == 2 and "MIGRATED_PUBLISH_TIME" in first.properties()
    again = _cli(letterbox_target, "import", dlq, *pulsar_opts, "--reason", "terminated", "--as", local)
    assert again.returncode == 0 and "(0 sent by this run)" in again.stdout, again.stdout + again.stderr
    assert len(_read(letterbox_target, local)) == 12
    everything = _cli(letterbox_target, "import", dlq, *pulsar_opts, "--as", f"persistent://{tenant}/ns/all")
    assert everything.returncode == 0 and len(_read(letterbox_target, f"persistent://{tenant}/ns/all")) == 24

    # replayed locally by the fixed handler: every message processes
    with client(letterbox_target) as c:
        replay = c.subscribe(local, "replay", initial_position=pulsar.InitialPosition.Earliest)
        handled = [replay.receive(10_000) for _ in range(12)]
        for m in handled:
            replay.acknowledge(m)
        replay.close()

    with client(reference) as c:  # the fixed consumer on Pulsar
        fixed = c.subscribe(source, "fixed", initial_position=pulsar.InitialPosition.Latest)
        back = _cli(letterbox_target, "redrive-back", local, *pulsar_opts)
        assert back.returncode == 0, back.stderr
        rerun = _cli(letterbox_target, "redrive-back", local, *pulsar_opts)
        assert rerun.returncode == 0 and "(0 by this run)" in rerun.stdout, rerun.stdout + rerun.stderr
        got = []
        while True:
            try:
                m = fixed.receive(3_000)
            except pulsar.Timeout:
                break
            got.append(m)
            fixed.acknowledge(m)
    assert sorted(m.data().decode() for m in got) == sorted(p for p, r in reasons.items() if r == "terminated")
    for m in got:  # a fresh start: its origin and the user's properties, no dead-letter stamps
        props = m.properties()
        assert props["REAL_TOPIC"] == source and "app" in props
        assert not {"DEAD_LETTER_REASON", "DEAD_LETTER_TIME", "MIGRATED_MESSAGE_ID"} & set(props)


def test_import_mistakes_get_one_line_errors(reference: Target, letterbox_target: Target) -> None:
    bad_reason = _cli(letterbox_target, "import", "t", "--pulsar-url", reference.service_url, "--reason", "max-redelivery")
    assert bad_reason.returncode == 2 and "max-redeliveries" in bad_reason.stderr
    bad_url = _cli(letterbox_target, "import", "t", "--pulsar-url", "pulsar://127.0.0.1:9")
    assert bad_url.returncode != 0 and "Traceback" not in bad_url.stderr
    assert "127.0.0.1:9" in bad_url.stderr, bad_url.stderr
    with urllib.request.urlopen(f"{letterbox_target.admin_url}/admin/v2/namespaces/public/default/deduplication",
                                timeout=30) as r:  # nothing was written on letterbox
        body = r.read().strip()
    assert not body or json.loads(body) in (None, False), body
    window = _cli(letterbox_target, "import", "t", "--pulsar-url", reference.service_url, "--since", "1h",
                  "--until", "2h")
    assert window.returncode == 2 and "--since must be earlier than --until" in window.stderr
    nameless = _cli(letterbox_target, "redrive-back", f"persistent://public/default/nameless-{uuid.uuid4().hex[:6]}",
                    "--pulsar-url", reference.service_url)
    assert nameless.returncode == 0 and "sent 0 messages" in nameless.stdout, nameless.stdout + nameless.stderr


def test_redrive_back_finds_a_missing_namespace_before_sending(reference: Target, letterbox_target: Target) -> None:
    tenant = f"back-{uuid.uuid4().hex[:8]}"
    _namespace(reference, tenant, dedup=True)
    _namespace(letterbox_target, tenant, dedup=False)
    there, missing = f"persistent://{tenant}/ns/orders", f"persistent://{tenant}/gone/orders"
    local = f"persistent://{tenant}/ns/home"
    with client(letterbox_target) as c:  # the message for the missing namespace comes third
        c.subscribe(local, "hold").close()  # keeps the messages
        producer = c.create_producer(local, batching_enabled=False)
        for i, real in enumerate((there, there, missing, there)):
            producer.send(f"m{i}".encode(), properties={"REAL_TOPIC": real})
    pulsar_opts = ["--pulsar-url", reference.service_url]
    for extra in ([], ["--pulsar-admin-url", reference.admin_url]):
        refused = _cli(letterbox_target, "redrive-back", local, *pulsar_opts, *extra)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert f"Apache Pulsar has no namespace {tenant}/gone" in refused.stderr, refused.stderr
    with urllib.request.urlopen(f"{reference.admin_url}/admin/v2/persistent/{tenant}/ns", timeout=30) as r:
        assert there not in json.load(r), "a message was sent before the refusal"
    _admin(reference.admin_url, "PUT", f"/admin/v2/namespaces/{tenant}/gone")
    done = _cli(letterbox_target, "redrive-back", local, *pulsar_opts)
    assert done.returncode == 0 and "sent 4 messages" in done.stdout, done.stdout + done.stderr
    assert [m.data() for m in _read(reference, there)] == [b"m0", b"m1", b"m3"]
    assert [m.data() for m in _read(reference, missing)] == [b"m2"]
