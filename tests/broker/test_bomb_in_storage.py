"""Decompression bombs that got into storage (written there by this test,
bypassing the SEND check) cannot blow up the broker through any admin view
that opens payloads: each bad message is answered with its own error, every
view answers 2xx, and the broker's peak RSS stays under 200 MB."""
from __future__ import annotations

import asyncio
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pulsar

from letterbox.message_properties import DEAD_LETTER_REASON
from letterbox.protocol import build_headers_and_payload, pb
from letterbox.protocol.compression import ZLIB, ZSTD
from letterbox.storage.store import Store
from tests.admin.helpers import call, call_raw
from tests.broker.test_untrusted_counts import GIB, zstd_bomb
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

TOPIC = "persistent://public/default/bombs-DLQ"
PATH = "/admin/v2/persistent/public/default/bombs-DLQ"
MAX_PEAK_RSS_KB = 200 * 1024


def stored(payload: bytes, *, reason: str | None = "maxRedeliveries", **fields: Any) -> bytes:
    meta = pb.MessageMetadata(producer_name="bomber", sequence_id=0, publish_time=int(time.time() * 1000))
    if reason is not None:
        meta.properties.add(key=DEAD_LETTER_REASON, value=reason)
    for name, value in fields.items():
        setattr(meta, name, value)
    return build_headers_and_payload(meta, payload)


def write_entries(data_dir: Path, entries: list[tuple[bytes, int]]) -> int:
    async def main() -> int:
        store = Store(data_dir)
        await store.start()
        try:
            ledger = store.open_ledger(TOPIC)
            for data, count in entries:
                await ledger.append(data, count, int(time.time() * 1000))
            return ledger.ledger_id
        finally:
            await store.close()

    return asyncio.run(main())


