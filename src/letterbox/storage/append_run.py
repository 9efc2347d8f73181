# AppendRunOp: consecutive appends to one ledger (the SENDs of one input pass by the
# producers of one topic on one connection, broker/connection/send_batch.py) as ONE write op
# holding a row per entry: no Entry, Position or AppendOp per message: the committed rows enter
# the tail cache as they are (cache.py).
#
# Invariants:
#   * the rows' entry ids are consecutive, reserved in order by reserve_row (which does the
#     ManagedLedger.check_appendable first: nothing is reserved if it raises);
#   * a run holds small entries only: an entry of at least the payload lane's threshold is
#     reserved as its own AppendOp (payload_lane.py routes it), closing the run;
#   * the run counts as ONE append in flight of its ledger: its commit confirms every row
#     (in order), its failure fails them all (ManagedLedger._on_append_failed, once);
#   * the sequence stored per producer (deduplication) is its last one in the run (as the
#     writer's fast path does for a group of AppendOps).
from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from .cache import Row
from .errors import LedgerClosedError
from .ops import UPSERT_SEQ, WriteOp, insert_entries

if TYPE_CHECKING:
    from .managed_ledger import ManagedLedger



class AppendRunOp(WriteOp):
    __slots__ = ("delivers", "ledger", "nbytes", "rows", "seqs")
    appends = True

    def __init__(self, ledger: ManagedLedger) -> None:
        self.ledger = ledger
        self.seqs: dict[str, int] = {}  # producer name -> its last sequence id (deduplication)
        self.rows: list[Row] = []
        self.delivers: list[int | None] = []
        self.nbytes = 0

    def ledgers(self) -> tuple[int, ...]:
        return (self.ledger.ledger_id,)

    def seq_rows(self) -> list[tuple[int, str, int]]:
        lid = self.ledger.ledger_id
        return [(lid, name, seq) for name, seq in self.seqs.items()]

    def apply(self, conn: sqlite3.Connection, fenced: set[int]) -> None:
        lid = self.ledger.ledger_id
        if lid in fenced:
            raise LedgerClosedError(f"ledger {lid} is fenced after a failed write")
        insert_entries(conn, self.rows)
        if self.seqs:
            conn.executemany(UPSERT_SEQ, self.seq_rows())

    def on_commit(self) -> None:
        self.ledger.on_rows_committed(self.rows, self.delivers, self.nbytes, self.seqs.items())

    def on_fail(self, exc: BaseException) -> None:
        self.ledger._on_append_failed(exc)


def reserve_row(
    led: ManagedLedger, ops: list[WriteOp], data: bytes, num_messages: int, publish_time: int,
    producer_name: str | None, sequence_id: int | None, deliver_at_time: int | None,
) -> int:
    """Reserve the next entry id of `led` for `data`, adding it to the last op of `ops` when
    that is this ledger's run, else to a new op appended to `ops`.
    Returns the entry id; ManagedLedger.submit_appends(ops, then) stores them."""
    if len(data) >= led._store._payloads.large_bytes:  # stored through the payload lane
        op = led._prepare_append(data, num_messages, publish_time, producer_name, sequence_id, deliver_at_time)
        ops.append(op)
        return op.entry.position.entry_id
    eid = led.reserve_entry_id(num_messages, producer_name, sequence_id)
    if type(data) is not bytes:
        data = bytes(data)
    run = ops[-1] if ops else None
    if type(run) is not AppendRunOp or run.ledger is not led:
        run = AppendRunOp(led)
        ops.append(run)
        led._inflight += 1
    if producer_name is not None and sequence_id is not None:
        run.seqs[producer_name] = sequence_id
    size = len(data)
    run.rows.append((led.ledger_id, eid, publish_time, num_messages, size, data))
    run.delivers.append(deliver_at_time)
    run.nbytes += size
    return eid
