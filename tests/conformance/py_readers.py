"""Python scenarios: readers (earliest, latest, from an id, inclusive or not, has_message_available
at the end) and seek on consumers and readers, by message id and by publish time."""
from __future__ import annotations

import time
from typing import Any

import pulsar

from tests.conformance.registry import scenario
from tests.conformance.targets import Target, client, receive_all

Earliest = pulsar.InitialPosition.Earliest


def _publish(c: pulsar.Client, topic: str, n: int, start: int = 0) -> list[Any]:
    prod = c.create_producer(topic, batching_enabled=False)
    ids = [prod.send(f"m{i}".encode()) for i in range(start, start + n)]
    prod.close()
    return ids


def _read_all(reader: Any, most: int = 50) -> list[str]:
    """read_next while has_message_available says so."""
    out: list[str] = []
    while len(out) < most and reader.has_message_available():
        try:
            out.append(reader.read_next(3000).data().decode())
        except pulsar.Timeout:
            out.append("<timeout>")
            break
    return out


@scenario
def reader_earliest_reads_all(t: Target, p: str) -> Any:
    topic = f"{p}-readearliest"
    with client(t) as c:
        _publish(c, topic, 4)
        r = c.create_reader(topic, pulsar.MessageId.earliest)
        read = _read_all(r)
        end = r.has_message_available()
        r.close()
        return {"read": read, "available_at_end": end}


@scenario
def reader_latest_sees_only_new(t: Target, p: str) -> Any:
    topic = f"{p}-readlatest"
    with client(t) as c:
        _publish(c, topic, 3)
        r = c.create_reader(topic, pulsar.MessageId.latest)
        before = r.has_message_available()
        _publish(c, topic, 2, start=3)
        read = _read_all(r)
        r.close()
        return {"available_before": before, "read": read}


@scenario
def reader_latest_inclusive(t: Target, p: str) -> Any:
    """MessageId.latest with start_message_id_inclusive: the last message is read."""
    topic = f"{p}-readlatestincl"
    with client(t) as c:
        _publish(c, topic, 3)
        r = c.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
        available = r.has_message_available()
        read = _read_all(r)
        r.close()
        return {"available": available, "read": read}


@scenario
def reader_from_id_exclusive_and_inclusive(t: Target, p: str) -> Any:
    topic = f"{p}-readfromid"
    with client(t) as c:
        ids = _publish(c, topic, 5)
        out = {}
        for inclusive in (False, True):
            r = c.create_reader(topic, ids[2], start_message_id_inclusive=inclusive)
            out["inclusive" if inclusive else "exclusive"] = _read_all(r)
            r.close()
        return out


@scenario
def reader_from_deserialized_id(t: Target, p: str) -> Any:
    """A message id serialized and deserialized (pulsar.MessageId.deserialize) starts a reader."""
    topic = f"{p}-readserial"
    with client(t) as c:
        ids = _publish(c, topic, 4)
        r = c.create_reader(topic, pulsar.MessageId.deserialize(ids[1].serialize()))
        read = _read_all(r)
        r.close()
        return read


@scenario
def reader_seek_by_id_and_time(t: Target, p: str) -> Any:
    topic = f"{p}-readseek"
    with client(t) as c:
        ids = _publish(c, topic, 3)
        time.sleep(0.3)
        cut = int(time.time() * 1000)
        time.sleep(0.3)
        _publish(c, topic, 3, start=3)
        r = c.create_reader(topic, pulsar.MessageId.earliest)
        everything = _read_all(r)
        r.seek(ids[0])
        after_id = _read_all(r)
        r.seek(cut)
        after_time = _read_all(r)
        r.seek(pulsar.MessageId.earliest)
        after_earliest = _read_all(r)
        r.close()
        return {"all": everything, "after_seek_id": after_id, "after_seek_time": after_time,
                "after_seek_earliest": after_earliest}


@scenario
def consumer_seek_to_id_unacked(t: Target, p: str) -> Any:
    """A consumer that acked nothing seeks back to an id: delivery resumes after it."""
    topic = f"{p}-consseekid"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        ids = _publish(c, topic, 5)
        first = [m.data().decode() for m in receive_all(cons, 1500)]
        cons.seek(ids[1])
        again = [m.data().decode() for m in receive_all(cons, 3000)]
        cons.close()
        return {"first": first, "after_seek": again}


@scenario
def consumer_seek_latest_then_new(t: Target, p: str) -> Any:
    """seek(MessageId.latest) skips the backlog: only what is published afterwards arrives."""
    topic = f"{p}-consseeklatest"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        _publish(c, topic, 3)
        cons.seek(pulsar.MessageId.latest)
        time.sleep(0.5)
        _publish(c, topic, 2, start=3)
        got = [m.data().decode() for m in receive_all(cons, 3000)]
        cons.close()
        return got


@scenario
def consumer_seek_by_future_time(t: Target, p: str) -> Any:
    """A seek to a publish time after every message: nothing until a new message."""
    topic = f"{p}-consseekfuture"
    with client(t) as c:
        cons = c.subscribe(topic, "s", initial_position=Earliest)
        _publish(c, topic, 3)
        cons.seek(int(time.time() * 1000) + 60_000)
        time.sleep(0.5)
        before = [m.data().decode() for m in receive_all(cons, 1500)]
        _publish(c, topic, 1, start=3)
        after = [m.data().decode() for m in receive_all(cons, 3000)]
        cons.close()
        return {"before_new": before, "after_new": after}


@scenario
def consumer_start_message_id_inclusive(t: Target, p: str) -> Any:
    """A new subscription, then seek to an id with start_message_id_inclusive: the id itself is
    delivered first."""
    topic = f"{p}-consincl"
    with client(t) as c:
        ids = _publish(c, topic, 4)
        cons = c.subscribe(topic, "s", initial_position=Earliest, start_message_id_inclusive=True)
        cons.seek(ids[2])
        got = [m.data().decode() for m in receive_all(cons, 3000)]
        cons.close()
        return got
