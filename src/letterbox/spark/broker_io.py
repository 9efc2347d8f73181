# Everything the Spark source and sink say to the broker, through the
# official `pulsar` client (never a re-implementation of the protocol): topic
# partitions, the last position of a partition (a Reader: nothing durable), reading a position range with
# a Reader, and the durable subscription whose cursor follows Spark's commits.
#
# Invariant of `read_range`: it yields exactly the messages of the entries in
# [start, end), in log order; if entries in that range are gone (deleted by
# retention) it raises DataLossError, or, with fail_on_data_loss=False, skips
# them. A Reader told that messages exist which then never arrive (deleted
# entries) gives up after read_timeout_ms.
from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pulsar

from letterbox.auth_options import AuthOptions
from letterbox.spark.offsets import EARLIEST, Position
from letterbox.spark.options import SparkOptionError
from letterbox.topic_name import TopicName

log = logging.getLogger("letterbox.spark")


class DataLossError(RuntimeError):
    """Messages Spark asked for are no longer stored (deleted by retention)."""


def probe_broker(service_url: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, with the URL in the message, when no host of `service_url` accepts
    a TCP connection (the official client would retry for its whole operation timeout)."""
    m = re.match(r"^(pulsar|pulsar\+ssl|http|https)://([^/]+)", service_url.strip())
    if not m:
        raise SparkOptionError(f"option service_url must look like pulsar://host:6650, got {service_url!r}")
    scheme, hosts = m.groups()
    default_port = {"pulsar": 6650, "pulsar+ssl": 6651, "http": 80, "https": 443}[scheme]
    errors = []
    for hostport in hosts.split(","):
        host, _, port = hostport.rpartition(":") if ":" in hostport.strip("[]") else (hostport, "", "")
        try:
            with socket.create_connection((host.strip("[]") or hostport, int(port or default_port)), timeout=timeout_s):
                return
        except (OSError, ValueError) as exc:
            errors.append(f"{hostport}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")
    raise BrokerUnreachableError(f"cannot reach the broker at {service_url} ({'; '.join(errors)}); is it running?")


class BrokerUnreachableError(SparkOptionError):
    """No host of the service URL answers."""


def topic_exists(admin_url: str, topic: str, auth: AuthOptions | None = None) -> bool:
    """Whether `topic` (full name; a partitioned parent or a plain topic) is in its namespace's list."""
    parent = TopicName.parse(topic).partitioned_parent
    domain, rest = str(parent).split("://", 1)
    tenant, ns, _ = rest.split("/", 2)
    return str(parent) in _namespace_parents(admin_url, domain, tenant, ns, auth or AuthOptions())


def open_client(service_url: str, operation_timeout_s: int = 30, auth: AuthOptions | None = None) -> pulsar.Client:
    quiet = logging.getLogger("letterbox.spark.pulsar-client")
    quiet.setLevel(logging.ERROR)
    return pulsar.Client(service_url, operation_timeout_seconds=operation_timeout_s, logger=quiet,
                         **(auth or AuthOptions()).client_kwargs())


def partition_topics(client: pulsar.Client, topic: str) -> list[str]:
    """The partition topics of `topic`, or [topic] when it is not partitioned."""
    parts: list[str] = client.get_topic_partitions(topic)
    return parts or [topic]


def pattern_topics(admin_url: str, pattern: str, auth: AuthOptions | None = None) -> list[str]:
    """Topics (partitioned parents, not their partitions) whose full name matches `pattern`."""
    m = re.match(r"^(persistent|non-persistent)://([^/]+)/([^/]+)/", pattern)
    if not m:
        raise SparkOptionError(
            "option topics_pattern must start with the namespace, e.g. persistent://public/default/orders-.*"
        )
    domain, tenant, ns = m.groups()
    rx = re.compile(pattern)
    return sorted(t for t in _namespace_parents(admin_url, domain, tenant, ns, auth or AuthOptions()) if rx.fullmatch(t))


def _namespace_parents(admin_url: str, domain: str, tenant: str, ns: str, auth: AuthOptions) -> set[str]:
    """The namespace's topics and partitioned topics (whose partitions may not be listed yet)."""
    names: list[str] = []
    for suffix in ("", "/partitioned"):
        url = f"{admin_url.rstrip('/')}/admin/v2/{domain}/{tenant}/{ns}{suffix}"
        request = urllib.request.Request(url, headers=auth.http_headers())
        try:
            with urllib.request.urlopen(request, timeout=30, context=auth.ssl_context()) as resp:
                names += [str(n) for n in json.load(resp)]
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise SparkOptionError(f"cannot list the topics of {tenant}/{ns} at {url}: {exc}") from None
    return {str(TopicName.parse(n).partitioned_parent) for n in names}


def position_of(msg: Any) -> Position:
    mid = msg.message_id()
    return Position(mid.ledger_id(), mid.entry_id())


def end_after_last(last: Any) -> Position:
    """The offset just past the last entry a GetLastMessageId answer names (EARLIEST if empty)."""
    ledger, entry = last.ledger_id(), last.entry_id()
    if ledger < 0 or entry < 0:
        return EARLIEST if ledger < 0 else Position(ledger, 0)
    return Position(ledger, entry + 1)


def _message_id(topic: str, pos: Position) -> Any:
    return pulsar.MessageId(TopicName.parse(topic).partition_index, pos.ledger, pos.entry, -1)


def read_range(
    client: pulsar.Client,
    topic: str,
    start: Position,
    end: Position,
    timeout_ms: int,
    fail_on_data_loss: bool,
) -> Iterator[Any]:
    """(message, message id) of the entries in [start, end) of one partition topic."""
    if end.is_earliest or end <= start:
        return
    start_id = pulsar.MessageId.earliest if start.is_earliest else _message_id(topic, start)
    reader = client.create_reader(topic, start_id, start_message_id_inclusive=True, receiver_queue_size=5000)
    # the native reader hands out native messages: same methods, no wrapper object per message
    native = getattr(reader, "_reader", reader)
    end_t = (end.ledger, end.entry)
    last: tuple[int, int] | None = None
    try:
        while True:
            try:
                msg = native.read_next(0)  # what the client has already received
            except pulsar.Timeout:
                if not native.has_message_available():
                    break
                try:
                    msg = native.read_next(timeout_ms)
                except pulsar.Timeout:
                    break  # announced but not delivered: the entries were deleted (checked below)
            mid = msg.message_id()
            pos = (mid.ledger_id(), mid.entry_id())
            if pos >= end_t:
                return
            if last is None:
                if not start.is_earliest and pos > tuple(start):
                    _lost(topic, start, Position(*pos), fail_on_data_loss)
            elif pos[0] == last[0] and pos[1] > last[1] + 1:
                _lost(topic, Position(last[0], last[1] + 1), Position(*pos), fail_on_data_loss)
            last = pos
            yield msg, mid
        if last is None and start.is_earliest:
            return  # "earliest" is whatever is still stored
        have = start if last is None else Position(last[0], last[1] + 1)
        if have < end:
            _lost(topic, have, end, fail_on_data_loss)
    finally:
        reader.close()


def _lost(topic: str, frm: Position, to: Position, fail: bool) -> None:
    text = f"{topic}: entries {frm} to {to} (exclusive) are no longer stored"
    if fail:
        raise DataLossError(text + "; set fail_on_data_loss=false to skip them")
    log.warning("%s; skipping them (fail_on_data_loss=false)", text)


class SubscriptionCursor:
    """The durable subscription of a streaming query on one partition topic.

    It never receives messages (receiver queue 0); it answers "where does the
    partition end" and moves the subscription's mark-delete position to what
    Spark committed, by a cumulative acknowledgement.
    """

    def __init__(self, client: pulsar.Client, topic: str, subscription: str) -> None:
        self.topic = topic
        deadline = time.monotonic() + 30
        while True:
            try:
                self.consumer = client.subscribe(
                    topic,
                    subscription,
                    consumer_type=pulsar.ConsumerType.Failover,
                    receiver_queue_size=0,
                    initial_position=pulsar.InitialPosition.Earliest,
                )
                return
            except pulsar.ConsumerBusy:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def end(self) -> Position:
        return end_after_last(self.consumer.get_last_message_id())

    def commit(self, pos: Position) -> None:
        if pos.is_earliest or pos.entry <= 0:
            return
        self.consumer.acknowledge_cumulative(_message_id(self.topic, Position(pos.ledger, pos.entry - 1)))

    def close(self) -> None:
        with contextlib.suppress(pulsar.PulsarException):
            self.consumer.close()


def last_position(client: pulsar.Client, topic: str, timeout_ms: int = 5000) -> Position:
    """Offset just past the last entry of a partition topic, read by a Reader placed on the last
    message (a non-durable subscription: the broker drops it with the reader or its connection, so
    a driver killed mid-check leaves nothing behind that would pin retention). EARLIEST when the
    topic holds no message (none published, or the last ones deleted by retention)."""
    reader = client.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True,
                                  receiver_queue_size=1)
    try:
        if not reader.has_message_available():
            return EARLIEST
        try:
            msg = reader.read_next(timeout_ms)
        except pulsar.Timeout:
            return EARLIEST  # announced but not delivered: the last entries were deleted
        return Position(msg.message_id().ledger_id(), msg.message_id().entry_id() + 1)
    finally:
        with contextlib.suppress(pulsar.PulsarException):
            reader.close()
