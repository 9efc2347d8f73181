# GET /metrics: Prometheus text exposition (format 0.0.4) with Pulsar's
# metric names and labels (cluster, namespace, topic, subscription) where
# Pulsar has one, plus letterbox's own dead-letter counters and rates by reason
# and the per-subscription poison-suspect and circuit-state gauges.
# Cost at scale (20,000 topics make ~40 MB of text): collect() reads the
# broker's numbers on the event loop in slices of SLICE topics and yields
# between slices, so no client waits behind more than one slice;
# a Formatter turns that snapshot (plain columns, no broker objects) into
# bytes in a worker thread, reusing the text of blocks of 1,000 samples that
# did not change since the last build; MetricsCache lets concurrent scrapes share one
# build and, once a build has cost more than EXPENSIVE seconds, serves its body
# for MAX_AGE seconds (a small broker's body is always fresh). Stored topics not used since
# the broker started are loaded (sliced too), so they are reported; after a
# bulk load the heap is frozen for the garbage collector (see
# _load_stored_topics). Broker-side appends (dead letters, moves, redrives)
# count in their target topic's in-counters (BrokerService.count_broker_appends);
# byte counts out are estimates (messages out x the topic's average size), as
# the topic stats' bytesOutCounter. Process metrics are prometheus_client's,
# read in the worker thread. The body is kept and written as pieces of about
# CHUNK bytes, never joined into one object (a 70 MB join holds the GIL).
from __future__ import annotations

import asyncio
import gc
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from letterbox.admin.stats import _backlog_size
from letterbox.broker import CIRCUIT_FAMILY, PersistentTopic, circuit_gauge, suspect_count
from letterbox.errors import LetterboxError
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.stats import StatsTracker
    from letterbox.broker import BrokerService

SLICE = 250  # topics read per event-loop turn
MAX_AGE = 1.0  # seconds an expensive body is served again
EXPENSIVE = 0.1  # seconds of build time from which bodies are cached
BLOCK = 1_000  # samples per cached block of text
PAUSE = 0.001  # the formatting thread sleeps this long after each rebuilt block
CHUNK = 256 * 1024  # bytes per piece of the body (joined, cached and written one at a time)

