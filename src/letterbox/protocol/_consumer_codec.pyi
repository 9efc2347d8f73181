# Stub of the compiled letterbox.protocol._consumer_codec (see its .c file); the pure-Python
# references: protocol/receipts.py (message, message_frames,
# pending_receipts), protocol/ack_decoder.py.
from collections.abc import Sequence

from letterbox.protocol.ack_decoder import AckFields

def message_frame(consumer_id: int, ledger_id: int, entry_id: int, partition: int, redelivery_count: int,
                  ack_set: Sequence[int] | None, data: bytes, /) -> bytes: ...
def message_frames(consumer_id: int, ledger_id: int, partition: int, entry_ids: Sequence[int],
                   datas: Sequence[bytes], /) -> bytes: ...
def pending_receipts(producer_id: int, ledger_id: int,
                     pending: Sequence[tuple[int, int, int | None, int]], /) -> bytes: ...
def decode_ack(raw: bytes, /) -> AckFields | None: ...
