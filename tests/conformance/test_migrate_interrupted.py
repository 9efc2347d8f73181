"""`letterbox migrate` when the target goes away part-way: the reference Apache Pulsar is reached
through a proxy (cut_proxy.py) that cuts every connection to its binary port and its admin API,
and refuses new ones, once some of the copy has passed. migrate ends with one line and a
non-zero status, without a traceback; with the proxy back, a rerun sends exactly what the target
had not stored, and on Pulsar every topic holds each source message once and each subscription's
consumer receives exactly what it owed."""
from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pulsar
import pytest

from tests.conformance.cut_proxy import CutProxy
from tests.conformance.migrate_fixture import drain_owed, fill, run_migrate
from tests.conformance.targets import Target, client

pytestmark = pytest.mark.timeout(300)

# bytes from migrate to the binary port before the cut: the probe, lookups, producers and a few
# dozen of the 220 messages (a copied message is about 200 B on the wire)
CUT_AFTER_BYTES = 20_000
TOTAL = 220


def _address(url: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(url)
    assert parsed.hostname is not None and parsed.port is not None, url
    return parsed.hostname, parsed.port


def _stored(t: Target, topic: str) -> int:
    """Messages the topic took in on `t` (0 before it exists)."""
    path = topic.replace("persistent://", "/admin/v2/persistent/", 1)
    try:
        with urllib.request.urlopen(f"{t.admin_url}{path}/stats", timeout=10) as r:
            return int(json.load(r)["msgInCounter"])
    except urllib.error.HTTPError:
        return 0


def _ids(t: Target, topic: str) -> list[str]:
    """The source ids of a topic's messages on `t`, in order (on the source: their own ids)."""
    out = []
    with client(t) as c:
        reader = c.create_reader(topic, pulsar.MessageId.earliest)
        while reader.has_message_available():
            m = reader.read_next(10_000)
            mid = m.message_id()
            out.append(m.properties().get("MIGRATED_MESSAGE_ID") or
                       f"{mid.ledger_id()}:{mid.entry_id()}:{mid.batch_index()}")
        reader.close()
    return out


def test_target_cut_mid_copy_then_rerun_sends_each_message_once(reference: Target,
                                                                 letterbox_target: Target) -> None:
    tenant = f"cut{uuid.uuid4().hex[:8]}"
    owed = fill(letterbox_target, tenant)
    topics = [f"persistent://{tenant}/app/{t}" for t in
              ("batched", "events-partition-0", "events-partition-1", "events-partition-2", "orders")]
    admin = CutProxy(_address(reference.admin_url)).start()
    binary = CutProxy(_address(reference.service_url), pulsar=True, cut_after_bytes=CUT_AFTER_BYTES,
                      on_cut=admin.cut).start()
    via = Target("pulsar", f"pulsar://{binary.url_host}", f"http://{admin.url_host}")
    try:
        try:  # it stops within its --target-timeout of the cut, and a few seconds of start-up
            first = run_migrate(letterbox_target, via, "--tenant", tenant, "--target-timeout", "3", timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"migrate still ran 60 s after starting (cut: {binary.was_cut.is_set()})")
        assert binary.was_cut.is_set(), f"the copy ended before the cut ({binary.bytes_up} bytes)"
        assert first.returncode == 1, first.stdout + first.stderr
        assert "Traceback" not in first.stderr, first.stderr
        errors = [line for line in first.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and "migrate stopped at persistent://" in errors[0], first.stderr
        assert "run the same command again" in errors[0]
        stored = sum(_stored(reference, t) for t in topics)
        assert 0 < stored < TOTAL, f"the cut did not come mid-copy: {stored} of {TOTAL} stored"

        admin.restore()
        binary.restore()
        second = run_migrate(letterbox_target, via, "--tenant", tenant, "--verify")
    finally:
        binary.stop()
        admin.stop()
    assert second.returncode == 0, second.stdout + second.stderr
    assert "verified: 5 topics, 9 subscriptions identical" in second.stdout
    sent = sum(int(line.rsplit("(", 1)[1].split()[0]) for line in second.stderr.splitlines()
               if line.endswith("sent by this run)"))
    assert sent == TOTAL - stored, f"the rerun sent {sent}; the target had stored {stored} of {TOTAL}"
    for topic in topics:
        source, target = _ids(letterbox_target, topic), _ids(reference, topic)
        assert len(target) == len(set(target)), f"{topic}: duplicates on Pulsar"
        assert target == source, f"{topic}: {len(target)} messages on Pulsar, {len(source)} on letterbox"
    drain_owed(reference, owed)
