# The executor side of the pipeline. A task gets position ranges (the
# `letterbox` source with emit=ranges), reads their messages with the
# official client, calls the handler once per record and routes the result:
# success to the sink (yielded as an Arrow row), retry to a delay-tier topic,
# dead letter to the DLQ topic — which of the two, with which delay, is the
# failure core's decision (letterbox.failure.decide), the stamps its table.
#
# Exactly once per attempt: retry and DLQ messages are published by a
# producer named after the pipeline and the *input partition topic*, with the
# sequence id derived from the input message's position (offsets.
# sequence_id_for). A retried Spark task, or a micro-batch re-run after a
# driver restart, re-sends the same (producer, sequence id) pairs and the
# broker's deduplication drops them; the sink rows of a failed attempt are
# discarded by Spark's file commit protocol and a re-run batch overwrites its
# own `batch_id=N` directory. This holds when the handler decides the same
# way for the same record and attempt.
from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulsar
import pyarrow as pa

from letterbox import message_properties as mp
from letterbox.auth_options import AuthOptions
from letterbox.failure import (
    DeadLetter,
    DeliverAt,
    DeliveryState,
    FailurePolicy,
    PipelineFail,
    PipelineRetry,
    dead_letter_stamps,
    decide,
    origin_stamps,
    reconsume_times,
    redriven_properties,
    retry_stamps,
)
from letterbox.spark.broker_io import open_client, read_range
from letterbox.spark.offsets import Position, sequence_id_for
from letterbox.spark.pipeline.outcomes import Fail, Record, Retry
from letterbox.spark.pipeline.policy import PipelineTopics, RetryPolicy
from letterbox.spark.publisher import IdempotentPublisher

SINK_ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("value", pa.binary()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("topic", pa.string()),
        pa.field("message_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("publish_time", pa.timestamp("us", tz="UTC")),
    ]
)
COUNTS_KEY = "__letterbox_outcome_counts__"  # key of a task's count row (message_id null)
SINK_DDL = (
    "key string, value binary, properties map<string,string>, topic string, "
    "message_id string, attempt int, publish_time timestamp"
)


@dataclass(frozen=True)
class RouterConfig:
    service_url: str
    topics: PipelineTopics
    policy: RetryPolicy
    handler: Callable[..., Any]
    vectorized: bool = False
    auth: AuthOptions = field(default_factory=AuthOptions)


def _to_bytes(out: Any, record: Record) -> bytes:
    if out is None:
        return record.value
    if isinstance(out, bytes | bytearray | memoryview):
        return bytes(out)
    return str(out).encode()


