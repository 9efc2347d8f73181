"""Python scenarios: topic compaction through the admin API (trigger, poll the status), keys
overwritten, read_compacted readers and consumers, the official client's table view."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, receive_all, short


def _compact(t: Target, topic: str) -> dict[str, Any]:
    """Trigger a compaction and wait (at most 20 s) for its end: the trigger's status and the
    final compaction status."""
    path = f"/admin/v2/persistent/public/default/{short(topic)}/compaction"
    status, _ = admin(t, "PUT", path)
    final: Any = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        _, st = admin(t, "GET", path)
        final = st.get("status") if isinstance(st, dict) else st
        if final in ("SUCCESS", "ERROR"):
            break
        time.sleep(0.2)
    return {"trigger": status, "status": final}


def _publish_keys(c: pulsar.Client, topic: str, pairs: list[tuple[str, str]]) -> None:
    prod = c.create_producer(topic, batching_enabled=False)
    for k, v in pairs:
        prod.send(v.encode(), partition_key=k)
    prod.close()


PAIRS = [("a", "a1"), ("b", "b1"), ("a", "a2"), ("c", "c1"), ("b", "b2"), ("a", "a3")]


def _read_compacted(c: pulsar.Client, topic: str, compacted: bool) -> list[str]:
    r = c.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=compacted)
    out = []
    while r.has_message_available() and len(out) < 50:
        m = r.read_next(3000)
        out.append(f"{m.partition_key()}={m.data().decode()}")
    r.close()
    return out


@scenario
def compaction_status_lifecycle(t: Target, p: str) -> Any:
    """GET .../compaction before any run, the trigger, the status once done; 404 for an unknown
    topic."""
    topic = f"{p}-compstatus"
    with client(t) as c:
        _publish_keys(c, topic, PAIRS[:2])
        _, before = admin(t, "GET", f"/admin/v2/persistent/public/default/{short(topic)}/compaction")
        run = _compact(t, topic)
    unknown, _ = admin(t, "GET", f"/admin/v2/persistent/public/default/{short(topic)}-nope/compaction")
    unknown_put, _ = admin(t, "PUT", f"/admin/v2/persistent/public/default/{short(topic)}-nope/compaction")
    return {"before": before.get("status") if isinstance(before, dict) else before, "run": run,
            "unknown_get": unknown, "unknown_put": unknown_put}


@scenario
def compaction_keeps_latest_per_key(t: Target, p: str) -> Any:
    """After compaction a read_compacted reader sees each key's latest value (in the order of the
    latest values), a plain reader every message."""
    topic = f"{p}-complatest"
    with client(t) as c:
        _publish_keys(c, topic, PAIRS)
        run = _compact(t, topic)
        return {"run": run, "compacted": _read_compacted(c, topic, True), "plain": _read_compacted(c, topic, False)}


@scenario
def compaction_then_more_messages(t: Target, p: str) -> Any:
    """Messages published after the compaction are read after the compacted view, uncompacted."""
    topic = f"{p}-compafter"
    with client(t) as c:
        _publish_keys(c, topic, PAIRS)
        run = _compact(t, topic)
        _publish_keys(c, topic, [("a", "a4"), ("b", "b3"), ("a", "a5")])
        return {"run": run, "compacted": _read_compacted(c, topic, True)}


@scenario
def compaction_tombstone_removes_key(t: Target, p: str) -> Any:
    """An empty payload with a key removes the key from the compacted view (here followed by a
    live key, so the view does not end at the tombstone)."""
    topic = f"{p}-comptomb"
    with client(t) as c:
        _publish_keys(c, topic, [("a", "a1"), ("b", "b1"), ("a", ""), ("c", "c1")])
        run = _compact(t, topic)
        return {"run": run, "compacted": _read_compacted(c, topic, True)}


@scenario
def compaction_read_compacted_consumer(t: Target, p: str) -> Any:
    """An Exclusive consumer with is_read_compacted on a new subscription reads the view."""
    topic = f"{p}-compcons"
    with client(t) as c:
        _publish_keys(c, topic, PAIRS)
        run = _compact(t, topic)
        cons = c.subscribe(topic, "s", is_read_compacted=True, initial_position=pulsar.InitialPosition.Earliest)
        got = [f"{m.partition_key()}={m.data().decode()}" for m in receive_all(cons, 2000)]
        cons.close()
        return {"run": run, "got": got}


@scenario
def table_view_latest_values(t: Target, p: str) -> Any:
    """client.create_table_view: the latest value per key, before and after a compaction, and a
    value published while it is open."""
    topic = f"{p}-tableview"
    with client(t) as c:
        _publish_keys(c, topic, PAIRS)
        tv = c.create_table_view(topic)
        first = {k: tv.get(k).decode() for k in ("a", "b", "c")}
        size = len(tv)
        _publish_keys(c, topic, [("d", "d1")])
        deadline = time.monotonic() + 10
        while tv.get("d") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        live = tv.get("d")
        tv.close()
        _compact(t, topic)
        tv2 = c.create_table_view(topic)
        after = {k: tv2.get(k).decode() for k in ("a", "b", "c", "d")}
        size2 = len(tv2)
        tv2.close()
        return {"first": first, "size": size, "live": live.decode() if live else None,
                "after_compaction": after, "size_after": size2}
