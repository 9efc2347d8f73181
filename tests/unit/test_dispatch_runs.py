"""A dispatch round sends plain runs (dispatch_runs.py) with one call per run: the same
frames, in the same order, with the same bookkeeping as the per-entry path -- checked by
dispatching the same topic to two subscriptions, one with plain runs turned off, under
permits that run out inside a batch, an unacked limit reached mid-round, acknowledged
holes, redelivery counts, a partly acknowledged batch, delayed messages (honoured on
Shared, not on Exclusive), a pending backoff, delivery times, and rows read back from
disk. In process: a real broker service and store, consumers on a fake connection."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from letterbox import failure
from letterbox.broker.service import BrokerService
from letterbox.broker.topics import dispatch_runs, dispatcher
from letterbox.broker.topics.consumer import Consumer
from letterbox.config import BrokerConfig
from letterbox.protocol import build_headers_and_payload, pb
from letterbox.topic_name import TopicName

FAR = 1 << 50  # a delivery time far in the future


class FakeCnx:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.writable = True
        self.data = bytearray()
        self.writes = 0

    def send(self, data: bytes, *, consumer_id: int | None = None, producer_id: int | None = None,
             count: int = 1) -> None:
        self.data += data
        self.writes += 1


def data(i: int, deliver_at: int | None) -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1000 + i)
    if deliver_at is not None:
        meta.deliver_at_time = deliver_at
    return build_headers_and_payload(meta, b"m%05d" % i)


def observe(sub: Any, c: Consumer, cnx: FakeCnx) -> dict[str, Any]:
    cursor = sub.cursor
    return {"bytes": bytes(cnx.data), "pending": dict(c.pending), "total": c.pending.total,
            "permits": (c.permits, c.permits_owed), "msg_out": c.msg_out, "blocked": c.blocked_on_unacked,
            "read_position": sub.dispatcher.read_position, "replay": list(sub.dispatcher._replay),
            "delayed": sub.tracker.delayed_count(), "timed": sorted(cursor.deliveries.times),
            "due": dict(cursor.deliveries.due)}


async def scenario(tmp: Path, sub_type: int, *, nums: list[int], permits: list[int], delivers: dict[int, int] | None = None,
                   limit: int = 50_000, prepare: Any = None, small_cache: bool = False,
                   dead_letter: bool = False) -> list[dict[str, Any]]:
    service = BrokerService(BrokerConfig(data_dir=tmp / "data", port=None, admin_port=None, sync="off",
                                         max_unacked_messages_per_consumer=limit))
    await service.start()
    delivers = delivers or {}
    try:
        topic: Any = service.persistent_topic(TopicName.parse("persistent://public/default/runs"), create=True)
        ledger = topic.ledger
        if small_cache:
            service.store._cache.limit = 30 * 200
        subs = [topic.subscription_for(name, True, "earliest", None) for name in ("runs", "entries")]
        await asyncio.gather(*(ledger.append(data(i, delivers.get(i)), n, 1000 + i, deliver_at_time=delivers.get(i))
                               for i, n in enumerate(nums)))
        out = []
        for sub in subs:
            if dead_letter:
                sub.policy = failure.policy_from_consumer_properties({"letterbox.dlq.max_redeliveries": "3"})
            if prepare is not None:
                prepare(sub.cursor)
            cnx = FakeCnx(service)
            c = Consumer(cnx, consumer_id=7, name="c", sub_type=sub_type)  # type: ignore[arg-type]
            sub.add_consumer(c)
            off = sub.name == "entries"
            real = dispatcher.plain_run_length
            if off:
                dispatcher.plain_run_length = lambda *a: (0, 0)  # type: ignore[assignment]
            try:
                for p in permits:
                    c.permits += p
                    sub.dispatcher._dispatch()
                    while c.blocked_on_unacked:  # acks bring it back under half the limit
                        sub.ack_individual(c, [], sorted(c.pending)[: c.pending.total // 2 + 1])
                        sub.dispatcher._dispatch()
            finally:
                dispatcher.plain_run_length = real  # type: ignore[assignment]
            out.append(observe(sub, c, cnx))
            out[-1]["runs"] = not off
        return out
    finally:
        await service.stop()


def same(tmp_path: Path, sub_type: int, **kw: Any) -> dict[str, Any]:
    runs, entries = asyncio.run(scenario(tmp_path, sub_type, **kw))
    del runs["runs"], entries["runs"]
    assert runs == entries
    assert runs["bytes"], "nothing was dispatched"
    return runs


@pytest.mark.parametrize("sub_type", [0, 1])
def test_plain_entries_and_permits_running_out_inside_a_batch(tmp_path: Path, sub_type: int) -> None:
    nums = [1 + (i * 7) % 5 for i in range(260)]
    got = same(tmp_path, sub_type, nums=nums, permits=[37, 1, 200, 1000])
    assert got["read_position"] == 260


def test_unacked_limit_reached_mid_round(tmp_path: Path) -> None:
    got = same(tmp_path, 1, nums=[1] * 120, permits=[1000], limit=20)
    assert got["read_position"] == 120 and got["total"] < 20


def test_acked_holes_counts_and_a_partly_acked_batch(tmp_path: Path) -> None:
    def prepare(cursor: Any) -> None:
        cursor.ack([5, 6, 50, 51, 52, 180])
        cursor.increment_redelivery([3, 70, 71])
        cursor.ack_batch_mask(10, 4, 0b0101)

    nums = [4 if i == 10 else 1 for i in range(200)]
    got = same(tmp_path, 1, nums=nums, permits=[1000], prepare=prepare)
    assert 5 not in got["pending"] and 10 in got["pending"] and 3 in got["pending"]


@pytest.mark.parametrize("sub_type", [0, 1])
def test_delayed_messages_and_a_pending_backoff(tmp_path: Path, sub_type: int) -> None:
    def prepare(cursor: Any) -> None:
        cursor.set_due(8, FAR)

    got = same(tmp_path, sub_type, nums=[1] * 150, permits=[1000], delivers={20: FAR, 21: FAR, 130: FAR},
               prepare=prepare)
    if sub_type == 1:  # Shared honours delivery times: held, not sent
        assert got["delayed"] == 4 and 20 not in got["pending"]
    else:
        assert 20 in got["pending"]


def test_delivery_times_with_a_dead_letter_policy(tmp_path: Path) -> None:
    got = same(tmp_path, 1, nums=[1] * 150, permits=[1000], dead_letter=True)
    assert got["timed"] == list(range(150))


@pytest.mark.parametrize("sub_type", [0, 1])
def test_rows_read_back_from_disk(tmp_path: Path, sub_type: int) -> None:
    got = same(tmp_path, sub_type, nums=[1] * 150, permits=[1000], delivers={3: FAR}, small_cache=True)
    assert got["read_position"] == 150


def test_runs_are_taken_when_nothing_needs_a_look(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parity above compares something: the plain-run path really books runs."""
    calls: list[int] = []
    real = dispatch_runs.send_plain_run

    def spy(sub: Any, c: Consumer, run: Any, messages: int) -> list[bytes]:
        calls.append(len(run))
        return real(sub, c, run, messages)

    monkeypatch.setattr(dispatcher, "send_plain_run", spy)
    same(tmp_path, 0, nums=[1] * 250, permits=[1000])
    assert sum(calls) == 250 and max(calls) > 1
