# What a published message really holds, checked against what its SEND and
# metadata claim, before anything is stored. A client's counts and sizes are
# never trusted:
#   * num_messages (SEND) and num_messages_in_batch (metadata) must agree and
#     equal the messages in the payload: 1 outside a batch, the number of
#     entries walked in the (decompressed) batch payload otherwise;
#   * the declared uncompressed size may not exceed max_message_size, and the
#     payload must expand to exactly that size (compression.decompress never
#     allocates more than the limit).
# Payloads that cannot be opened by the broker (encrypted, or one chunk of a
# chunked message) are checked on their metadata only. One uncompressed message
# (no batch) is decided from its metadata alone: its payload is the message. Pure: bytes in, a count
# or InvalidMessage out; callers decide where to run it (large payloads off the
# event loop).
from __future__ import annotations

from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol.batch import count_batch_entries
from letterbox.protocol.compression import (
    NONE,
    CompressionError,
    codec_name,
    declared_size,
    decompress,
)
from letterbox.protocol.framing import MalformedFrame, parse_send_payload

# the smallest batch entry: a 4-byte size and a SingleMessageMetadata holding
# its required payload_size (2 bytes)
MIN_BATCH_ENTRY = 6
UNKNOWN_SIZE = 1 << 62


class InvalidMessage(ValueError):
    """A published message whose counts or sizes do not hold; the text names the field."""


def is_chunk(meta: pb.MessageMetadata) -> bool:
    return meta.HasField("chunk_id") or meta.num_chunks_from_msg > 1


def opaque(meta: pb.MessageMetadata) -> bool:
    """The broker cannot look inside: encrypted, or one chunk of a larger message."""
    return len(meta.encryption_keys) > 0 or is_chunk(meta)


def claimed_count(num_messages: int | None, meta: pb.MessageMetadata, max_size: int) -> int:
    """The message count the SEND and the metadata agree on (no payload read)."""
    if num_messages is not None and num_messages < 1:
        raise InvalidMessage(f"num_messages must be at least 1, got {num_messages}")
    if not meta.HasField("num_messages_in_batch"):
        if num_messages is not None and num_messages != 1:
            raise InvalidMessage(
                f"num_messages is {num_messages} but the message is not a batch "
                "(no num_messages_in_batch in its metadata), so it holds 1 message"
            )
        return 1
    in_batch = meta.num_messages_in_batch
    if in_batch < 1:
        raise InvalidMessage(f"num_messages_in_batch must be at least 1, got {in_batch}")
    if num_messages is not None and num_messages != in_batch:
        raise InvalidMessage(
            f"num_messages {num_messages} does not match num_messages_in_batch {in_batch} of the message metadata"
        )
    if in_batch > max_size // MIN_BATCH_ENTRY:
        raise InvalidMessage(
            f"num_messages_in_batch {in_batch} cannot fit in a message of at most {max_size} bytes"
        )
    return in_batch


def needs_expanding(meta: pb.MessageMetadata) -> int:
    """Bytes the check will decompress: 0 when it reads the payload as is, the
    declared size, or UNKNOWN_SIZE for a compressed payload that declares none."""
    if meta.compression == NONE or opaque(meta):
        return 0
    declared = declared_size(meta)
    return declared if declared is not None else UNKNOWN_SIZE


def check_message(
    num_messages: int | None, meta: pb.MessageMetadata, payload: bytes | memoryview, max_size: int
) -> int:
    """The number of messages `payload` holds, or InvalidMessage saying what is wrong."""
    if (
        meta.compression == NONE
        and (num_messages is None or num_messages == 1)
        and not meta.HasField("num_messages_in_batch")
        and (not meta.HasField("uncompressed_size") or meta.uncompressed_size <= max_size)
    ):
        # one uncompressed message whose counts agree: nothing to expand or walk
        return 1
    count = claimed_count(num_messages, meta, max_size)
    declared = declared_size(meta)
    if declared is not None and declared > max_size and not is_chunk(meta):
        raise InvalidMessage(
            f"uncompressed_size {declared} exceeds the maximum message size of {max_size} bytes"
        )
    if opaque(meta):
        return count
    try:
        raw = payload if meta.compression == NONE else decompress(meta.compression, bytes(payload), declared, max_size)
    except CompressionError as exc:
        raise InvalidMessage(f"payload ({codec_name(meta.compression)}, uncompressed_size): {exc}") from None
    if meta.HasField("num_messages_in_batch"):
        try:
            count_batch_entries(raw, count)
        except MalformedFrame as exc:
            raise InvalidMessage(f"num_messages {count} does not match the payload: {exc}") from None
    return count


def chunk_id_of(headers_and_payload: bytes) -> int | None:
    """The chunk id of a SEND that is one chunk of a larger message; None for a whole message
    (or one whose metadata cannot be read: the publish path refuses it elsewhere)."""
    try:
        meta = parse_send_payload(headers_and_payload)[0]
    except MalformedFrame:
        return None
    return meta.chunk_id if meta.HasField("chunk_id") and meta.num_chunks_from_msg > 1 else None
