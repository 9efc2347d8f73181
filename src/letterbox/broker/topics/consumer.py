# A Consumer is one client consumer attached to a subscription over one
# connection. It owns its flow permits and its pending-ack map (entry id ->
# messages in that entry, as dispatched). Invariant: an entry id is in
# `pending` of at most one consumer of a subscription, and an entry is added
# to `pending` before its MESSAGE frame is written. Permits never go negative:
# a batch larger than the permits left is sent whole (as Pulsar does) and the
# difference is owed, paid from the next FLOW; a FLOW adds at most up to
# MAX_PERMITS. A Shared/Key_Shared consumer over its unacked limit is not
# `available` (unacked_limits.py).
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from letterbox.broker.policies.unacked_limits import PendingAcks, on_pending_change
from letterbox.protocol import commands
from letterbox.protocol.receipts import FrameEncoder, message_encoder

if TYPE_CHECKING:
    from letterbox.broker.policies.bounded import UnackedSubscription
    from letterbox.broker.topics.client_connection import ClientConnection
    from letterbox.storage.entry import Entry

SUB_TYPE_NAMES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}
MAX_PERMITS = (1 << 31) - 1  # a Java int, as Pulsar counts them


@dataclass(eq=False)
class Consumer:
    cnx: ClientConnection
    consumer_id: int
    name: str
    sub_type: int
    priority_level: int = 0
    sticky_ranges: list[tuple[int, int]] | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    partition_index: int = -1
    permits: int = 0
    # messages sent beyond the permits granted (a batch bigger than what was left)
    permits_owed: int = 0
    pending: PendingAcks = field(init=False)
    # the subscription it is attached to (a Subscription sets itself: subscription.subscription_of)
    subscription: UnackedSubscription | None = None
    msg_out: int = 0
    closed: bool = False
    # Pulsar's blockedConsumerOnUnackedMsgs: held maxUnackedMessagesPerConsumer
    blocked_on_unacked: bool = False
    # when each message sent with a count above 0 went out (Exclusive/Failover: hand_backs.py)
    recounted_sends: dict[int, float] = field(default_factory=dict, repr=False)
    # this consumer's MESSAGE frames from its topic's ledger (ids encoded once)
    _encoder: FrameEncoder | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.pending = PendingAcks(lambda delta: on_pending_change(self, delta))

    @property
    def available(self) -> bool:
        if self.permits <= 0 or self.closed or not self.cnx.writable or self.blocked_on_unacked:
            return False
        sub = self.subscription
        return sub is None or not sub.blocked_on_unacked

    def add_permits(self, permits: int) -> None:
        """A FLOW: pay what is owed first, never beyond MAX_PERMITS, never below 0."""
        permits = max(0, permits)
        paid = min(permits, self.permits_owed)
        self.permits_owed -= paid
        self.permits = min(MAX_PERMITS, self.permits + permits - paid)

    def take_permits(self, messages: int) -> None:
        taken = min(self.permits, messages)
        self.permits -= taken
        self.permits_owed = min(MAX_PERMITS, self.permits_owed + messages - taken)

    def booked_message(self, entry: Entry, redelivery_count: int, ack_set: list[int] | None,
                       quiet: bool = False) -> bytes:
        """Book `entry` as sent to this consumer (pending ack, permits) and return its
        MESSAGE frame; the caller writes it. `quiet`: the caller knows from
        unblocked_room that the unacked limits need no look (PendingAcks.add_quiet)."""
        pos = entry.position
        n = entry.num_messages
        eid = pos.entry_id
        if quiet:
            self.pending.add_quiet(eid, n)
        else:
            self.pending[eid] = n
        if self.permits >= n:  # take_permits when nothing is owed
            self.permits -= n
        else:
            self.take_permits(n)
        self.msg_out += n
        return self.encoder(pos.ledger_id).frame(eid, redelivery_count, ack_set, entry.data)

    def encoder(self, ledger_id: int) -> FrameEncoder:
        """The MESSAGE frame encoder of this consumer for entries of `ledger_id`."""
        enc = self._encoder
        if enc is None or enc.ledger_id != ledger_id:
            enc = self._encoder = message_encoder(self.consumer_id, ledger_id, self.partition_index)
        return enc

    def booked_run(self, ledger_id: int, entry_ids: list[int], nums: list[int], messages: int) -> FrameEncoder:
        """booked_message for a run of entries new to this consumer, all below what
        unblocked_room leaves (`messages` = sum of nums): booked in one step; returns the
        encoder of their MESSAGE frames, which the caller builds and writes."""
        self.pending.add_run(entry_ids, nums, messages)
        self.take_permits(messages)
        self.msg_out += messages
        return self.encoder(ledger_id)

    def send_raw(self, ledger_id: int, entry_id: int, num_messages: int, data: bytes) -> None:
        """Non-persistent delivery: no pending-ack bookkeeping."""
        self.take_permits(num_messages)
        self.msg_out += num_messages
        self.cnx.send(
            commands.message(self.consumer_id, ledger_id, entry_id, self.partition_index, 0, None, data),
            consumer_id=self.consumer_id,
        )