TOPIC_FAMILIES = (
    ("pulsar_in_messages_total", "counter", "Messages published to the topic"),
    ("pulsar_in_bytes_total", "counter", "Bytes published to the topic"),
    ("pulsar_out_messages_total", "counter", "Messages dispatched to consumers of the topic"),
    ("pulsar_rate_in", "gauge", "Messages per second published (1 minute window)"),
    ("pulsar_rate_out", "gauge", "Messages per second dispatched (1 minute window)"),
    ("pulsar_storage_size", "gauge", "Bytes stored for the topic"),
    ("pulsar_msg_backlog", "gauge", "Messages not yet acknowledged, summed over subscriptions"),
    ("pulsar_producers_count", "gauge", "Connected producers"),
    ("pulsar_subscriptions_count", "gauge", "Subscriptions"),
    ("pulsar_consumers_count", "gauge", "Connected consumers"),
)
# Pulsar's own topic-level names too (same labels as the families above)
PULSAR_TOPIC_FAMILIES = (
    ("pulsar_throughput_in", "gauge", "Bytes per second published (1 minute window)"),
    ("pulsar_throughput_out", "gauge", "Bytes per second dispatched (1 minute window)"),
    ("pulsar_out_bytes_total", "counter", "Bytes dispatched to consumers of the topic"),
    ("pulsar_storage_backlog_size", "gauge", "Bytes not yet acknowledged by the slowest durable subscription"),
    ("pulsar_storage_write_rate", "gauge", "Entries (message batches) written per second (1 minute window)"),
)
PULSAR_SUBSCRIPTION_FAMILIES = (
    ("pulsar_subscription_msg_rate_out", "gauge", "Messages per second dispatched (1 minute window)"),
    ("pulsar_subscription_msg_throughput_out", "gauge", "Bytes per second dispatched (1 minute window)"),
    ("pulsar_subscription_back_log_no_delayed", "gauge", "Backlog without the messages held back for delivery"),
    ("pulsar_subscription_blocked_on_unacked_messages", "gauge",
     "1 while dispatch waits for acknowledgements (maxUnackedMessagesPerSubscription)"),
    ("pulsar_subscription_msg_rate_expired", "gauge", "Messages per second expired by the message TTL (1 minute window)"),
)
SUBSCRIPTION_FAMILIES = (
    ("pulsar_subscription_back_log", "gauge", "Messages not yet acknowledged by the subscription"),
    ("pulsar_subscription_unacked_messages", "gauge", "Messages delivered and not yet acknowledged"),
    ("pulsar_subscription_delayed", "gauge", "Messages held back for delayed delivery or backoff"),
    ("pulsar_subscription_msg_rate_redeliver", "gauge", "Redeliveries per second (1 minute window)"),
    ("pulsar_subscription_consumers_count", "gauge", "Consumers connected to the subscription"),
)
DEAD_LETTER_FAMILY = (
    "letterbox_dead_letter_messages_total", "counter", "Messages moved to a dead letter topic, by reason",
)
BROKER_FAMILIES = (  # the storage's health (storage/health.py) and failed move transactions
    ("pulsar_topics_count", "gauge", "Topics of the namespace"),  # by namespace
    ("pulsar_active_connections", "gauge", "Client connections open now"),  # broker, metric="broker_connection"
    ("letterbox_storage_degraded", "gauge", "1 while storage writes fail (disk full, I/O error, read-only)"),
    ("letterbox_storage_read_only", "gauge", "1 while the data directory refuses writes as read-only"),
    ("letterbox_storage_faults_total", "counter", "Storage commits that failed on a storage fault"),
    ("letterbox_move_storage_failures_total", "counter",
     "Move transactions that failed in storage (nothing moved), by operation"),
    # publish backpressure (broker/connection/flow_control.py)
    ("letterbox_publish_buffer_bytes", "gauge", "Bytes of SENDs awaiting storage and unfinished frames, all connections"),
    ("letterbox_connections_paused", "gauge", "Connections not being read now (publish backpressure)"),
    ("letterbox_connection_read_pauses_total", "counter", "Times a connection stopped being read (publish backpressure)"),
    ("letterbox_publish_buffer_pauses_total", "counter",
     "Of those, pauses while all connections' bytes exceeded maxMessagePublishBufferSizeInMB"),
)
# letterbox's early warning (broker/redelivery/poison_suspects.py, broker/redelivery/dead_letter_rate.py)
POISON_FAMILY = (
    "letterbox_subscription_poison_suspects", "gauge",
    "Unacknowledged messages redelivered more than half the times the dead-letter policy allows",
)
DEAD_LETTER_RATE_FAMILY = (
    "letterbox_dead_letter_rate", "gauge",
    "Messages moved to a dead letter topic per second, over the last 60 s of the broker's clock, by reason",
)
FAMILY_NAMES = tuple(f[0] for f in (*TOPIC_FAMILIES, *SUBSCRIPTION_FAMILIES, DEAD_LETTER_FAMILY))
ALL_TOPIC_FAMILIES = TOPIC_FAMILIES + PULSAR_TOPIC_FAMILIES
ALL_SUBSCRIPTION_FAMILIES = SUBSCRIPTION_FAMILIES + PULSAR_SUBSCRIPTION_FAMILIES
PROCESS_FAMILY_NAMES = ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                        "process_open_fds", "process_max_fds", "process_start_time_seconds")
PULSAR_FAMILY_NAMES = (*(f[0] for f in (*PULSAR_TOPIC_FAMILIES, *PULSAR_SUBSCRIPTION_FAMILIES)),
                       "pulsar_topics_count", "pulsar_active_connections")
_PROCESS = CollectorRegistry(auto_describe=False)
ProcessCollector(registry=_PROCESS)

Number = int | float


