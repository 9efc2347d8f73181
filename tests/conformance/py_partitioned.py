"""Python scenarios: partitioned topics through the admin API (create, metadata, grow, refuse to
shrink), producing by key, consuming every partition, the shape of the partitioned stats."""
from __future__ import annotations

from typing import Any

import pulsar

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, receive_all, short

Earliest = pulsar.InitialPosition.Earliest


def _path(topic: str) -> str:
    return f"/admin/v2/persistent/public/default/{short(topic)}"


def _keys(value: Any) -> Any:
    return sorted(value) if isinstance(value, dict) else type(value).__name__


@scenario
def partitioned_create_and_metadata(t: Target, p: str) -> Any:
    """PUT .../partitions 3, GET it, PUT again (409), grow to 4, the partition names the client
    sees."""
    topic = f"{p}-parts"
    out: dict[str, Any] = {"create": admin(t, "PUT", f"{_path(topic)}/partitions", 3)[0]}
    out["get"] = admin(t, "GET", f"{_path(topic)}/partitions")
    out["again"] = admin(t, "PUT", f"{_path(topic)}/partitions", 3)[0]
    out["grow"] = admin(t, "POST", f"{_path(topic)}/partitions", 4)[0]
    out["get_after"] = admin(t, "GET", f"{_path(topic)}/partitions")[1]
    with client(t) as c:
        out["client_partitions"] = [x.replace(p, "{p}") for x in c.get_topic_partitions(topic)]
    status, listed = admin(t, "GET", "/admin/v2/persistent/public/default/partitioned")
    out["listed"] = [status, isinstance(listed, list) and f"persistent://public/default/{short(topic)}" in listed]
    return out


@scenario
def partitioned_produce_by_key(t: Target, p: str) -> Any:
    """Keys are routed to one partition each (the client hashes them); a consumer of the topic
    gets everything, each key in order."""
    topic = f"{p}-partkeys"
    admin(t, "PUT", f"{_path(topic)}/partitions", 3)
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(12):
            prod.send(f"m{i}".encode(), partition_key=f"k{i % 4}")
        per_key: dict[str, list[str]] = {}
        partitions: dict[str, set[str]] = {}
        for m in receive_all(cons, 2000):
            per_key.setdefault(m.partition_key(), []).append(m.data().decode())
            partitions.setdefault(m.partition_key(), set()).add(m.topic_name().replace(p, "{p}"))
            cons.acknowledge(m)
        cons.close()
        prod.close()
        return {"per_key": dict(sorted(per_key.items())),
                "partition_of_key": {k: sorted(v) for k, v in sorted(partitions.items())}}


@scenario
def partitioned_round_robin_without_key(t: Target, p: str) -> Any:
    """Without keys: every message arrives once; how many partitions got some."""
    topic = f"{p}-partrr"
    admin(t, "PUT", f"{_path(topic)}/partitions", 3)
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(9):
            prod.send(f"m{i}".encode())
        got = receive_all(cons, 2000)
        for m in got:
            cons.acknowledge(m)
        cons.close()
        return {"data": sorted(m.data().decode() for m in got),
                "partitions_used": len({m.topic_name() for m in got})}


@scenario
def partitioned_stats_shape(t: Target, p: str) -> Any:
    """GET .../partitioned-stats (with and without perPartition): its top-level keys, the
    partitions named, the counts; stats of the parent topic itself: 404 or not."""
    topic = f"{p}-partstats"
    admin(t, "PUT", f"{_path(topic)}/partitions", 2)
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(4):
            prod.send(f"m{i}".encode(), partition_key=f"k{i}")
        receive_all(cons, 1000)
        status, st = admin(t, "GET", f"{_path(topic)}/partitioned-stats?perPartition=true")
        status2, st2 = admin(t, "GET", f"{_path(topic)}/partitioned-stats?perPartition=false")
        parent_stats, _ = admin(t, "GET", f"{_path(topic)}/stats")
        cons.close()
        prod.close()
    parts = st.get("partitions", {}) if isinstance(st, dict) else {}
    return {"status": status, "partitions": sorted(k.replace(p, "{p}") for k in parts),
            "msgInCounter": st.get("msgInCounter") if isinstance(st, dict) else None,
            "subscriptions": _keys(st.get("subscriptions")) if isinstance(st, dict) else None,
            "without_per_partition": [status2, _keys(st2.get("partitions")) if isinstance(st2, dict) else None],
            "parent_stats": parent_stats}


@scenario
def partitioned_delete(t: Target, p: str) -> Any:
    """DELETE .../partitions, then a second delete."""
    topic = f"{p}-partdel"
    create = admin(t, "PUT", f"{_path(topic)}/partitions", 2)[0]
    delete = admin(t, "DELETE", f"{_path(topic)}/partitions")[0]
    again = admin(t, "DELETE", f"{_path(topic)}/partitions")[0]
    return {"create": create, "delete": delete, "again": again}


@scenario
def partitioned_subscription_admin(t: Target, p: str) -> Any:
    """A subscription created through the admin API on a partitioned topic exists on every
    partition; its backlog is the sum."""
    topic = f"{p}-partsub"
    admin(t, "PUT", f"{_path(topic)}/partitions", 2)
    with client(t) as c:
        prod = c.create_producer(topic, batching_enabled=False)
        create = admin(t, "PUT", f"{_path(topic)}/subscription/audit", {"ledgerId": -1, "entryId": -1})[0]
        for i in range(4):
            prod.send(f"m{i}".encode(), partition_key=f"k{i}")
        prod.close()
        _, subs = admin(t, "GET", f"{_path(topic)}/subscriptions")
        _, st = admin(t, "GET", f"{_path(topic)}/partitioned-stats")
    backlog = st["subscriptions"]["audit"]["msgBacklog"] if isinstance(st, dict) else None
    return {"create": create, "subscriptions": subs, "backlog": backlog}


@scenario
def partitioned_metadata_answers(t: Target, p: str) -> Any:
    """The answers around partition metadata: shrinking (refused), a count of 0, GET .../partitions
    of an unknown topic and of a deleted partitioned topic, the `metadata` of partitioned-stats."""
    topic = f"{p}-partanswers"
    admin(t, "PUT", f"{_path(topic)}/partitions", 3)
    _, st = admin(t, "GET", f"{_path(topic)}/partitioned-stats")
    out = {"shrink": admin(t, "POST", f"{_path(topic)}/partitions", 2)[0],
           "zero": admin(t, "PUT", f"{_path(topic)}-zero/partitions", 0)[0],
           "get_unknown": admin(t, "GET", f"{_path(topic)}-nope/partitions")[0],
           "stats_metadata": st.get("metadata") if isinstance(st, dict) else st}
    admin(t, "DELETE", f"{_path(topic)}/partitions")
    out["get_after_delete"] = admin(t, "GET", f"{_path(topic)}/partitions")[0]
    return out
