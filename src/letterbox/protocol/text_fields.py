# Text fields whose bytes are not UTF-8. The wire's `string` fields are proto2
# strings, which protobuf (upb) parses without checking: a field holding bytes
# that are not UTF-8 reads back as `bytes`, not `str`. This module owns the two
# answers to that:
#   * at the door (`invalid_text_field`): the dotted name of the first string
#     field of a command, nested messages included, whose bytes are not UTF-8,
#     so the broker refuses a name it would keep or show before it keeps it;
#   * in the views (`as_text`, `as_key_bytes`): a message's own metadata (key,
#     properties, producer name) is stored byte-exact as Pulsar does, so what
#     reads it turns such bytes into text with \xNN escapes, or uses them raw.
# Invariants: pure, no I/O; the walk only descends into fields that can hold a
# string (worked out once per message type), so commands without strings cost
# one dictionary lookup.
from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE


@cache
def _text_fields(descriptor: Descriptor) -> frozenset[str]:
    """The names of the fields of this message type that are strings or messages
    containing strings."""
    out: set[str] = set()
    for f in descriptor.fields:
        if f.type == _STRING or (f.type == _MESSAGE and f.message_type is not descriptor
                                 and _text_fields(f.message_type)):
            out.add(f.name)
    return frozenset(out)


def invalid_text_field(message: Message, prefix: str = "") -> str | None:
    """The name of the first string field (`subscribe.metadata[1].key` in a nested
    message) whose bytes are not UTF-8, or None when every string field is text.
    Only the fields that are set are looked at (ListFields)."""
    names = _text_fields(message.DESCRIPTOR)
    if not names:
        return None
    for f, value in message.ListFields():
        if f.name not in names:
            continue
        repeated = f.is_repeated
        items: Any = value if repeated else (value,)
        for i, item in enumerate(items):
            where = f"{prefix}{f.name}[{i}]" if repeated else prefix + f.name
            if f.type == _STRING:
                if isinstance(item, bytes):
                    return where
            else:
                found = invalid_text_field(item, where + ".")
                if found is not None:
                    return found
    return None


def as_text(value: str | bytes) -> str:
    """A string field's value as text: bytes that are not UTF-8 written as \\xNN escapes."""
    return value if isinstance(value, str) else value.decode("utf-8", "backslashreplace")


def as_key_bytes(value: str | bytes) -> bytes:
    """A string field's value as the bytes that were sent (a key's hash, a byte search)."""
    return value if isinstance(value, bytes) else value.encode()


def text_dict(pairs: Any) -> dict[str, str]:
    """Repeated KeyValue as a dict of text (as_text of each key and value)."""
    return {as_text(kv.key): as_text(kv.value) for kv in pairs}


def raw_string_field(number: int, value: str | bytes) -> bytes:
    """One length-delimited field as the wire has it: how a value that is not UTF-8 is
    written back byte-exact (the API refuses such bytes in a string field); appended to
    a serialized message, repeated fields add to what is there."""
    data = as_key_bytes(value)
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def raw_key_value(number: int, key: str | bytes, value: str | bytes) -> bytes:
    """A KeyValue (key = 1, value = 2) in the repeated field `number`, byte-exact."""
    return raw_string_field(number, raw_string_field(1, key) + raw_string_field(2, value))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)
