# A Consumer is one client consumer attached to a subscription over one
# connection. It owns its flow permits and its pending-ack map (entry id ->
# messages in that entry, as dispatched). Invariant: an entry id is in
# `pending` of at most one consumer of a subscription, and an entry is added
# to `pending` before its MESSAGE frame is written.
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from letterbox.protocol import commands

if TYPE_CHECKING:
    from letterbox.broker.server_cnx import ServerCnx
    from letterbox.broker.subscription import Subscription
    from letterbox.storage.entry import Entry

SUB_TYPE_NAMES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}


@dataclass(eq=False)
class Consumer:
    cnx: ServerCnx
    consumer_id: int
    name: str
    sub_type: int
    priority_level: int = 0
    sticky_ranges: list[tuple[int, int]] | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    partition_index: int = -1
    permits: int = 0
    pending: dict[int, int] = field(default_factory=dict)
    subscription: Subscription | None = None
    # Key_Shared: entries at or after this id wait until everything before it
    # is acknowledged (keeps per-key order when ranges move to a new consumer)
    ks_fence: int | None = None
    msg_out: int = 0
    closed: bool = False

    @property
    def available(self) -> bool:
        return self.permits > 0 and not self.closed and self.cnx.writable

    def send_entry(self, entry: Entry, redelivery_count: int, ack_set: list[int] | None) -> None:
        pos = entry.position
        self.pending[pos.entry_id] = entry.num_messages
        self.permits -= entry.num_messages
        self.msg_out += entry.num_messages
        self.cnx.write(
            commands.message(
                self.consumer_id,
                pos.ledger_id,
                pos.entry_id,
                self.partition_index,
                redelivery_count,
                ack_set,
                entry.data,
            )
        )

    def send_raw(self, ledger_id: int, entry_id: int, num_messages: int, data: bytes) -> None:
        """Non-persistent delivery: no pending-ack bookkeeping."""
        self.permits -= num_messages
        self.msg_out += num_messages
        self.cnx.write(
            commands.message(self.consumer_id, ledger_id, entry_id, self.partition_index, 0, None, data)
        )
