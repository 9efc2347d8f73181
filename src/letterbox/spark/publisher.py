# Idempotent publishing from a Spark task. One IdempotentPublisher holds, per
# destination partition topic, a producer whose name is stable across retries
# of the task, and sends every message with an explicit sequence id that the
# caller derives from the input (row index, source position). With the
# broker's deduplication on, a re-sent (name, sequence id) is answered with a
# duplicate receipt instead of being stored again.
#
# Invariants: sequence ids given for one destination never decrease within a
# publisher (callers derive them in input order); producers are unbatched, so
# each message is its own entry and deduplication never depends on where the
# client cut a batch; `flush()` returns only when every message is receipted
# (stored or recognised as a duplicate) and raises if any send failed.
# The client is the caller's (one per Spark task, shared by its publishers
# and readers): `close()` closes the producers and leaves the client open.
from __future__ import annotations

import contextlib
import threading
import zlib
from typing import Any

import pulsar

from letterbox.spark.broker_io import partition_topics


class PublishError(RuntimeError):
    """A message could not be published; the Spark task fails and is retried."""


class IdempotentPublisher:
    def __init__(self, client: pulsar.Client, producer_name: str, send_timeout_ms: int = 30_000) -> None:
        self.client = client
        self.producer_name = producer_name
        self.send_timeout_ms = send_timeout_ms
        self._partitions: dict[str, list[str]] = {}
        self._producers: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._errors: list[str] = []
        self.sent = 0
        self.stored = 0
        self.duplicates = 0

    def _producer(self, topic: str) -> Any:
        p = self._producers.get(topic)
        if p is None:
            p = self.client.create_producer(
                topic,
                producer_name=self.producer_name,
                batching_enabled=False,
                block_if_queue_full=True,
                max_pending_messages=5000,
                send_timeout_millis=self.send_timeout_ms,
            )
            self._producers[topic] = p
        return p

    def route(self, topic: str, key: str | None, index: int) -> str:
        """The partition topic a message goes to: by key hash, else by input index."""
        parts = self._partitions.get(topic)
        if parts is None:
            parts = self._partitions[topic] = partition_topics(self.client, topic)
        if len(parts) == 1:
            return parts[0]
        h = zlib.crc32(key.encode()) if key else index
        return parts[h % len(parts)]

    def send(
        self,
        topic: str,
        value: bytes,
        sequence_id: int,
        key: str | None = None,
        properties: dict[str, str] | None = None,
        event_time_ms: int | None = None,
        index: int = 0,
    ) -> None:
        producer = self._producer(self.route(topic, key, index))
        kwargs: dict[str, Any] = {"sequence_id": sequence_id}
        if key:
            kwargs["partition_key"] = key
        if properties:
            kwargs["properties"] = properties
        if event_time_ms:
            kwargs["event_timestamp"] = event_time_ms
        self.sent += 1
        producer.send_async(value, self._done, **kwargs)

    def _done(self, res: Any, msg_id: Any) -> None:
        with self._lock:
            if res != pulsar.Result.Ok:
                self._errors.append(str(res))
            elif msg_id is not None and msg_id.ledger_id() < 0:
                self.duplicates += 1
            else:
                self.stored += 1

    def flush(self) -> None:
        for p in self._producers.values():
            p.flush()
        with self._lock:
            if self._errors:
                raise PublishError(f"{len(self._errors)} messages failed to publish: {self._errors[0]}")

    def close(self) -> None:
        for p in self._producers.values():
            with contextlib.suppress(pulsar.PulsarException):
                p.close()
