# `letterbox import`: a topic or dead letter topic of an Apache Pulsar cluster copied into a local
# letterbox (to open in the console, replay under the manual clock), and, after a fix, its
# messages sent back to their source topics on Pulsar.
# - import_topic: Pulsar -> letterbox, the messages a Selection admits (dead-letter reason, key,
#   time window: the dead-letter time where the message has one, else its publish time), each
#   with its Pulsar id and publish time as MIGRATED_MESSAGE_ID / MIGRATED_PUBLISH_TIME.
# - redrive_back: letterbox -> Pulsar, each imported message to its REAL_TOPIC (or one topic
#   given), without its attempt and dead-letter stamps, as a redrive sends it; `destinations`
#   lists those REAL_TOPICs beforehand, so their namespaces are checked before anything is sent.
# Both are copies (copy.copy_messages): one producer per destination with a name fixed by the
# copy (the selection included), sequence ids from source positions; with deduplication on the
# receiving namespace a rerun after any interruption sends each message once.
# Invariant: nothing is written on the side read from.
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from letterbox.failure.stamps import redriven_properties
from letterbox.message_properties import DEAD_LETTER_REASON, DEAD_LETTER_TIME, REAL_TOPIC
from letterbox.migrate.copy import (
    MIGRATED_MESSAGE_ID,
    MIGRATED_PUBLISH_TIME,
    Copied,
    copy_messages,
    migrated_properties,
    read_all,
)


@dataclass(frozen=True)
class Selection:
    """Which messages of a topic an import takes (None: any)."""

    reason: str | None = None
    key: str | None = None
    since_ms: int | None = None  # at or after
    until_ms: int | None = None  # before

    def admits(self, msg: Any) -> bool:
        props = msg.properties()
        if self.reason is not None and props.get(DEAD_LETTER_REASON) != self.reason:
            return False
        if self.key is not None and msg.partition_key() != self.key:
            return False
        if self.since_ms is None and self.until_ms is None:
            return True
        when = _int(props.get(DEAD_LETTER_TIME)) or int(msg.publish_timestamp())
        return (self.since_ms is None or when >= self.since_ms) and (self.until_ms is None or when < self.until_ms)

    def signature(self) -> str:
        return repr((self.reason, self.key, self.since_ms, self.until_ms))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _name(kind: str, *parts: str) -> str:
    return f"letterbox-{kind}-" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def import_topic(pulsar: Any, local: Any, topic: str, local_topic: str, selection: Selection,
                 progress: Callable[[int], None] | None = None) -> Copied:
    """Copy what `selection` admits of Pulsar's `topic` into letterbox's `local_topic`."""
    return copy_messages(pulsar, local, topic, lambda _msg: local_topic,
                         lambda dst: _name("import", topic, dst, selection.signature()),
                         keep=selection.admits, properties=migrated_properties, progress=progress)


def back_properties(msg: Any) -> dict[str, str]:
    """What a message imported from Pulsar carries back: the user's properties and its origin."""
    props = redriven_properties(msg.properties())
    for own in (MIGRATED_MESSAGE_ID, MIGRATED_PUBLISH_TIME):
        props.pop(own, None)
    return props


def _real_topic(msg: Any, local_topic: str) -> str:
    target = msg.properties().get(REAL_TOPIC)
    if not target:
        raise ValueError(f"message {msg.message_id()} of {local_topic} names no source topic "
                         f"({REAL_TOPIC}); give one with --to")
    return str(target)


def destinations(local: Any, local_topic: str) -> set[str]:
    """The REAL_TOPICs the messages of letterbox's `local_topic` go back to (one read, nothing
    sent): for checking each one's namespace on Pulsar before the first message is. A message
    without one raises ValueError naming it."""
    return {_real_topic(msg, local_topic) for msg in read_all(local, local_topic)}


def redrive_back(local: Any, pulsar: Any, local_topic: str, to: str | None = None,
                 progress: Callable[[int], None] | None = None) -> Copied:
    """Send letterbox's `local_topic` (imported dead letters) to their source topics on Pulsar: each
    message's REAL_TOPIC, or `to`. A message with neither stops the copy there, naming it (what
    came before it is sent; a rerun with `to` sends the rest)."""
    def destination(msg: Any) -> str:
        return to or _real_topic(msg, local_topic)

    return copy_messages(local, pulsar, local_topic, destination, lambda dst: _name("redrive-back", local_topic, dst),
                         properties=back_properties, progress=progress)