@dataclass
class Snapshot:
    """Column lists of plain numbers and strings (a few tracked objects in all,
    so building one at 20,000 topics gives the garbage collector nothing to walk)."""

    cluster: str
    topics: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    topic_values: list[list[Number]] = field(  # one column per ALL_TOPIC_FAMILIES entry
        default_factory=lambda: [[] for _ in ALL_TOPIC_FAMILIES])
    sub_topic: list[int] = field(default_factory=list)  # index into topics
    subs: list[str] = field(default_factory=list)
    sub_values: list[list[Number]] = field(  # one column per ALL_SUBSCRIPTION_FAMILIES entry
        default_factory=lambda: [[] for _ in ALL_SUBSCRIPTION_FAMILIES])
    dead_letters: list[tuple[str, int]] = field(default_factory=list)  # (reason, count), no source labels
    # (namespace, source topic, subscription, reason, count): what the broker reports
    dead_letters_by_source: list[tuple[str, str, str, str, int]] = field(default_factory=list)
    process: bytes = b""  # prometheus_client's process metrics, as text
    sub_poison: list[Number] = field(default_factory=list)  # POISON_FAMILY, one per subscription
    sub_circuit: list[Number] = field(default_factory=list)  # CIRCUIT_FAMILY, one per subscription
    dead_letter_rates: list[tuple[str, float]] = field(default_factory=list)  # (reason, per second)
    # broker-wide samples: (family, labels beyond cluster, value), families in BROKER_FAMILIES
    broker: list[tuple[str, str, Number]] = field(default_factory=list)


def _namespace_of(topic: str) -> str:
    try:
        return TopicName.parse(topic).namespace_name
    except Exception:  # a counter recorded without a topic
        return ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt(value: Number) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


async def _load_stored_topics(service: BrokerService) -> None:
    """Stored topics not used since the broker started are loaded, so they are reported too."""
    missing = [n for n in service.store.ledger_names() if n not in service.topics]
    if not missing:
        return
    for i, name in enumerate(missing):
        if i % SLICE == SLICE - 1:
            await asyncio.sleep(0)
        if name in service.topics:
            continue
        try:
            service.get_topic(TopicName.parse(name), create=False)
        except LetterboxError:
            continue
    if len(missing) >= SLICE:
        # thousands of topics just became long-lived broker state: collect once,
        # then move everything to the permanent generation so later full
        # collections do not walk them (at 20,000 topics one took ~0.3 s on the
        # event loop). Reference counting still frees them when deleted.
        gc.collect()
        gc.freeze()


async def collect(service: BrokerService, tracker: StatsTracker) -> Snapshot:
    """The numbers /metrics reports, read on the event loop a slice at a time."""
    await _load_stored_topics(service)
    snap = Snapshot(service.config.cluster_name)
    tcols, scols = snap.topic_values, snap.sub_values
    for i, tname in enumerate(sorted(service.topics)):
        if i % SLICE == SLICE - 1:
            await asyncio.sleep(0)
        topic = service.topics.get(tname)
        if topic is None:  # unloaded or deleted while we yielded
            continue
        index = len(snap.topics)
        subs = sorted(getattr(topic, "subscriptions", {}).items())
        persistent = isinstance(topic, PersistentTopic)
        msg_out = consumers = 0
        avg = topic.bytes_in / topic.msg_in if topic.msg_in else 0.0
        topic_rate_out = tracker.rate("out", tname)
        for sname, sub in subs:
            snap.sub_poison.append(suspect_count(sub) if persistent else 0)
            snap.sub_circuit.append(circuit_gauge(sub))
            backlog = sub.backlog() if hasattr(sub, "backlog") else 0
            delayed = sub.delayed_count() if hasattr(sub, "delayed_count") else 0
            rate_out = tracker.rate("out", tname, sname)
            msg_out += tracker.sub_msg_out(tname, sname, list(sub.consumers))
            consumers += len(sub.consumers)
            snap.sub_topic.append(index)
            snap.subs.append(sname)
            for col, value in zip(scols, (
                backlog,
                sum(sum(c.pending.values()) for c in sub.consumers),
                delayed,
                tracker.rate("redeliver", tname, sname),
                len(sub.consumers),
                rate_out, rate_out * avg, max(0, backlog - delayed),
                int(getattr(sub, "blocked_on_unacked", False)), tracker.rate("expired", tname, sname),
            ), strict=True):
                col.append(value)
        stored = topic if isinstance(topic, PersistentTopic) else None
        snap.topics.append(tname)
        snap.namespaces.append(topic.name.namespace_name)
        for col, value in zip(tcols, (
            topic.msg_in, topic.bytes_in, msg_out, tracker.rate("in", tname), topic_rate_out,
            stored.ledger.size_bytes() if stored else 0, stored.backlog() if stored else 0,
            len(topic.producers), len(subs), consumers,
            tracker.rate("bin", tname), topic_rate_out * avg, int(msg_out * avg),
            _backlog_size(topic), tracker.rate("entries", tname),
        ), strict=True):
            col.append(value)
    snap.dead_letters_by_source = sorted(
        (_namespace_of(t), t, s, r, n) for (t, s, r), n in service.stats.dead_letters_by_source.items())
    snap.broker += [("pulsar_topics_count", f',namespace="{_escape(ns)}"', n)
                    for ns, n in sorted(Counter(snap.namespaces).items())]
    broker_name = _escape(f"{service.config.advertised_address or service.config.bind}:{service.port or 0}")
    snap.broker.append(("pulsar_active_connections", f',broker="{broker_name}",metric="broker_connection"',
                        len(service.connections)))
    snap.dead_letter_rates = service.stats.dead_letter_rate.rates()
    health = service.store.health
    snap.broker += [("letterbox_storage_degraded", "", int(health.degraded)),
                    ("letterbox_storage_read_only", "", int(health.read_only)),
                    ("letterbox_storage_faults_total", "", health.faults_total)]
    snap.broker += [("letterbox_move_storage_failures_total", f',operation="{_escape(op)}"', n)
                    for op, n in sorted(service.stats.storage_failures_by_operation.items())]
    buf = service.publish_buffer
    snap.broker += [("letterbox_publish_buffer_bytes", "", buf.total),
                    ("letterbox_connections_paused", "", len(buf.paused)),
                    ("letterbox_connection_read_pauses_total", "", buf.pauses_total),
                    ("letterbox_publish_buffer_pauses_total", "", buf.global_pauses_total)]
    return snap


