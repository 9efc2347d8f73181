# A Producer is one client producer on one connection, attached to a topic.
# It remembers the highest sequence id it has pushed and judges duplicates by it
# (`pushes`: the chunks of one message share its sequence id), and it
# chains its receipts so they leave in send order even when some SENDs are
# answered without touching storage (duplicates). It sees its topic as ProducerTopic
# (topic.Topic meets it); the publish path narrows it to the topic it is.
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from letterbox.broker.topics.client_connection import ClientConnection
    from letterbox.storage.ops import WriteOp
    from letterbox.topic_name import TopicName

SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = 0, 1, 2, 3
ACCESS_MODE_NAMES = {0: "Shared", 1: "Exclusive", 2: "WaitForExclusive", 3: "ExclusiveWithFencing"}
# one reserved SEND: (entry id, sequence id, highest sequence id or None, bytes held)
Pending = tuple[int, int, "int | None", int]


class ProducerTopic(Protocol):
    @property
    def name(self) -> TopicName: ...
    @property
    def topic_epoch(self) -> int | None: ...

    def remove_producer(self, producer: Producer) -> None: ...


@dataclass(eq=False)
class Producer:
    cnx: ClientConnection
    producer_id: int
    name: str
    topic: ProducerTopic
    access_mode: int = SHARED
    user_provided_name: bool = False
    highest_sequence_pushed: int = -1
    # the sequence id of a chunked message whose resend is being dropped chunk by chunk (-1: none)
    dropping_chunks_of: int = -1
    last_receipt: asyncio.Future[object] | None = None
    # a SEND whose payload is being checked off the event loop: later SENDs of
    # this producer wait behind it so entries are stored in send order
    checking: asyncio.Future[None] | None = None
    msg_in: int = 0
    bytes_in: int = 0
    metadata: dict[str, str] = field(default_factory=dict)
    schema_version: bytes = b""  # from the schema registry; empty for a producer without a schema
    # SENDs with their entry ids reserved, not yet submitted to storage (send_batch.py)
    unsubmitted: list[Pending] = field(default_factory=list)
    unsubmitted_ops: list[WriteOp] = field(default_factory=list)  # their appends (append_run.py)
    closed: bool = False
    # the topic epoch this producer was granted (exclusive modes), sent back to the client,
    # which presents it again when it reconnects
    topic_epoch: int | None = None

    def pushes(self, seq: int, top: int, dedup: bool, chunk_id: Callable[[], int | None]) -> bool:
        """Whether a SEND of `seq` (`top`: its highest sequence id) is stored; False: a duplicate,
        receipted without storing. With deduplication a SEND at or below the highest sequence id
        pushed is a duplicate, but for the later chunks of the chunked message pushed last, which
        share its sequence id. `chunk_id()` reads the SEND's chunk id (None: a whole message); it
        is called only for a SEND at or below the highest, so whole messages are never parsed."""
        if dedup and seq <= self.highest_sequence_pushed:
            chunk = chunk_id()
            if chunk is not None and chunk > 0 and seq == self.highest_sequence_pushed \
                    and self.dropping_chunks_of != seq:
                return True  # the next chunk of the message being pushed
            if chunk is not None:
                self.dropping_chunks_of = seq  # a resent chunked message: each of its chunks goes
            return False
        if top > self.highest_sequence_pushed:
            self.highest_sequence_pushed = top
        return True
