# The pure-Python reference of the compiled SEND ingress (_send_codec.decode_send): one SEND
# frame's command fields, its bytes, and -- when the message is surely accepted -- the facts the
# broker publishes it with, so handle_send needs no MessageMetadata object. Built from the
# protobuf path itself (send_decoder, parse_send_payload, check_message), so it is the contract;
# the C version may answer "no facts" (None) more often, never differently. The parity tests in
# tests/protocol run both on real, built and mutated frames.
#
# Invariants:
#   * None: the command is not of send_decoder's common shape, or the frame has no payload;
#   * facts (count, publish_time, deliver_at_time | None, payload length) only for a SEND the
#     Python path accepts with those values for EVERY max_message_size >= the payload length:
#     checksum verified (or absent), no compression, encryption or chunk, counts that agree;
#   * the command and headers_and_payload bytes are copies of the frame's, as they came.
from __future__ import annotations

import struct

from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol.framing import MalformedFrame, SendFacts, SendScan, parse_send_payload
from letterbox.protocol.message_check import InvalidMessage, check_message, opaque
from letterbox.protocol.send_decoder import decode_send_command

__all__ = ["SendFacts", "SendScan", "decode_send", "send_facts", "split_sends"]


def send_facts(num_messages: int | None, hp: bytes) -> SendFacts | None:
    """What handle_send publishes `hp` with, or None when the full path must decide."""
    try:
        meta, payload, checksum_ok = parse_send_payload(hp)
    except MalformedFrame:
        return None
    if not checksum_ok or meta.compression != pb.CompressionType.NONE or opaque(meta):
        return None
    size = len(payload)
    try:  # the smallest limit the broker may have: what holds here holds for any larger one
        count = check_message(num_messages, meta, payload, size)
    except InvalidMessage:
        return None
    deliver_at = meta.deliver_at_time if meta.HasField("deliver_at_time") else None
    return count, meta.publish_time, deliver_at, size


def decode_send(buf: bytes | bytearray, start: int, cmd_end: int, end: int) -> SendScan | None:
    """The SEND frame whose BaseCommand is buf[start:cmd_end] and payload buf[cmd_end:end]."""
    if not 0 <= start <= cmd_end <= end <= len(buf):
        raise ValueError("decode_send: need 0 <= start <= cmd_end <= end <= len(buf)")
    raw = bytes(buf[start:cmd_end])
    send = decode_send_command(raw)
    if send is None or cmd_end == end:
        return None
    hp = bytes(buf[cmd_end:end])
    return (send.producer_id, send.sequence_id, send.num_messages, send.highest_sequence_id, raw, hp,
            send_facts(send.num_messages, hp))


def split_sends(buf: bytes | bytearray, pos: int, max_frame: int) -> tuple[list[SendScan], int]:
    """The run of complete SEND frames of the common shape (with a payload) from `pos` on, each
    as decode_send reads it, and the position after them. Stops at the first frame that is
    incomplete, out of size bounds or anything else: FrameDecoder reads (or refuses) that one."""
    if not 0 <= pos <= len(buf):
        raise ValueError("split_sends: need 0 <= pos <= len(buf)")
    items: list[SendScan] = []
    n = len(buf)
    while n - pos >= 8:
        total, cmd_size = struct.unpack_from(">II", buf, pos)
        if (total > max_frame or total < 4 or total > n - pos - 4 or cmd_size > total - 4 or cmd_size <= 3
                or buf[pos + 8] != 0x08 or buf[pos + 9] != pb.BaseCommand.SEND):
            break
        item = decode_send(buf, pos + 8, pos + 8 + cmd_size, pos + 4 + total)
        if item is None:
            break
        items.append(item)
        pos += 4 + total
    return items, pos
