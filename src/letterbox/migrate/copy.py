# Copying one topic's retained messages, in order, from the source broker to the target with the
# official client: every component kept (payload, key, ordering key, properties, event time), the
# source's message id and publish time added as MIGRATED_MESSAGE_ID / MIGRATED_PUBLISH_TIME.
# Idempotent and resumable: one producer per topic with a fixed name sends each message with a
# sequence id made of its source position (entry id and batch index: `sequence_of`), increasing
# in the source's order, on a target namespace with deduplication on, so a message sent twice is
# stored once, and a rerun starts after the producer's last persisted sequence id, whatever the
# source trimmed from the head of the topic in between.
# Invariant: messages reach the target in the source's order (one unbatched producer per topic or
# partition, each send waited for before the next run of sends is counted done).
# A target that goes away stops the copy within `send_timeout_ms` with CopyInterrupted (the
# client reconnects meanwhile, and resends what it holds, should the target come back in time).
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

MIGRATED_MESSAGE_ID = "MIGRATED_MESSAGE_ID"
MIGRATED_PUBLISH_TIME = "MIGRATED_PUBLISH_TIME"
OWN_PROPERTIES = frozenset({MIGRATED_MESSAGE_ID, MIGRATED_PUBLISH_TIME})
READ_TIMEOUT_MS = 10_000
SEND_TIMEOUT_MS = 30_000


class CopyInterrupted(RuntimeError):
    """A copy stopped part-way (a refused send, or a broker that stopped answering); what was
    stored stays, and a rerun resumes after it."""


@dataclass(frozen=True)
class Copied:
    topic: str
    messages: int  # on the target after the copy (the source's count)
    sent: int  # sent by this run (0 on a rerun of a finished copy)


def source_id(message: Any) -> str:
    """A source message's id as "ledger:entry:batch_index" (what MIGRATED_MESSAGE_ID holds)."""
    mid = message.message_id()
    return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.batch_index()}"


BATCH_INDEX_BITS = 20  # a batch holds fewer than 2**20 messages (Pulsar's clients: 1,000 by default)


def sequence_of(message: Any) -> int:
    """The target sequence id of a source message: increasing with its position in the topic."""
    mid = message.message_id()
    return int(mid.entry_id() << BATCH_INDEX_BITS) | max(int(mid.batch_index()), 0)


def producer_name(topic: str) -> str:
    return "letterbox-migrate-" + hashlib.sha256(topic.encode()).hexdigest()[:16]


def read_all(client: Any, topic: str) -> Iterator[Any]:
    """Every retained message of `topic`, oldest first, through a non-durable reader."""
    import pulsar

    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        while reader.has_message_available():
            yield reader.read_next(READ_TIMEOUT_MS)
    finally:
        reader.close()


def copy_topic(source: Any, target: Any, topic: str, progress: Callable[[int], None] | None = None,
               send_timeout_ms: int = SEND_TIMEOUT_MS) -> Copied:
    """Copy `topic`'s retained messages from the `source` client to the `target` client."""
    return copy_messages(source, target, topic, lambda _msg: topic, lambda _dst: producer_name(topic),
                         progress=progress, send_timeout_ms=send_timeout_ms)


def migrated_properties(msg: Any) -> dict[str, str]:
    """A copied message's properties: its own, and its source id and publish time (kept from a
    first copy when it was copied before)."""
    props = dict(msg.properties())
    props.setdefault(MIGRATED_MESSAGE_ID, source_id(msg))
    props.setdefault(MIGRATED_PUBLISH_TIME, str(msg.publish_timestamp()))
    return props


def copy_messages(
    source: Any, target: Any, topic: str, destination: Callable[[Any], str], name_of: Callable[[str], str],
    keep: Callable[[Any], bool] = lambda _msg: True, properties: Callable[[Any], dict[str, str]] = migrated_properties,
    progress: Callable[[int], None] | None = None, send_timeout_ms: int = SEND_TIMEOUT_MS,
) -> Copied:
    """Copy the retained messages of `topic` that `keep` admits, in order, each to the target topic
    `destination(msg)`, by one producer per destination named `name_of(destination)`. Each message's
    sequence id is its source position, so a destination's producer skips what it stored before.
    A send not stored within `send_timeout_ms` ends the copy (CopyInterrupted)."""
    producers: dict[str, tuple[Any, int]] = {}
    failures = _Failures(topic, send_timeout_ms)
    n = sent = 0
    try:
        for msg in read_all(source, topic):
            if not keep(msg):
                continue
            n += 1
            dst = destination(msg)
            if dst not in producers:
                producer = target.create_producer(dst, producer_name=name_of(dst), batching_enabled=False,
                                                  block_if_queue_full=True,
                                                  send_timeout_millis=send_timeout_ms)
                producers[dst] = (producer, producer.last_sequence_id())  # -1 first; the last stored on a rerun
            producer, last = producers[dst]
            seq = sequence_of(msg)
            if seq <= last:
                continue
            producer.send_async(msg.data(), failures.note, properties=properties(msg),
                                partition_key=msg.partition_key() or None, ordering_key=msg.ordering_key() or None,
                                sequence_id=seq, event_timestamp=msg.event_timestamp() or None)
            sent += 1
            if sent % 1000 == 0:
                _flush(producers, failures, progress, sent)
        _flush(producers, failures, progress, sent)
        return Copied(topic, n, sent)
    finally:
        for producer, _ in producers.values():
            producer.close()


def _flush(producers: dict[str, tuple[Any, int]], failures: _Failures, progress: Callable[[int], None] | None,
           sent: int) -> None:
    import pulsar

    for producer, _ in producers.values():
        try:
            producer.flush()
        except pulsar.PulsarException as exc:  # a send failed: its callback says why
            failures.note(exc, None)
    failures.check()
    if progress is not None:
        progress(sent)


def _bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value or b"")


class _Failures:
    """The send callbacks' verdicts: the first failure ends the copy (a rerun resumes it)."""

    def __init__(self, topic: str, send_timeout_ms: int) -> None:
        self.topic = topic
        self.send_timeout_ms = send_timeout_ms
        self.first: str | None = None

    def note(self, result: Any, _message_id: Any) -> None:
        import pulsar

        if result == pulsar.Result.Ok or self.first is not None:
            return
        timed_out = result == pulsar.Result.Timeout or isinstance(result, pulsar.Timeout)
        self.first = f"no answer within {self.send_timeout_ms / 1000:g} s" if timed_out else str(result)

    def check(self) -> None:
        if self.first is not None:
            raise CopyInterrupted(f"the target did not store a message copied from {self.topic} ({self.first})")


@dataclass(frozen=True)
class Survey:
    """One read of a topic: its message count, a sha256 over each message's payload, key,
    ordering key, event time and user properties in order (the same on both sides when a copy is
    complete), and each message's (ledger, entry, batch index, source id) for checking cursors
    against."""

    count: int
    digest: str
    ids: tuple[tuple[int, int, int, str], ...]


def survey(client: Any, topic: str) -> Survey:
    h = hashlib.sha256()
    ids = []
    for msg in read_all(client, topic):
        props = sorted((k, v) for k, v in msg.properties().items() if k not in OWN_PROPERTIES)
        for part in (msg.data(), _bytes(msg.partition_key()), _bytes(msg.ordering_key()),
                     str(msg.event_timestamp()).encode(), repr(props).encode()):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        mid = msg.message_id()
        ids.append((mid.ledger_id(), mid.entry_id(), mid.batch_index(),
                    msg.properties().get(MIGRATED_MESSAGE_ID) or source_id(msg)))
    return Survey(len(ids), h.hexdigest(), tuple(ids))
