# Messages a consumer hands back unseen, on Exclusive and Failover subscriptions.
#
# The official Java and C++ clients (the Python client is the C++ one) give a message straight
# back, before the application sees it, when its redelivery count is above their dead letter
# policy's max_redeliver_count. On Shared and Key_Shared they name it in the request and then
# move it to the dead letter topic; on Exclusive and Failover they have no dead letter path and
# hand it back with a redeliver-all. Apache Pulsar never counts on those types, so this never
# happens there; letterbox counts on every type, and without this rule such a message would go
# round between broker and client without end, never reaching the application.
#
# The rule: a message sent to a consumer of an Exclusive or Failover subscription with a count
# above 0 that comes back by a redeliver-all within HAND_BACK_WINDOW_S of being sent was not
# seen by the application (the clients wait at least 100 ms before they redeliver a negatively
# acknowledged message, and at least 1 s for an ack timeout). Such a return is not counted, and
# each one lowers the count the message is sent with by one, so it goes to the application
# again with the highest count its consumer keeps (where Pulsar sends 0).
#
# Invariants: the counts stored with the cursor (stats, attempt log, broker-side dead letter
# and backoff policies) are never changed here, only the count written in MESSAGE frames; the
# lowering lives in memory, so after a restart a consumer hands such a message back once per
# count above its maximum before it reaches the application again; the per-consumer record
# of sends holds only sends of the last HAND_BACK_WINDOW_S once it grows past PRUNE_AT.
from __future__ import annotations

import time
from typing import Protocol

HAND_BACK_WINDOW_S = 0.1
EXCLUSIVE, FAILOVER = 0, 2
HAND_BACK_TYPES = frozenset((EXCLUSIVE, FAILOVER))
PRUNE_AT = 1024


class Sender(Protocol):
    """A consumer, as this rule sees it: when each recounted message was sent to it."""

    recounted_sends: dict[int, float]


def note_sent(consumer: Sender, entry_id: int) -> None:
    """`entry_id` was just sent to `consumer` with a count above 0."""
    sends = consumer.recounted_sends
    now = time.monotonic()
    if len(sends) >= PRUNE_AT:
        horizon = now - HAND_BACK_WINDOW_S
        consumer.recounted_sends = sends = {e: t for e, t in sends.items() if t >= horizon}
    sends[entry_id] = now


class HandBacks:
    """One subscription's lowering of the counts its handed-back messages are sent with."""

    __slots__ = ("lowered",)

    def __init__(self) -> None:
        self.lowered: dict[int, int] = {}

    def count_to_send(self, stored: int, entry_id: int) -> int:
        """The count to write in the MESSAGE frame of `entry_id`, whose stored count is `stored`."""
        if not self.lowered:
            return stored
        return max(0, stored - self.lowered.get(entry_id, 0))

    def sort(self, consumer: Sender, entry_ids: list[int]) -> tuple[list[int], list[int]]:
        """Split the messages a redeliver-all took off `consumer` into those that count as a
        delivery and those handed back unseen (their counts to send lowered by one)."""
        sends = consumer.recounted_sends
        if not sends:
            return entry_ids, []
        consumer.recounted_sends = {}
        horizon = time.monotonic() - HAND_BACK_WINDOW_S
        counted: list[int] = []
        back: list[int] = []
        for eid in entry_ids:
            sent = sends.get(eid)
            if sent is not None and sent >= horizon:
                back.append(eid)
                self.lowered[eid] = self.lowered.get(eid, 0) + 1
            else:
                counted.append(eid)
        return counted, back

    def forget(self, entry_id: int) -> None:
        """`entry_id` left the subscription (acknowledged or moved)."""
        if self.lowered:
            self.lowered.pop(entry_id, None)

    def forget_through(self, entry_id: int) -> None:
        """Every entry up to `entry_id` was acknowledged (a cumulative ack)."""
        if self.lowered:
            self.lowered = {e: n for e, n in self.lowered.items() if e > entry_id}

    def reset(self) -> None:
        self.lowered.clear()
