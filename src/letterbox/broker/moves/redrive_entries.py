# The two halves of moving a dead letter out of its DLQ, shared by redrive and
# purge (redrive.py): the entry a redriven message becomes (a fresh message:
# payload, key, ordering key, event time, schema version, the user's properties
# and its origin; no dead-letter or retry stamps; with an edit (failure.edits) its new payload
# and properties and EDIT_LOG naming who, when and the old payload's hash), and the "handled" marks on
# the DLQ's internal cursor (per entry, or per batch index), recorded in the
# caller's transaction.
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from letterbox.broker.moves.dead_letters import handled_subscription
from letterbox.errors import NotAllowed
from letterbox.failure import REDRIVE_REMOVES, redriven_properties
from letterbox.failure.edits import MessageEdit, edit_log, edited_payload, edited_properties
from letterbox.message_properties import EDIT_LOG
from letterbox.protocol import build_headers_and_payload, pb
from letterbox.protocol.text_fields import as_text, raw_key_value, raw_string_field
from letterbox.storage.managed_cursor import ManagedCursor

if TYPE_CHECKING:
    from letterbox.broker.moves.dead_letters import DeadLetter
    from letterbox.broker.moves.move_ends import MovedTopic
    from letterbox.broker.moves.move_transaction import MoveTransaction


_PROPERTIES = pb.MessageMetadata.DESCRIPTOR.fields_by_name["properties"].number
_PARTITION_KEY = pb.MessageMetadata.DESCRIPTOR.fields_by_name["partition_key"].number


class Position(Protocol):
    """Where a dead letter is in its DLQ (a DeadLetter, or a Mark kept instead of it)."""

    @property
    def entry_id(self) -> int: ...

    @property
    def batch_index(self) -> int: ...

    @property
    def batch_size(self) -> int: ...


class Mark(NamedTuple):
    """A dead letter's position alone (a purge keeps these, not the messages)."""

    entry_id: int
    batch_index: int  # -1 outside a batch
    batch_size: int


def handled_cursor(topic: MovedTopic) -> ManagedCursor:
    """The DLQ's internal cursor of handled marks (created on first use)."""
    sub = handled_subscription(topic, create=True)
    assert sub is not None
    if not isinstance(sub.cursor, ManagedCursor):
        raise NotAllowed(f"subscription {sub.name} of {topic.name} is not durable")
    return sub.cursor


def redriven_entry(dl: DeadLetter, producer_name: str, sequence_id: int, now: int,
                   schema: Callable[[bytes], bytes | None] | None = None,
                   edit: MessageEdit | None = None, editor: str | None = None) -> bytes:
    """`schema`: the target's schema version for the DLQ's (a SchemaCarry); None keeps it.
    `edit`: the change to make (by role `editor`); EditError when it does not apply to `dl`."""
    meta = pb.MessageMetadata(producer_name=producer_name, sequence_id=sequence_id, publish_time=now)
    raw = b""  # a key or properties that are not UTF-8, appended as they were stored
    escaped = {as_text(k) for k, _ in dl.raw_properties}
    props = redriven_properties(dl.properties)
    payload = dl.payload
    if edit is not None:
        payload = edited_payload(dl.payload, edit, dl.message_id)
        props = edited_properties(props, edit)
        props[EDIT_LOG] = edit_log(dl.properties.get(EDIT_LOG), by=editor, at_ms=now, old=dl.payload, new=payload,
                                   original=dl.message_id, edit=edit)
        escaped -= set(edit.set_properties) | {EDIT_LOG}  # set anew: written as text
    for k, v in props.items():
        if k not in escaped:
            meta.properties.add(key=k, value=v)
    touched = set(edit.set_properties) | edit.remove_properties if edit is not None else set()
    for raw_k, raw_v in dl.raw_properties:
        key = as_text(raw_k)
        if key not in REDRIVE_REMOVES and key not in touched and key != EDIT_LOG:  # (stamps are text)
            raw += raw_key_value(_PROPERTIES, raw_k, raw_v)
    if dl.raw_key is not None:
        raw += raw_string_field(_PARTITION_KEY, dl.raw_key)
        if dl.key_b64:
            meta.partition_key_b64_encoded = True
    elif dl.key is not None:
        meta.partition_key = dl.key
        if dl.key_b64:
            meta.partition_key_b64_encoded = True
    if dl.ordering_key is not None:
        meta.ordering_key = dl.ordering_key
    if dl.event_time:
        meta.event_time = dl.event_time
    if dl.null_value:
        meta.null_value = True
    version = dl.schema_version
    if version is not None and schema is not None:
        version = schema(version)
    if version is not None:
        meta.schema_version = version
    return build_headers_and_payload(meta.SerializeToString() + raw if raw else meta, payload)


def mark_handled(move: MoveTransaction, cursor: ManagedCursor, chunk: Sequence[Position]) -> None:
    plain = [dl.entry_id for dl in chunk if dl.batch_index < 0]
    if plain:
        move.ack(cursor, plain)
    masks: dict[int, tuple[int, int]] = {}
    for dl in chunk:
        if dl.batch_index >= 0:
            size, mask = masks.get(dl.entry_id, (dl.batch_size, 0))
            masks[dl.entry_id] = (size, mask | 1 << dl.batch_index)
    for eid, (size, mask) in masks.items():
        move.ack_batch_mask(cursor, eid, size, mask)
