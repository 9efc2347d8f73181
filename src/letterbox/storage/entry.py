# Entry: one stored ledger entry as returned by reads.
# Invariants: `data` is the opaque Pulsar "headers and payload" bytes, returned exactly as
# appended; num_messages >= 1 (batch size); publish_time is ms since the epoch.
from __future__ import annotations

from dataclasses import dataclass

from .position import Position


@dataclass(slots=True)
class Entry:
    position: Position
    data: bytes
    num_messages: int
    publish_time: int

    @property
    def entry_id(self) -> int:
        return self.position.entry_id
