# Redrive on Spark: republish the dead letters that a SQL filter selects to
# their REAL_TOPIC (or a target topic), for DLQs too large for the CLI.
#
# Idempotence: each DLQ partition is republished by a producer named after
# the DLQ partition, the filter and the run name, with the sequence id
# derived from the dead letter's position in the DLQ. Running the same redrive
# again (after a failure, or twice) republishes nothing twice: the broker's
# deduplication drops the repeats. The DLQ itself is only read; its messages
# stay (use the CLI's purge, or retention, to drop them).
#
# A redriven message keeps payload, key, event time and the user's
# properties, plus REAL_TOPIC and ORIGIN_MESSAGE_ID; the dead-letter and
# retry stamps are dropped (failure.stamps' one table, as the admin/CLI
# redrive) so it starts over as a fresh message.
#
# Subscription-only (`subscription_only=True`): a producer cannot keep the
# topic's other subscriptions from seeing a message, so Spark only SELECTS
# (the SQL filter runs on the cluster) and the broker MOVES: the selected
# DLQ message ids go, at most ADMIN_IDS per call, to the broker's admin redrive
# (`subscriptionOnly` + `messageIds`), which appends each message and acks it
# on the other subscriptions in one storage transaction and marks it handled
# in the DLQ. A repeated run moves nothing twice (moved messages are no longer
# live). Needs the admin URL.
from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from letterbox import message_properties as mp
from letterbox.auth_options import AuthOptions
from letterbox.failure import redriven_properties
from letterbox.spark.broker_io import open_client
from letterbox.spark.offsets import sequence_id_for
from letterbox.spark.options import full_topic_name
from letterbox.spark.publisher import IdempotentPublisher
from letterbox.topic_name import PARTITION_SUFFIX, TopicName

ADMIN_IDS = 5_000  # message ids per admin redrive call


def redrive(
    spark: Any,
    service_url: str,
    dlq_topic: str,
    where: str | None = None,
    target: str | None = None,
    run_name: str = "redrive",
    auth: AuthOptions | None = None,
    subscription_only: bool = False,
    admin_url: str | None = None,
) -> dict[str, int]:
    """Republish the dead letters matching `where` (Spark SQL over the source schema).

    Returns {"selected": matching dead letters, "republished": newly stored
    messages}; a repeated run selects the same and republishes 0. With
    `subscription_only` the broker at `admin_url` moves them back into the
    subscription each died in (see the module comment).
    """
    auth = auth or AuthOptions()
    if subscription_only and (target is not None or not admin_url):
        raise ValueError("a subscription-only redrive needs admin_url (the broker moves the messages) "
                         "and takes no target")
    df = (spark.read.format("letterbox").option("service_url", service_url).option("topic", dlq_topic)
          .options(**auth.spark_options()).load())
    if where:
        df = df.where(where)
    if subscription_only:
        assert admin_url is not None
        return _redrive_through_broker(df, admin_url, auth)
    if target is None:
        df = df.where(f"properties['{mp.REAL_TOPIC}'] IS NOT NULL")
    tag = hashlib.sha1(f"{full_topic_name(dlq_topic)}|{where or ''}|{target or ''}|{run_name}".encode()).hexdigest()[:10]
    fn = _republish(service_url, target and full_topic_name(target), tag, auth)
    counted = df.mapInArrow(fn, "sent long, stored long").groupBy().sum("sent", "stored").collect()[0]
    return {"selected": int(counted[0] or 0), "republished": int(counted[1] or 0)}


def _republish(service_url: str, target: str | None, tag: str, auth: AuthOptions) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = open_client(service_url, auth=auth)  # one per task, shared by the per-DLQ-partition producers
        pubs: dict[str, IdempotentPublisher] = {}
        try:
            for b in batches:
                cols = {n: b.column(i).to_pylist() for i, n in enumerate(b.schema.names)}
                for j in range(b.num_rows):
                    part = cols["partition"][j]
                    dlq_partition = cols["topic"][j] if part < 0 else f"{cols['topic'][j]}{PARTITION_SUFFIX}{part}"
                    pub = pubs.get(dlq_partition)
                    if pub is None:
                        digest = hashlib.sha1(dlq_partition.encode()).hexdigest()[:10]
                        pub = pubs[dlq_partition] = IdempotentPublisher(client, f"letterbox-redrive-{tag}-{digest}")
                    props = redriven_properties(dict(cols["properties"][j] or []))
                    ledger, entry, _, bidx = (int(x) for x in cols["message_id"][j].split(":"))
                    ev = cols["event_time"][j]
                    pub.send(
                        target or props[mp.REAL_TOPIC],
                        cols["value"][j] or b"",
                        sequence_id_for(ledger, entry, bidx),
                        key=cols["key"][j],
                        properties=props,
                        event_time_ms=int(ev.timestamp() * 1000) if ev is not None else None,
                    )
            for pub in pubs.values():
                pub.flush()
            sent = sum(p.sent for p in pubs.values())
            stored = sum(p.stored for p in pubs.values())
        finally:
            for pub in pubs.values():
                pub.close()
            client.close()
        yield pa.RecordBatch.from_pydict({"sent": [sent], "stored": [stored]}, schema=pa.schema([("sent", pa.int64()), ("stored", pa.int64())]))

    return run


def _redrive_through_broker(df: Any, admin_url: str, auth: AuthOptions) -> dict[str, int]:
    """Send the selected DLQ message ids to the broker's subscription-only redrive."""
    selected = moved = 0
    pending: dict[str, list[str]] = {}
    for row in df.select("topic", "partition", "message_id").toLocalIterator():
        dlq = row["topic"] if row["partition"] < 0 else f"{row['topic']}{PARTITION_SUFFIX}{row['partition']}"
        ids = pending.setdefault(dlq, [])
        ids.append(row["message_id"])
        selected += 1
        if len(ids) >= ADMIN_IDS:
            moved += _admin_redrive(admin_url, dlq, ids, auth)
            ids.clear()
    for dlq, ids in pending.items():
        if ids:
            moved += _admin_redrive(admin_url, dlq, ids, auth)
    return {"selected": selected, "republished": moved}


def _admin_redrive(admin_url: str, dlq: str, ids: list[str], auth: AuthOptions) -> int:
    path = TopicName.parse(dlq).admin_path + "/letterbox/redrive"
    body = json.dumps({"subscriptionOnly": True, "messageIds": ids}).encode()
    headers = {"Content-Type": "application/json", **auth.http_headers()}
    request = urllib.request.Request(admin_url.rstrip("/") + path, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=300, context=auth.ssl_context()) as resp:
            return int(json.load(resp).get("moved") or 0)
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read()).get("reason")
        except ValueError:
            reason = exc.reason
        hint = ("; the broker has no subscription-only redrive (a letterbox extension: Apache Pulsar and "
                "letterbox --pulsar-compatible-only have none), redrive without subscription_only instead"
                if exc.code == 404 else "")
        raise RuntimeError(f"subscription-only redrive of {dlq} refused (HTTP {exc.code}): {reason}{hint}") from None
