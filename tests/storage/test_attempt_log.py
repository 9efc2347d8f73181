"""The delivery attempt log in the subscription state record: stored with the cursor,
bounded rows per entry, forgotten by acks (individual, batch-complete, cumulative) and
survives a restart; records written before the log existed still open."""
from __future__ import annotations

import json
from pathlib import Path

from storage_helpers import run_with_store

from letterbox.failure.attempts import ACK_TIMEOUT, NACK, Attempt, append_row, decode_rows
from letterbox.storage import Store
from letterbox.storage.delivery_state import DeliveryState


def _log(*endings: str) -> str:
    text = None
    for i, e in enumerate(endings):
        text = append_row(text, Attempt(1000 + i, 2000 + i, "c1", "127.0.0.1:5", e, f"r{i}"), limit=10)
    assert text is not None
    return text


def test_attempts_survive_a_restart_and_go_with_the_ack(tmp_path: Path) -> None:
    async def body(store: Store) -> None:
        led = store.open_ledger("t")
        for i in range(4):
            await led.append(b"e%d" % i, 1, 1000)
        c = led.open_cursor("s", "earliest")
        c.set_attempts(0, _log(NACK, ACK_TIMEOUT))
        c.set_attempts(1, _log(NACK))
        c.set_attempts(3, _log(NACK))
        c.increment_redelivery([0, 1, 3])
        await c.flush()

    run_with_store(tmp_path, body)

    async def reopen(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        c = led.cursors()["s"]
        rows = c.deliveries.attempts.get(0)
        assert rows is not None
        got = decode_rows(rows)
        assert [a.ending for a in got] == [NACK, ACK_TIMEOUT]
        assert got[1] == Attempt(1001, 2001, "c1", "127.0.0.1:5", ACK_TIMEOUT, "r1")
        c.ack([1])
        assert c.deliveries.attempts.get(1) is None
        c.ack_cumulative(0)
        assert c.deliveries.attempts.get(0) is None
        assert c.deliveries.attempts.get(3) is not None
        await c.flush()

    run_with_store(tmp_path, reopen)

    async def again(store: Store) -> None:
        led = store.get_ledger("t")
        assert led is not None
        c = led.cursors()["s"]
        assert sorted(c.deliveries.attempts.rows) == [3]
        c.set_attempts(1, _log(NACK))  # acked: not stored
        assert c.deliveries.attempts.get(1) is None

    run_with_store(tmp_path, again)


def test_append_row_keeps_the_last_n() -> None:
    text = None
    for i in range(15):
        text = append_row(text, Attempt(i, i, "c", None, NACK, str(i)), limit=10)
    assert text is not None
    assert [a.reason for a in decode_rows(text)] == [str(i) for i in range(5, 15)]


def test_records_with_and_without_an_a_member_read() -> None:
    v2 = {"v": 2, "md": -1, "c": [0, 2], "t": [0, 5, 6]}
    s = DeliveryState.from_doc(v2)
    assert len(s.attempts) == 0 and s.counts == {0: 2}
    assert s.attempts.take_changes() is None
    v1 = {"v": 1, "md": -1, "rc": [[0, 3]]}
    assert DeliveryState.from_doc(v1).counts == {0: 3}
    # logs kept in the record (before the attempt_logs table) are read and moved by the next write
    rows = json.loads(_log(NACK))
    old = DeliveryState.from_doc({**v2, "a": [[0, rows]]})
    assert old.attempts.get(0) == _log(NACK)
    moved = old.attempts.take_changes()
    assert moved is not None and moved.replace_all and moved.upserts == [(0, _log(NACK))]
    rows_moved = old.take_changes()  # and the record's counts and times, to the deliveries rows
    assert rows_moved is not None and rows_moved.replace_all and rows_moved.upserts == [(0, 2, 5, 6, None, None)]


def test_only_changed_entries_are_written() -> None:
    s = DeliveryState()
    s.attempts.durable = True
    s.attempts.set(1, _log(NACK))
    s.attempts.set(2, _log(NACK))
    first = s.attempts.take_changes()
    assert first is not None and [e for e, _ in first.upserts] == [1, 2] and not first.deletes
    assert s.attempts.take_changes() is None  # nothing changed since
    s.forget(1)
    s.forget(7)  # no log: no change
    ch = s.attempts.take_changes()
    assert ch is not None and ch.deletes == [1] and ch.upserts == []
    s.attempts.rewrite_all()  # after a failed write
    again = s.attempts.take_changes()
    assert again is not None and again.replace_all and [e for e, _ in again.upserts] == [2]


def test_a_log_is_encoded_as_json_dumps_encodes_it_row_texts_remembered_or_not() -> None:
    from letterbox.storage.attempt_log import encode

    odd = [None, "", "c-1", 'q"uote\\back\nnl\t\u00e9', "\u00fcn\u00efcode \u2713 \u2028", "\x00ctl"]
    rows = tuple((1_700_000_000_000 + i, 17 * i, odd[i % 6], odd[(i + 1) % 6], "nack", odd[(i + 2) % 6])
                 for i in range(12))
    for n in range(len(rows) + 1):
        want = json.dumps([list(r) for r in rows[:n]], separators=(",", ":"), ensure_ascii=False)
        assert encode(rows[:n]) == want
        assert encode(rows[:n]) == want  # the second time from remembered row texts
