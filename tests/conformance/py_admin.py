"""Python scenarios: the admin REST API of docs/admin.md as seen by a script: tenants,
namespaces, topics, subscriptions (create, skip, reset-cursor, expire), the key shapes of the
stats, the HTTP lookup and the answers to bad input. Records hold statuses, sorted key sets and
values that are behaviour (backlogs), never ids, ports or times."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, short

BASE = "/admin/v2/persistent/public/default"


def _keys(value: Any) -> Any:
    """A JSON object's keys; letterbox's own additions are named letterbox* and not compared
    (a client written for Pulsar ignores fields it does not know)."""
    if not isinstance(value, dict):
        return type(value).__name__
    return sorted(k for k in value if not k.startswith("letterbox"))


def _backlog(t: Target, topic: str, sub: str) -> Any:
    _, st = admin(t, "GET", f"{BASE}/{short(topic)}/stats")
    try:
        return st["subscriptions"][sub]["msgBacklog"]
    except (TypeError, KeyError):
        return None


def _publish(t: Target, topic: str, n: int) -> None:
    with client(t) as c:
        prod = c.create_producer(topic, batching_enabled=False)
        for i in range(n):
            prod.send(f"m{i}".encode())
        prod.close()


@scenario
def admin_tenant_lifecycle(t: Target, p: str) -> Any:
    tenant = f"{short(p)}-tenant"
    path = f"/admin/v2/tenants/{tenant}"
    out: dict[str, Any] = {"create": admin(t, "PUT", path, {"allowedClusters": ["standalone"]})[0]}
    out["again"] = admin(t, "PUT", path, {"allowedClusters": ["standalone"]})[0]
    status, info = admin(t, "GET", path)
    out["get"] = [status, info.get("allowedClusters") if isinstance(info, dict) else info]
    _, tenants = admin(t, "GET", "/admin/v2/tenants")
    out["listed"] = isinstance(tenants, list) and tenant in tenants
    out["unknown_cluster"] = admin(t, "PUT", f"{path}-2", {"allowedClusters": ["no-such-cluster"]})[0]
    out["namespace"] = admin(t, "PUT", f"/admin/v2/namespaces/{tenant}/ns")[0]
    out["delete_while_namespace"] = admin(t, "DELETE", path)[0]
    out["delete_namespace"] = admin(t, "DELETE", f"/admin/v2/namespaces/{tenant}/ns")[0]
    out["delete"] = admin(t, "DELETE", path)[0]
    out["delete_again"] = admin(t, "DELETE", path)[0]
    out["get_unknown"] = admin(t, "GET", path)[0]
    return out


@scenario
def admin_namespace_lifecycle(t: Target, p: str) -> Any:
    ns = f"public/{short(p)}-ns"
    path = f"/admin/v2/namespaces/{ns}"
    out: dict[str, Any] = {"create": admin(t, "PUT", path)[0], "again": admin(t, "PUT", path)[0]}
    out["get"] = admin(t, "GET", path)[0]
    _, listed = admin(t, "GET", "/admin/v2/namespaces/public")
    out["listed"] = isinstance(listed, list) and ns in listed
    out["unknown_tenant"] = admin(t, "PUT", f"/admin/v2/namespaces/{short(p)}-nobody/ns")[0]
    out["topic"] = admin(t, "PUT", f"/admin/v2/persistent/{ns}/t")[0]
    _, topics = admin(t, "GET", f"{path}/topics")
    out["topics"] = [x.replace(short(p), "{p}") for x in topics] if isinstance(topics, list) else topics
    out["delete_topic"] = admin(t, "DELETE", f"/admin/v2/persistent/{ns}/t")[0]
    out["delete"] = admin(t, "DELETE", path)[0]
    out["delete_again"] = admin(t, "DELETE", path)[0]
    return out


@scenario
def admin_topic_lifecycle(t: Target, p: str) -> Any:
    topic = f"{p}-admintopic"
    path = f"{BASE}/{short(topic)}"
    out: dict[str, Any] = {"create": admin(t, "PUT", path)[0], "again": admin(t, "PUT", path)[0]}
    _, listed = admin(t, "GET", BASE)
    out["listed"] = isinstance(listed, list) and topic in listed
    out["as_partitioned"] = admin(t, "PUT", f"{path}/partitions", 2)[0]
    out["partitions"] = admin(t, "GET", f"{path}/partitions")[1]
    out["subscriptions"] = admin(t, "GET", f"{path}/subscriptions")
    out["delete"] = admin(t, "DELETE", path)[0]
    out["delete_again"] = admin(t, "DELETE", path)[0]
    out["stats_after_delete"] = admin(t, "GET", f"{path}/stats")[0]
    return out


@scenario
def admin_delete_topic_in_use(t: Target, p: str) -> Any:
    """Deleting a topic with a connected consumer: refused without force, done with force=true."""
    topic = f"{p}-inuse"
    path = f"{BASE}/{short(topic)}"
    with client(t) as c:
        cons = c.subscribe(topic, "s")
        busy = admin(t, "DELETE", path)[0]
        forced = admin(t, "DELETE", f"{path}?force=true")[0]
        cons.close()
    return {"without_force": busy, "with_force": forced}


@scenario
def admin_subscription_operations(t: Target, p: str) -> Any:
    """Create a subscription at the earliest message, skip 2, reset to time 0, skip all, reset to a
    message id, expire, the backlog after each; list and delete."""
    topic = f"{p}-adminsub"
    path = f"{BASE}/{short(topic)}"
    admin(t, "PUT", path)
    out: dict[str, Any] = {"create": admin(t, "PUT", f"{path}/subscription/audit", {"ledgerId": -1, "entryId": -1})[0]}
    out["create_again"] = admin(t, "PUT", f"{path}/subscription/audit")[0]
    out["create_latest"] = admin(t, "PUT", f"{path}/subscription/tail")[0]
    _publish(t, topic, 5)
    out["backlog"] = [_backlog(t, topic, "audit"), _backlog(t, topic, "tail")]
    out["skip_2"] = [admin(t, "POST", f"{path}/subscription/audit/skip/2")[0], _backlog(t, topic, "audit")]
    out["reset_to_0"] = [admin(t, "POST", f"{path}/subscription/audit/resetcursor/0")[0], _backlog(t, topic, "audit")]
    out["skip_all"] = [admin(t, "POST", f"{path}/subscription/audit/skip_all")[0], _backlog(t, topic, "audit")]
    _, last = admin(t, "GET", f"{path}/lastMessageId")
    out["reset_to_last_id"] = [admin(t, "POST", f"{path}/subscription/audit/resetcursor",
                                     {"ledgerId": last["ledgerId"], "entryId": last["entryId"]})[0],
                               _backlog(t, topic, "audit")] if isinstance(last, dict) else last
    out["reset_to_0_again"] = [admin(t, "POST", f"{path}/subscription/audit/resetcursor/0")[0],
                               _backlog(t, topic, "audit")]
    time.sleep(1.1)
    expire = admin(t, "POST", f"{path}/subscription/audit/expireMessages/1")[0]
    deadline = time.monotonic() + 5  # the expiry may finish after the answer
    while _backlog(t, topic, "audit") != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    out["expire_1s"] = [expire, _backlog(t, topic, "audit")]
    _, subs = admin(t, "GET", f"{path}/subscriptions")
    out["subscriptions"] = sorted(subs) if isinstance(subs, list) else subs
    out["delete"] = admin(t, "DELETE", f"{path}/subscription/tail")[0]
    out["delete_again"] = admin(t, "DELETE", f"{path}/subscription/tail")[0]
    return out


@scenario
def admin_stats_shapes(t: Target, p: str) -> Any:
    """The key sets of topic stats, subscription stats, consumer and publisher stats, internal
    stats and a cursor of the internal stats."""
    topic = f"{p}-adminstats"
    path = f"{BASE}/{short(topic)}"
    with client(t) as c:
        cons = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        prod = c.create_producer(topic, batching_enabled=False)
        prod.send(b"m0")
        cons.acknowledge(cons.receive(5000))
        _, st = admin(t, "GET", f"{path}/stats")
        _, internal = admin(t, "GET", f"{path}/internalStats")
        prod.close()
        cons.close()
    sub = st["subscriptions"]["s"]
    return {"topic": _keys(st), "subscription": _keys(sub), "consumer": _keys(sub["consumers"][0]),
            "publisher": _keys(st["publishers"][0]), "internal": _keys(internal),
            "cursor": _keys(internal["cursors"]["s"]), "sub_type": sub.get("type"),
            "msgInCounter": st.get("msgInCounter")}


@scenario
def admin_http_lookup(t: Target, p: str) -> Any:
    """GET /lookup/v2/topic/...: the status and keys (not the URLs)."""
    topic = f"{p}-lookup"
    admin(t, "PUT", f"{BASE}/{short(topic)}")
    status, body = admin(t, "GET", f"/lookup/v2/topic/persistent/public/default/{short(topic)}")
    schemes = {k: v.split("://")[0] for k, v in body.items() if isinstance(v, str) and "://" in v} \
        if isinstance(body, dict) else None
    return {"status": status, "keys": _keys(body), "schemes": schemes}


@scenario
def admin_bad_input(t: Target, p: str) -> Any:
    """Unknown topic, unknown subscription, bad counts and bodies: the statuses."""
    topic = f"{p}-badinput"
    path = f"{BASE}/{short(topic)}"
    out = {"stats_unknown": admin(t, "GET", f"{path}-nope/stats")[0],
           "internal_stats_unknown": admin(t, "GET", f"{path}-nope/internalStats")[0],
           "subscriptions_unknown": admin(t, "GET", f"{path}-nope/subscriptions")[0],
           "unknown_namespace_topics": admin(t, "GET", f"/admin/v2/persistent/public/{short(p)}-nons")[0],
           "partitions_not_a_number": admin(t, "PUT", f"{path}-nan/partitions", '"three"')[0]}
    admin(t, "PUT", path)
    out["skip_unknown_sub"] = admin(t, "POST", f"{path}/subscription/nope/skip/1")[0]
    out["reset_unknown_sub"] = admin(t, "POST", f"{path}/subscription/nope/resetcursor/0")[0]
    out["delete_unknown_sub"] = admin(t, "DELETE", f"{path}/subscription/nope")[0]
    return out


@scenario
def admin_last_message_id_shape(t: Target, p: str) -> Any:
    """GET .../lastMessageId of a topic with one (unbatched) message: the keys of the answer."""
    topic = f"{p}-lastid"
    _publish(t, topic, 1)
    status, last = admin(t, "GET", f"{BASE}/{short(topic)}/lastMessageId")
    return {"status": status, "keys": _keys(last)}


@scenario
def admin_create_subscription_on_unknown_topic(t: Target, p: str) -> Any:
    """PUT .../subscription/s on a topic that does not exist (in an existing namespace): the
    status, and whether the topic exists afterwards."""
    topic = f"{p}-subnotopic"
    status = admin(t, "PUT", f"{BASE}/{short(topic)}/subscription/s")[0]
    return {"create": status, "stats_after": admin(t, "GET", f"{BASE}/{short(topic)}/stats")[0]}