class Router:
    def __init__(self, cfg: RouterConfig, client: pulsar.Client) -> None:
        self.cfg = cfg
        self.client = client  # the task's, shared with its range reads
        self.publishers: dict[str, IdempotentPublisher] = {}
        self.counts = {"ok": 0, "retry": 0, "dead": 0}
        self.policy = FailurePolicy(retry=cfg.policy)

    def _publisher(self, input_topic: str) -> IdempotentPublisher:
        pub = self.publishers.get(input_topic)
        if pub is None:
            digest = hashlib.sha1(input_topic.encode()).hexdigest()[:12]
            name = f"letterbox-pipeline-{self.cfg.topics.subscription}-{digest}"
            pub = self.publishers[input_topic] = IdempotentPublisher(self.client, name)
        return pub

    def route_messages(self, msgs: list[tuple[Any, Any]], topic: str, partition: int, input_topic: str) -> pa.RecordBatch:
        """Route (message, message id) pairs read from one input partition; returns the sink rows."""
        records = []
        message_id = mp.origin_message_id
        for msg, mid in msgs:
            props = msg.properties()
            if props:  # a retried record: its first topic, id and attempt count travel in its stamps
                rt = props.get(mp.REAL_TOPIC) or topic
                oid = props.get(mp.ORIGIN_MESSAGE_ID) or message_id(mid.ledger_id(), mid.entry_id(), partition, mid.batch_index())
                att = reconsume_times(props)
            else:
                rt, att = topic, 0
                oid = message_id(mid.ledger_id(), mid.entry_id(), partition, mid.batch_index())
            et = msg.event_timestamp()
            records.append(
                Record(msg.partition_key() or None, msg.data(), props, rt, oid, att, msg.publish_timestamp(), et or None)
            )
        outcomes = self._outcomes(records)
        ok: list[tuple[Record, bytes]] = []
        for j, out in enumerate(outcomes):
            rec = records[j]
            if not isinstance(out, Retry | Fail):
                ok.append((rec, _to_bytes(out, rec)))
                continue
            mid = msgs[j][1]
            seq = sequence_id_for(mid.ledger_id(), mid.entry_id(), mid.batch_index())
            event = PipelineRetry(out.delay, out.level, out.error) if isinstance(out, Retry) \
                else PipelineFail(out.error)
            decision = decide(DeliveryState(reconsume_times=rec.attempt), event, self.policy, int(time.time() * 1000))
            if isinstance(decision, DeliverAt):
                self._retry(rec, decision, out.error, input_topic, seq)
            elif isinstance(decision, DeadLetter):
                details = out.details if isinstance(out, Fail) else {}
                self._dead(rec, decision, input_topic, seq, details)
            else:  # pragma: no cover - decide answers a pipeline event with one of the two
                raise AssertionError(f"unexpected decision {decision!r} for {event!r}")
        self.counts["ok"] += len(ok)
        return pa.RecordBatch.from_arrays(
            [
                pa.array([r.key for r, _ in ok], pa.string()),
                pa.array([v for _, v in ok], pa.binary()),
                pa.array([list(r.properties.items()) for r, _ in ok], pa.map_(pa.string(), pa.string())),
                pa.array([r.topic for r, _ in ok], pa.string()),
                pa.array([r.message_id for r, _ in ok], pa.string()),
                pa.array([r.attempt for r, _ in ok], pa.int32()),
                pa.array([r.publish_time_ms * 1000 if r.publish_time_ms else None for r, _ in ok], pa.timestamp("us", tz="UTC")),
            ],
            schema=SINK_ARROW_SCHEMA,
        )

    def _outcomes(self, records: list[Record]) -> Sequence[Any]:
        if self.cfg.vectorized:
            import pandas as pd

            frame = pd.DataFrame(
                {
                    "key": [r.key for r in records],
                    "value": [r.value for r in records],
                    "properties": [r.properties for r in records],
                    "topic": [r.topic for r in records],
                    "message_id": [r.message_id for r in records],
                    "attempt": [r.attempt for r in records],
                }
            )
            try:
                result = list(self.cfg.handler(frame))
            except Exception as exc:  # the whole batch is retried
                return [Retry(error=_error_text(exc))] * len(records)
            if len(result) != len(records):
                raise ValueError(f"vectorized handler returned {len(result)} outcomes for {len(records)} records")
            return result
        out: list[Any] = []
        for r in records:
            try:
                out.append(self.cfg.handler(r))
            except Exception as exc:
                out.append(Retry(error=_error_text(exc)))
        return out

    def _retry(self, rec: Record, d: DeliverAt, error: str, input_topic: str, seq: int) -> None:
        tier = self.cfg.topics.tiers[self.cfg.policy.tier_for(d.delay_ms / 1000)]
        props = redriven_properties(rec.properties)
        props.update(origin_stamps(rec.topic, rec.message_id))
        props.update(retry_stamps(d.count, d.delay_ms, tier))
        if error:
            props[mp.DEAD_LETTER_DESCRIPTION] = error
        self._send(tier, rec, props, input_topic, seq)
        self.counts["retry"] += 1

    def _dead(self, rec: Record, d: DeadLetter, input_topic: str, seq: int, extra: dict[str, str]) -> None:
        props = redriven_properties(rec.properties)
        props.update(extra)
        props.update(origin_stamps(rec.topic, rec.message_id))
        props[mp.RECONSUMETIMES] = str(rec.attempt)
        props.update(dead_letter_stamps(d.reason, int(time.time() * 1000), self.cfg.topics.subscription))
        props[mp.DEAD_LETTER_DESCRIPTION] = d.description or ""
        self._send(self.cfg.topics.dead_letter, rec, props, input_topic, seq)
        self.counts["dead"] += 1

    def _send(self, topic: str, rec: Record, props: dict[str, str], input_topic: str, seq: int) -> None:
        self._publisher(input_topic).send(
            topic, rec.value, seq, key=rec.key, properties=props, event_time_ms=rec.event_time_ms
        )

    def flush(self) -> None:
        """Wait until every retry / dead letter is stored; raises PublishError if one failed."""
        for pub in self.publishers.values():
            pub.flush()

    def close(self) -> None:
        for pub in self.publishers.values():
            pub.close()


def count_row(counts: dict[str, int]) -> pa.RecordBatch:
    """A task's outcome counts as one sink-shaped row (message_id null)."""
    return pa.RecordBatch.from_pylist(
        [{"key": COUNTS_KEY, "value": b"", "properties": [(k, str(v)) for k, v in counts.items()],
          "topic": None, "message_id": None, "attempt": None, "publish_time": None}],
        schema=SINK_ARROW_SCHEMA,
    )


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[:2000]


def route_ranges(
    cfg: RouterConfig, read_timeout_ms: int, fail_on_data_loss: bool, chunk: int = 10_000,
    counters: dict[str, Any] | None = None, count_rows: bool = False,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of one micro-batch: its input rows are position
    ranges (the `letterbox` source with emit=ranges); each range is read here
    with the official client and routed, so records enter the JVM only once,
    as sink rows. `counters` (Spark accumulators keyed ok / retry / dead) get
    the task's outcome counts once its retries and dead letters are stored;
    Spark merges the updates of successful tasks only. With count_rows the
    task ends with one extra row instead: key COUNTS_KEY, message_id null and
    the counts in its properties (for Spark Connect, which has no accumulators)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Sink rows are yielded as they come: if the task fails later (a
        # publish error in flush()), Spark discards the task's output.
        client = open_client(cfg.service_url, auth=cfg.auth)
        router = Router(cfg, client)
        try:
            for b in batches:
                for row in b.to_pylist():
                    start = Position(row["start_ledger"], row["start_entry"])
                    end = Position(row["end_ledger"], row["end_entry"])
                    topic, part, name = row["topic"], row["partition"], row["partition_topic"]
                    pending: list[tuple[Any, Any]] = []
                    for pair in read_range(client, name, start, end, read_timeout_ms, fail_on_data_loss):
                        pending.append(pair)
                        if len(pending) == chunk:
                            yield router.route_messages(pending, topic, part, name)
                            pending = []
                    if pending:
                        yield router.route_messages(pending, topic, part, name)
            router.flush()  # every retry / dead letter is stored before the task can succeed
            for name, acc in (counters or {}).items():
                acc.add(router.counts[name])
            if count_rows:
                yield count_row(router.counts)
        finally:
            router.close()
            client.close()

    return run