class Formatter:
    """Turns snapshots into exposition text. Samples are rendered in blocks of
    BLOCK topics (or subscriptions) per family, and a block whose labels and
    values equal the previous build's is reused as it was, so on a broker
    where few topics change between scrapes most of the text is not rebuilt.
    One build at a time (MetricsCache runs one); pure otherwise."""

    def __init__(self) -> None:
        self._blocks: dict[tuple[str, int], tuple[list[str], list[Number], bytes]] = {}
        self._labels: dict[tuple[str, str, str], str] = {}

    def _label(self, cluster: str, namespace: str, topic: str) -> str:
        key = (cluster, namespace, topic)
        label = self._labels.get(key)
        if label is None:
            label = self._labels[key] = (
                f'cluster="{_escape(cluster)}",namespace="{_escape(namespace)}",topic="{_escape(topic)}"')
        return label

    def _family(self, name: str, kind: str, help_text: str, labels: list[str],
                column: list[Number], used: set[tuple[str, int]]) -> Iterator[bytes]:
        yield f"# HELP {name} {help_text}\n# TYPE {name} {kind}".encode()
        for start in range(0, len(labels), BLOCK):
            key = (name, start)
            used.add(key)
            lab, values = labels[start:start + BLOCK], column[start:start + BLOCK]
            cached = self._blocks.get(key)
            if cached is not None and cached[0] == lab and cached[1] == values:
                yield cached[2]
                continue
            text = "\n".join(f"{name}{{{la}}} {_fmt(v)}" for la, v in zip(lab, values, strict=True)).encode()
            self._blocks[key] = (lab, values, text)
            yield text
            time.sleep(PAUSE)  # hand the GIL to the event loop between rebuilt blocks

    def chunks(self, snap: Snapshot) -> list[bytes]:
        """The exposition text of a snapshot in pieces (runs in a worker thread)."""
        labels = [self._label(snap.cluster, ns, t) for t, ns in zip(snap.topics, snap.namespaces, strict=True)]
        if len(self._labels) > 2 * len(labels) + 1000:  # topics were deleted: forget their labels
            self._labels = {(snap.cluster, ns, t): la for t, ns, la in zip(
                snap.topics, snap.namespaces, labels, strict=True)}
        sub_labels = [f'{labels[t]},subscription="{_escape(s)}"' for t, s in zip(snap.sub_topic, snap.subs,
                                                                                  strict=True)]
        used: set[tuple[str, int]] = set()
        parts: list[bytes] = []
        for (name, kind, help_text), column in zip(ALL_TOPIC_FAMILIES, snap.topic_values, strict=True):
            parts.extend(self._family(name, kind, help_text, labels, column, used))
        for (name, kind, help_text), column in zip(ALL_SUBSCRIPTION_FAMILIES, snap.sub_values, strict=True):
            parts.extend(self._family(name, kind, help_text, sub_labels, column, used))
        for family, column in ((POISON_FAMILY, snap.sub_poison), (CIRCUIT_FAMILY, snap.sub_circuit)):
            values: list[Number] = column if len(column) == len(sub_labels) else [0] * len(sub_labels)
            parts.extend(self._family(*family, sub_labels, values, used))
        cluster = _escape(snap.cluster)
        for (name, kind, help_text), samples in ((DEAD_LETTER_FAMILY, snap.dead_letters),
                                                 (DEAD_LETTER_RATE_FAMILY, snap.dead_letter_rates)):
            parts.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}".encode())
            parts.extend(f'{name}{{cluster="{cluster}",reason="{_escape(r)}"}} {_fmt(n)}'.encode()
                         for r, n in samples)
            if name == DEAD_LETTER_FAMILY[0]:
                parts.extend(f'{name}{{cluster="{cluster}",namespace="{_escape(ns)}",topic="{_escape(t)}",'
                             f'subscription="{_escape(s)}",reason="{_escape(r)}"}} {_fmt(n)}'.encode()
                             for ns, t, s, r, n in snap.dead_letters_by_source)
        for name, kind, help_text in BROKER_FAMILIES:
            parts.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}".encode())
            parts.extend(f'{name}{{cluster="{cluster}"{labels}}} {_fmt(v)}'.encode()
                         for family, labels, v in snap.broker if family == name)
        parts.append(snap.process)
        for key in [k for k in self._blocks if k not in used]:
            del self._blocks[key]
        return _chunks([p for p in parts if p])

    def format(self, snap: Snapshot) -> bytes:
        """The exposition text of a snapshot as one bytes object."""
        return b"".join(self.chunks(snap))


