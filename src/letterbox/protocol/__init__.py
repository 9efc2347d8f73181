# Sans-IO implementation of the Apache Pulsar binary protocol: the schema
# (pb), frame encoding/decoding, batch payloads, command builders and a
# server-side connection state machine. Nothing here does I/O or asyncio.
from letterbox.protocol import client_commands, commands
from letterbox.protocol import pulsar_api_pb2 as pb
from letterbox.protocol.batch import build_batch_payload, iter_single_messages
from letterbox.protocol.connection import ServerProtocol, State
from letterbox.protocol.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    MAGIC_BROKER_ENTRY_METADATA,
    MAGIC_CRC32C,
    Frame,
    FrameDecoder,
    FrameTooLarge,
    MalformedFrame,
    ParsedPayload,
    ProtocolError,
    UnknownCommand,
    build_headers_and_payload,
    encode_command,
    encode_payload_command,
    parse_entry,
    parse_entry_metadata,
    parse_headers_and_payload,
    parse_send_payload,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "FRAME_PADDING",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "Frame",
    "FrameDecoder",
    "FrameTooLarge",
    "MalformedFrame",
    "ParsedPayload",
    "ProtocolError",
    "ServerProtocol",
    "State",
    "UnknownCommand",
    "build_batch_payload",
    "build_headers_and_payload",
    "client_commands",
    "commands",
    "encode_command",
    "encode_payload_command",
    "iter_single_messages",
    "parse_entry",
    "parse_entry_metadata",
    "parse_headers_and_payload",
    "parse_send_payload",
    "pb",
]