def peak_rss_kb(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def test_admin_views_answer_per_message_with_bounded_memory(broker_factory: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker_factory(data_dir).stop()  # the data dir with its default namespace
    bomb = zstd_bomb()
    entries = [
        (stored(b"a good dead letter"), 1),
        (stored(bomb, compression=ZSTD, uncompressed_size=GIB), 1),
        (stored(bomb, compression=ZSTD, uncompressed_size=4000), 1),
        (stored(bomb, compression=ZSTD, uncompressed_size=GIB, num_messages_in_batch=2), 2),
        (stored(b"this is not zlib", compression=ZLIB, uncompressed_size=16), 1),
    ]
    ledger_id = write_entries(data_dir, entries)
    broker: BrokerProcess = broker_factory(data_dir)
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    client.subscribe(TOPIC, "inspect", initial_position=pulsar.InitialPosition.Earliest).close()
    client.close()
    base = broker.admin_url
    errors = "X-Letterbox-Payload-Error"

    for n in range(1, 6):
        views = {
            "examine": f"{PATH}/examinemessage?initialPosition=earliest&messagePosition={n}",
            "by-id": f"{PATH}/ledger/{ledger_id}/entry/{n - 1}",
            "peek": f"{PATH}/subscription/inspect/position/{n}",
        }
        for view, path in views.items():
            status, headers, body = call_raw(base, "GET", path)
            assert status == 200, (view, n, status, body[:200])
            if n == 1:
                assert body == b"a good dead letter" and errors not in headers, (view, headers)
            else:
                assert errors in headers, (view, n, headers)
                assert len(body) < 64 * 1024  # answered as stored, never expanded
    status, topics = call(base, "GET", "/admin/v2/namespaces/public/default/letterbox/deadLetterTopics")
    assert status == 200, topics
    summary = next(t for t in topics if t["topic"] == TOPIC)
    assert summary["messages"] == 5
    status, listed = call(base, "GET", f"{PATH}/letterbox/deadLetters?limit=100")
    assert status == 200, listed
    assert [m.get("error") is None for m in listed] == [True, False, False, False, False]
    assert listed[0]["payloadText"] == "a good dead letter"
    assert "exceeds the limit" in listed[1]["error"] and "expands beyond 4000" in listed[2]["error"]
    assert "ZLIB" in listed[4]["error"]
    for action in ("purge", "redrive"):
        status, answer = call(base, "POST", f"{PATH}/letterbox/{action}", '{"dryRun": true}')
        assert status == 200, (action, answer)
    # a real redrive moves the good message only; the unreadable ones stay, listed with their errors
    status, answer = call(base, "POST", f"{PATH}/letterbox/redrive",
                          '{"target": "persistent://public/default/bombs-back"}')
    assert status == 200 and answer["moved"] == 1, answer
    status, listed = call(base, "GET", f"{PATH}/letterbox/deadLetters?{urllib.parse.urlencode({'limit': 100})}")
    assert status == 200 and len(listed) == 4 and all(m["error"] for m in listed), listed
    # moving one message of the bomb batch (the atomic move) is refused for that message, nothing moves
    move = f"{PATH}/subscription/inspect/letterbox/move"
    status, answer = call(base, "POST", move,
                          f'{{"messageId": "{ledger_id}:3:-1:0", "target": "persistent://public/default/bomb-moved"}}')
    assert status == 412 and "cannot be reopened" in answer["reason"], answer
    status, _h, body = call_raw(base, "GET", f"{PATH}/subscription/inspect/position/4")
    assert status == 200 and _h["X-Pulsar-Message-ID"] == f"{ledger_id}:3"  # still in its subscription
    peak = peak_rss_kb(broker)
    assert peak < MAX_PEAK_RSS_KB, f"broker peak RSS {peak} kB"


def test_broker_dead_letter_path_moves_a_bomb_batch_with_bounded_memory(
    broker_factory: Any, tmp_path: Path
) -> None:
    """A bomb batch that expires under a namespace TTL + dead-letter policy goes through the
    broker's own dead-letter move: it cannot be reopened (bounded at max_message_size), so it
    is dead-lettered as its original bytes beside the good message, without blowing up memory."""
    data_dir = tmp_path / "data"
    first: BrokerProcess = broker_factory(data_dir)
    base, ns = first.admin_url, "/admin/v2/namespaces/public/bombns"
    source = "persistent://public/bombns/orders"
    assert call(base, "PUT", ns)[0] == 204
    assert call(base, "PUT", "/admin/v2/persistent/public/bombns/orders")[0] == 204
    assert call(base, "PUT", "/admin/v2/persistent/public/bombns/orders/subscription/s",
                '{"ledgerId": -1, "entryId": -1}')[0] == 204
    assert call(base, "POST", ns + "/letterbox/deadLetterPolicy", '{"maxRedeliverCount": 3}')[0] == 204
    first.stop()
    bomb = zstd_bomb()

    async def write() -> None:
        store = Store(data_dir)
        await store.start()
        try:
            ledger = store.open_ledger(source)
            now = int(time.time() * 1000)
            await ledger.append(stored(b"good one", reason=None), 1, now)
            await ledger.append(stored(bomb, reason=None, compression=ZSTD, uncompressed_size=GIB,
                                       num_messages_in_batch=2), 2, now)
        finally:
            await store.close()

    asyncio.run(write())
    broker: BrokerProcess = broker_factory(data_dir)
    base = broker.admin_url
    assert call(base, "POST", ns + "/messageTTL", "1")[0] == 204
    # the expiry pass visits loaded topics: load this one through its stats
    assert call(base, "GET", "/admin/v2/persistent/public/bombns/orders/stats")[0] == 200
    dlq = "/admin/v2/persistent/public/bombns/orders-s-DLQ"

    def dead_lettered() -> int:
        status, stats = call(base, "GET", dlq + "/internalStats")
        return int(stats.get("numberOfEntries", -1)) if status == 200 else -1

    assert wait_until(lambda: dead_lettered() == 2, 30), call(base, "GET", dlq + "/internalStats")
    status, _h, body = call_raw(base, "GET", dlq + "/examinemessage?initialPosition=earliest&messagePosition=1")
    assert status == 200 and body == b"good one"
    status, headers, body = call_raw(base, "GET", dlq + "/examinemessage?initialPosition=earliest&messagePosition=2")
    assert status == 200 and "X-Letterbox-Payload-Error" in headers and len(body) < 64 * 1024
    status, stats = call(base, "GET", "/admin/v2/persistent/public/bombns/orders/stats")
    assert status == 200 and stats["subscriptions"]["s"]["msgBacklog"] == 0
    peak = peak_rss_kb(broker)
    assert peak < MAX_PEAK_RSS_KB, f"broker peak RSS {peak} kB"
