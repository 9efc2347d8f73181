"""Apache Pulsar's own command-line tools (pulsar-admin, pulsar-client, from the reference's jars)
against both brokers: the same commands, in order, and what each printed and its exit code,
compared after normalising names and reducing JSON to its shape."""
from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from conformance.reference import tool
from tests.conformance.compare import compare
from tests.conformance.targets import Target

# {t}: a tenant of this run; {topic}: a partitioned topic in it
ADMIN_SESSION = [
    "tenants create {t} --allowed-clusters standalone",
    "tenants list",
    "tenants get {t}",
    "namespaces create {t}/orders",
    "namespaces set-retention {t}/orders --size 100M --time 3h",
    "namespaces get-retention {t}/orders",
    "namespaces set-message-ttl {t}/orders --messageTTL 3600",
    "namespaces get-message-ttl {t}/orders",
    "namespaces set-delayed-delivery {t}/orders --enable --time 1s",
    "namespaces get-delayed-delivery {t}/orders",
    "topics create-partitioned-topic {topic} -p 3",
    "topics list-partitioned-topics {t}/orders",
    "topics get-partitioned-topic-metadata {topic}",
    "topics create-subscription -s billing {topic}",
    "topics subscriptions {topic}",
    "topics partitioned-stats {topic}",
    "topics stats {topic}-partition-0",
    "topics reset-cursor -s billing -t 1m {topic}",
    "topics skip-all -s billing {topic}-partition-1",
    "topics stats {t}/orders/missing",
    "namespaces create {t}/orders",
    "topics delete-partitioned-topic {topic}",
    "namespaces delete {t}/orders",
]


def shape(value: Any) -> Any:
    """A JSON value with its scalars replaced by their type: what a script reading it relies on."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return sorted({json.dumps(shape(v), sort_keys=True) for v in value})
    return type(value).__name__


def normalised(out: str, tenant: str) -> Any:
    text = out.replace(tenant, "{t}").strip()
    try:
        return shape(json.loads(text))
    except ValueError:
        # plain lines: only those naming this run's tenant (the brokers hold others)
        return sorted(line for line in text.splitlines() if "{t}" in line)


def admin_session(t: Target) -> list[dict[str, Any]]:
    tenant = f"tools-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{tenant}/orders/events"
    out = []
    for cmd in ADMIN_SESSION:
        args = cmd.format(t=tenant, topic=topic).split()
        done = tool("pulsar-admin", args, t.service_url, t.admin_url)
        # a refused command's reason is compared by its HTTP reason class, not its wording
        printed = normalised(done.stdout, tenant) if done.returncode == 0 else _reason(done.stderr, tenant)
        out.append({"cmd": cmd, "exit": done.returncode, "printed": printed})
    return out


def _reason(stderr: str, tenant: str) -> str:
    lines = [line for line in stderr.replace(tenant, "{t}").splitlines() if line.strip()]
    for word in ("not found", "already exists", "Not Found", "Conflict"):
        if any(word in line for line in lines):
            return word.lower()
    return "error"


@pytest.mark.timeout(900)
def test_pulsar_admin_session(targets: tuple[Target, Target]) -> None:
    with ThreadPoolExecutor(2) as pool:
        pulsar_rec, letterbox_rec = pool.map(admin_session, targets)
    compare("pulsar-admin", "admin_session", pulsar_rec, letterbox_rec)


def client_session(t: Target) -> dict[str, Any]:
    topic = f"persistent://public/default/tools-{uuid.uuid4().hex[:8]}"
    produced = tool("pulsar-client", ["produce", topic, "-m", "hello", "-m", "world", "-n", "2"],
                    t.service_url, t.admin_url)
    consumed = tool("pulsar-client", ["consume", topic, "-s", "sub", "-n", "4", "-p", "Earliest"],
                    t.service_url, t.admin_url)
    return {"produce": [produced.returncode, _printed(produced.stdout)],
            "consume": [consumed.returncode, _printed(consumed.stdout)]}


def _printed(out: str) -> list[str]:
    """The tool's summary lines and the messages it printed, without times and log prefixes."""
    keep = []
    for line in out.splitlines():
        if "messages successfully" in line:
            keep.append(line.split(" - ")[-1])
        elif "content:" in line:
            keep.append(line[line.index("key:"):])
    return keep


@pytest.mark.timeout(600)
def test_pulsar_client_produce_consume(targets: tuple[Target, Target]) -> None:
    with ThreadPoolExecutor(2) as pool:
        pulsar_rec, letterbox_rec = pool.map(client_session, targets)
    assert pulsar_rec["consume"][1], f"the reference consumed nothing: {pulsar_rec}"
    compare("pulsar-client", "produce_consume", pulsar_rec, letterbox_rec)
