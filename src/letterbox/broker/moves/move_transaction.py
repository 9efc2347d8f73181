# The one move transaction. Every "take from here, append there, ack here" of the broker --
# dead lettering and parking (dead_letter_router.py), the move route that retries and
# terminates (message_mover.py), redrive (redrive.py) -- runs in a MoveTransaction: one
# storage transaction of the store's writer, in which the appends to the targets and the
# acknowledgements in the source commit together or not at all.
# Invariants:
#   * nothing changes in memory unless it committed: the caller settles the source (and
#     counts what it moved) only after `commit` returned;
#   * a terminated target takes nothing (as from a producer: TopicTerminated): `refuse_terminated`
#     before anything is read, and again just before the commit (terminated while the move
#     waited for its locks), raising NotAllowed with the message left where it was;
#   * a failed commit is counted and logged once (MovesBroker.storage_failed) and its storage
#     error raised; a committed one counts its appends as published (count_broker_appends);
#   * cursors are locked before the state they guard is read (`lock`), so two moves of the
#     same message cannot both move it.
from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from letterbox.broker.moves.moved_entry import SchemaMap, build_moved_entry
from letterbox.broker.policies import termination_record
from letterbox.errors import NotAllowed
from letterbox.message_properties import REAL_TOPIC
from letterbox.protocol.compression import DEFAULT_LIMIT
from letterbox.storage.entry import UNREAD
from letterbox.storage.errors import StorageError

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovesBroker
    from letterbox.storage.entry import Entry
    from letterbox.storage.managed_cursor import ManagedCursor
    from letterbox.storage.managed_ledger import ManagedLedger
    from letterbox.storage.transaction import PendingAppend, Transaction
    from letterbox.topic_name import TopicName


class MoveTransaction:
    """`async with MoveTransaction(service, "dead_letter") as move:` lock, append, ack, then
    `await move.commit(what)`; leaving the block without a commit changes nothing."""

    def __init__(self, service: MovesBroker, operation: str) -> None:
        self.service = service
        self.operation = operation  # how a failed commit is counted (storage_failed)
        self.txn: Transaction = service.store.transaction()  # for what else must commit with it

    async def __aenter__(self) -> MoveTransaction:
        await self.txn.__aenter__()
        return self

    async def __aexit__(self, et: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.txn.__aexit__(et, exc, tb)

    async def lock(self, cursor: ManagedCursor) -> None:
        await self.txn.lock(cursor)

    def next_entry_id(self, target: ManagedLedger) -> int:
        """The entry id the next append to `target` in this transaction will get."""
        return self.txn.next_entry_id(target)

    # --- there: the appends ------------------------------------------------------------
    def append(self, target: ManagedLedger, data: bytes, num_messages: int, now: int,
               deliver_at_time: int | None = UNREAD) -> PendingAppend:
        return self.txn.append(target, data, num_messages, now, deliver_at_time)

    def append_moved(self, entry: Entry, source: TopicName, target: ManagedLedger, *,
                     extra: Mapping[str, str], skip_indexes: frozenset[int], producer_name: str, now: int,
                     deliver_at: int | None = None, limit: int = DEFAULT_LIMIT, schema: SchemaMap | None = None,
                     ) -> tuple[PendingAppend, int] | None:
        """Append `entry` (of topic `source`) to `target` as a moved message (moved_entry.py);
        it and its message count, None if no message is left to move. REAL_TOPIC is `source`
        unless the message already names one."""
        built = build_moved_entry(
            entry.data, ledger_id=entry.position.ledger_id, entry_id=entry.position.entry_id,
            partition=source.partition_index, extra=extra, keep_if_present={REAL_TOPIC: str(source)},
            skip_indexes=skip_indexes, producer_name=producer_name, sequence_id=self.next_entry_id(target),
            publish_time=now, deliver_at=deliver_at, limit=limit, schema=schema,
        )
        if built is None:
            return None
        data, count = built  # its metadata's deliver_at_time is `deliver_at` (build_moved_entry)
        return self.append(target, data, count, now, deliver_at), count

    # --- here: the acknowledgements ----------------------------------------------------
    def ack(self, cursor: ManagedCursor, entry_ids: Iterable[int]) -> None:
        self.txn.ack(cursor, entry_ids)

    def ack_batch_mask(self, cursor: ManagedCursor, entry_id: int, batch_size: int, mask: int) -> None:
        self.txn.ack_batch_mask(cursor, entry_id, batch_size, mask)

    def ack_appended(self, cursor: ManagedCursor, append: PendingAppend) -> None:
        """Acknowledge an entry this transaction appends (on a target's other cursors)."""
        self.txn.ack_appended(cursor, append)

    # --- together ------------------------------------------------------------------------
    async def commit(self, what: str) -> None:
        """Commit the appends and acknowledgements as one; `what` names them in the log line of
        a failure, which is counted and raised."""
        await self.start_commit(what)

    def start_commit(self, what: str) -> Coroutine[Any, Any, None]:
        """commit() whose first step runs now: the writer has the transaction (its entry ids
        assigned) when this returns; await what it returns for the commit itself, doing other
        work meanwhile (a redrive reads its next chunk while this one is made durable)."""
        try:
            submitted = self.txn.submit()
        except StorageError as exc:
            self.service.storage_failed(self.operation, exc, what)
            raise
        return self._committed(submitted, what)

    async def _committed(self, submitted: asyncio.Future[None], what: str) -> None:
        try:
            await asyncio.shield(submitted)
        except StorageError as exc:
            self.service.storage_failed(self.operation, exc, what)
            raise
        self.service.count_broker_appends(self.txn.appends)


def is_terminated(service: MovesBroker, name: TopicName) -> bool:
    """Whether `name` was terminated (policies/termination_record.py): it takes no more messages,
    from a producer or a move."""
    loaded = service.topics.get(str(name))
    if loaded is not None:
        return getattr(loaded, "terminated", None) is not None
    return termination_record.load(service.store, name) is not None


def terminated_refusal(service: MovesBroker, name: TopicName, what: str) -> str | None:
    """Why nothing may be appended to `name` (`what` names its role: redrive target, dead letter
    topic, move target), or None: a terminated topic takes no more messages, as from a producer
    (TopicTerminated)."""
    if is_terminated(service, name):
        return f"{what} {name} is terminated: it takes no more messages"
    return None


def refuse_terminated(service: MovesBroker, name: TopicName, what: str) -> None:
    """NotAllowed naming a terminated target, before anything is written to it."""
    why = terminated_refusal(service, name, what)
    if why is not None:
        raise NotAllowed(why)