def _chunks(parts: list[bytes]) -> list[bytes]:
    """The parts, each followed by a newline, joined into pieces of about CHUNK
    bytes: no single join copies the whole body while holding the GIL."""
    out: list[bytes] = []
    group: list[bytes] = []
    size = 0
    for part in parts:
        group.append(part)
        size += len(part) + 1
        if size >= CHUNK:
            out.append(b"\n".join(group) + b"\n")
            group, size = [], 0
    if group or not out:
        out.append(b"\n".join(group) + b"\n")
    return out


def format_metrics(snap: Snapshot) -> bytes:
    """The exposition text of one snapshot, with no blocks kept."""
    return Formatter().format(snap)


async def render_metrics(service: BrokerService, tracker: StatsTracker,
                         formatter: Formatter | None = None) -> list[bytes]:
    """A fresh body in pieces: snapshot on the loop (sliced), text in a worker thread."""
    snap = await collect(service, tracker)
    return await asyncio.to_thread(_format_with_process, formatter or Formatter(), snap)


def _format_with_process(formatter: Formatter, snap: Snapshot) -> list[bytes]:
    """In the worker thread: prometheus_client's process metrics (it reads /proc), then the text."""
    snap.process = generate_latest(_PROCESS).rstrip(b"\n")
    return formatter.chunks(snap)


class MetricsCache:
    """One build at a time; an expensive body is served for max_age seconds.
    The body is kept as the Formatter's pieces, never joined into one object."""

    def __init__(self, service: BrokerService, tracker: StatsTracker, max_age: float = MAX_AGE) -> None:
        self.service = service
        self.tracker = tracker
        self.max_age = max_age
        self._body: list[bytes] = []
        self._built_at = float("-inf")
        self._cost = 0.0  # seconds the last build took
        self._building: asyncio.Future[list[bytes]] | None = None
        self._formatter = Formatter()

    async def body(self) -> list[bytes]:
        """The body's pieces (concatenated, the exposition text)."""
        if self._cost >= EXPENSIVE and time.monotonic() - self._built_at < self.max_age:
            return self._body
        if self._building is None:
            self._building = asyncio.ensure_future(self._build())
        return await asyncio.shield(self._building)

    async def _build(self) -> list[bytes]:
        started = time.monotonic()
        try:
            body = await render_metrics(self.service, self.tracker, self._formatter)
            self._built_at = time.monotonic()
            self._body, self._cost = body, self._built_at - started
            return body
        finally:
            self._building = None
