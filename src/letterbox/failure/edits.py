# Edit-and-replay: the change a redrive makes to a dead letter on its way back, and the record
# it leaves. A MessageEdit replaces the payload (bytes) or patches a JSON payload (an RFC 6902
# JSON patch, applied by the `jsonpatch` library), and sets or removes user properties.
# Every edited message carries EDIT_LOG: a JSON list of its edits, oldest first, each
#     {"by": role or null, "at": ms, "oldPayloadSha256", "newPayloadSha256", "original": the
#      dead letter's message id, "changes": ["payload" | "jsonPatch:N", "set:K", "removed:K"...]}
# kept by every later move and redrive (so the original's hash stays with the message, and the
# original itself stays readable in its DLQ's ledger by that id); edit_attempts turns the log
# into attempt-log entries with the ending `edited`.
# Pure: no I/O. Invariants: an edit never sets or removes a failure stamp (stamps.FAILURE_KEYS,
# EDIT_LOG among them) -- check_edit refuses it; a JSON patch result is written as compact
# UTF-8 JSON; EDIT_LOG keeps at most MAX_EDITS records, the newest.
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from letterbox.failure.attempts import Attempt
from letterbox.failure.errors import PolicyError
from letterbox.failure.stamps import FAILURE_KEYS
from letterbox.message_properties import EDIT_LOG

EDITED = "edited"  # the attempt-log ending of an edit
MAX_EDITS = 20
MAX_PATCH_OPERATIONS = 1000
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class EditError(PolicyError):
    """An edit that cannot be made: what is wrong, naming the field or the message."""


@dataclass(frozen=True)
class MessageEdit:
    payload: bytes | None = None  # the new payload, as is
    json_patch: tuple[Mapping[str, Any], ...] | None = None  # RFC 6902 operations on a JSON payload
    set_properties: Mapping[str, str] = field(default_factory=dict)
    remove_properties: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """The edit as plain JSON (a redrive task's record; edit_of reads it back)."""
        import base64

        return {
            "payloadBase64": base64.b64encode(self.payload).decode() if self.payload is not None else None,
            "jsonPatch": list(self.json_patch) if self.json_patch is not None else None,
            "setProperties": dict(self.set_properties), "removeProperties": sorted(self.remove_properties),
        }

    def changes(self) -> list[str]:
        out = ["payload"] if self.payload is not None else []
        if self.json_patch is not None:
            out.append(f"jsonPatch:{len(self.json_patch)}")
        out += [f"set:{k}" for k in sorted(self.set_properties)]
        out += [f"removed:{k}" for k in sorted(self.remove_properties)]
        return out


EDIT_FIELDS = ("payloadBase64", "jsonPatch", "setProperties", "removeProperties")


def edit_of(doc: Any) -> MessageEdit:
    """A MessageEdit from its JSON form (MessageEdit.to_json, the REST `edit` field), checked
    (check_edit); EditError naming the field that is wrong."""
    import base64
    import binascii

    if not isinstance(doc, Mapping):
        raise EditError(f"edit must be an object with some of {list(EDIT_FIELDS)}")
    unknown = sorted(set(doc) - set(EDIT_FIELDS))
    if unknown:
        raise EditError(f"edit: unknown field(s) {unknown}; known: {list(EDIT_FIELDS)}")
    payload = None
    if doc.get("payloadBase64") is not None:
        try:
            payload = base64.b64decode(str(doc["payloadBase64"]), validate=True)
        except (binascii.Error, ValueError):
            raise EditError("edit.payloadBase64 is not base64") from None
    patch = doc.get("jsonPatch")
    if patch is not None and not isinstance(patch, list):
        raise EditError("edit.jsonPatch must be a list of RFC 6902 operations")
    sets = doc.get("setProperties") or {}
    if not isinstance(sets, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sets.items()):
        raise EditError("edit.setProperties must be an object of string values")
    removes = doc.get("removeProperties") or []
    if not isinstance(removes, list) or not all(isinstance(k, str) for k in removes):
        raise EditError("edit.removeProperties must be a list of property names")
    return check_edit(MessageEdit(payload, tuple(patch) if patch is not None else None, dict(sets),
                                  frozenset(removes)))


