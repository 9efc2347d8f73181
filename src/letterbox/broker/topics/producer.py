# A Producer is one client producer on one connection, attached to a topic.
# It remembers the highest sequence id it has pushed (for deduplication) and
# chains its receipts so they leave in send order even when some SENDs are
# answered without touching storage (duplicates). It sees its topic as ProducerTopic
# (topic.Topic meets it); the publish path narrows it to the topic it is.
from __future__ import annotations

import asyncio
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
