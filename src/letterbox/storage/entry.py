# Entry: one stored ledger entry as returned by reads.
# Invariants: `data` is the opaque Pulsar "headers and payload" bytes, returned exactly as
# appended; num_messages >= 1 (batch size); publish_time is ms since the epoch.
# deliver_at_time is the metadata's delivery time as its publisher parsed it (None: the
# metadata has none), or UNREAD for an entry read back from disk: a hint that spares
# the dispatcher a metadata parse per entry, not stored and not compared.
from __future__ import annotations

from dataclasses import dataclass, field

from .position import Position

# outside int64: no metadata holds it
UNREAD = 1 << 64


@dataclass(slots=True)
class Entry:
    position: Position
    data: bytes
    num_messages: int
    publish_time: int
    deliver_at_time: int | None = field(default=UNREAD, compare=False)

    @property
    def entry_id(self) -> int:
        return self.position.entry_id
