"""A dispatch round reads from storage only the entries its consumers can take: a backlog of
batch entries (50 messages each), out of the tail cache, is read two entries at a time for
consumers holding 100 permits -- not a hundred entries at a time to send two -- on the
plain-run path (one Exclusive consumer) and on the per-entry path (two Shared consumers),
and every entry still arrives, once, as permits come. In process: a real broker
service and store, consumers on a fake connection."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from letterbox.broker.service import BrokerService
from letterbox.broker.topics.consumer import Consumer
from letterbox.config import BrokerConfig
from letterbox.protocol import build_headers_and_payload, pb
from letterbox.topic_name import TopicName
from tests.unit.test_dispatch_runs import FakeCnx

ENTRIES = 200
PER_ENTRY = 50  # messages in each batch entry


def data(i: int) -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1000 + i,
                              num_messages_in_batch=PER_ENTRY)
    return build_headers_and_payload(meta, b"b%05d" % i)


async def read_backlog(tmp: Path, sub_type: int, permits: list[int]) -> tuple[list[int], list[int]]:
    """(rows read from storage per dispatch round, the entries delivered, sorted) for a
    backlog read by one consumer per entry of `permits`, each given that many per round."""
    service = BrokerService(BrokerConfig(data_dir=tmp / "data", port=None, admin_port=None, sync="off"))
    await service.start()
    try:
        topic: Any = service.persistent_topic(TopicName.parse("persistent://public/default/backlog"), create=True)
        sub = topic.subscription_for("s", True, "earliest", None)
        service.store._cache.limit = 1  # every entry evicted: the backlog is read from disk
        await asyncio.gather(*(topic.ledger.append(data(i), PER_ENTRY, 1000 + i) for i in range(ENTRIES)))
        assert len(topic.ledger._cache) == 0, "the backlog is out of the tail cache"

        store = service.store
        real = store._read_range
        read: list[int] = []

        def counting(ledger_id: int, first: int, last: int, max_bytes: int, out: list[Any]) -> int:
            before = len(out)
            n = real(ledger_id, first, last, max_bytes, out)
            read[-1] += len(out) - before
            return n

        store._read_range = counting  # type: ignore[method-assign]
        cnx = FakeCnx(service)
        consumers = [Consumer(cnx, consumer_id=i, name=f"c{i}", sub_type=sub_type)  # type: ignore[arg-type]
                     for i in range(len(permits))]
        for c in consumers:
            sub.add_consumer(c)
        delivered: list[int] = []
        for _ in range(ENTRIES):
            if sub.dispatcher.read_position >= ENTRIES:
                break
            for c, p in zip(consumers, permits, strict=True):
                c.permits = p
            read.append(0)
            sub.dispatcher._dispatch()
            for c in consumers:
                ids = sorted(c.pending)
                delivered.extend(ids)
                sub.ack_individual(c, [], ids)
        return read, sorted(delivered)
    finally:
        await service.stop()


@pytest.mark.parametrize(("sub_type", "permits"), [(0, [100]), (1, [50, 50])])
def test_a_backlog_of_batches_is_read_as_far_as_the_permits_reach(tmp_path: Path, sub_type: int,
                                                                   permits: list[int]) -> None:
    read, delivered = asyncio.run(read_backlog(tmp_path, sub_type, permits))
    assert delivered == list(range(ENTRIES)), "every entry once"
    assert read[0] == 2, f"the first round read {read[0]} entries for 100 permits of 50-message batches"
    assert sum(read) == ENTRIES, f"{sum(read)} rows read for a backlog of {ENTRIES} entries"