def check_edit(edit: MessageEdit) -> MessageEdit:
    """The edit itself is sound (EditError naming the field otherwise): one payload change at
    most, a patch of operations, no failure stamp touched, something to change."""
    if edit.payload is not None and edit.json_patch is not None:
        raise EditError("edit: give payloadBase64 or jsonPatch, not both")
    if edit.json_patch is not None:
        if not 1 <= len(edit.json_patch) <= MAX_PATCH_OPERATIONS:
            raise EditError(f"edit.jsonPatch must hold 1 to {MAX_PATCH_OPERATIONS} operations")
        for i, op in enumerate(edit.json_patch):
            if not isinstance(op, Mapping) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
                raise EditError(f"edit.jsonPatch[{i}] must be an object with \"op\" and \"path\" (RFC 6902)")
    for name, keys in (("setProperties", set(edit.set_properties)), ("removeProperties", set(edit.remove_properties))):
        stamps = sorted(keys & FAILURE_KEYS)
        if stamps:
            raise EditError(f"edit.{name} may not touch letterbox's failure stamps {stamps}: a redrive "
                            "sets them itself")
    both = sorted(set(edit.set_properties) & edit.remove_properties)
    if both:
        raise EditError(f"edit: {both} both set and removed")
    if not edit.changes():
        raise EditError("edit changes nothing: give payloadBase64, jsonPatch, setProperties or removeProperties")
    return edit


def edited_payload(payload: bytes, edit: MessageEdit, message_id: str) -> bytes:
    """The payload after the edit; EditError naming the message when a patch cannot apply."""
    if edit.payload is not None:
        return edit.payload
    if edit.json_patch is None:
        return payload
    import jsonpatch

    try:
        doc = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise EditError(f"edit.jsonPatch: dead letter {message_id} has no JSON payload ({exc})") from None
    try:
        patched = jsonpatch.apply_patch(doc, [dict(op) for op in edit.json_patch])
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, ValueError) as exc:
        raise EditError(f"edit.jsonPatch does not apply to dead letter {message_id}: {exc}") from None
    return _compact(patched).encode()


def edited_properties(props: Mapping[str, str], edit: MessageEdit) -> dict[str, str]:
    out = {k: v for k, v in props.items() if k not in edit.remove_properties}
    out.update(edit.set_properties)
    return out


def edit_log(existing: str | None, *, by: str | None, at_ms: int, old: bytes, new: bytes,
             original: str, edit: MessageEdit) -> str:
    """EDIT_LOG with this edit appended (the newest MAX_EDITS kept)."""
    records = parse_edit_log(existing)
    records.append({
        "by": by, "at": at_ms, "oldPayloadSha256": hashlib.sha256(old).hexdigest(),
        "newPayloadSha256": hashlib.sha256(new).hexdigest(), "original": original, "changes": edit.changes(),
    })
    return _compact(records[-MAX_EDITS:])


def parse_edit_log(raw: str | None) -> list[dict[str, Any]]:
    """EDIT_LOG's records; an absent or unreadable log is empty (a producer may write anything)."""
    if not raw:
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    return [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []


def edit_attempts(props: Mapping[str, str]) -> list[Attempt]:
    """A message's edits as attempt-log entries: ending `edited`, consumer the role that edited,
    ended at the edit's time, reason naming the old payload's sha256 and the changes."""
    out = []
    for r in parse_edit_log(props.get(EDIT_LOG)):
        changes = r.get("changes")
        what = ", ".join(str(c) for c in changes) if isinstance(changes, Sequence) else ""
        at = r.get("at")
        out.append(Attempt(0, at if isinstance(at, int) else 0, str(r["by"]) if r.get("by") else None, None,
                           EDITED, f"old payload sha256 {r.get('oldPayloadSha256')}; {what}; "
                                   f"original {r.get('original')}"))
    return out
