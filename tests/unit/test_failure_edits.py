"""The pure half of edit-and-replay (letterbox.failure.edits): parsing an edit, applying it, the
EDIT_LOG it leaves and the attempt-log entries read from it."""
from __future__ import annotations

import hashlib
import json

import pytest

from letterbox.failure.edits import (
    EDITED,
    MAX_EDITS,
    EditError,
    MessageEdit,
    edit_attempts,
    edit_log,
    edit_of,
    edited_payload,
    edited_properties,
    parse_edit_log,
)
from letterbox.message_properties import EDIT_LOG


def test_edit_round_trips_through_its_json_form() -> None:
    edit = edit_of({"jsonPatch": [{"op": "remove", "path": "/a"}], "setProperties": {"k": "v"},
                    "removeProperties": ["old"]})
    assert edit_of(edit.to_json()) == edit
    raw = edit_of({"payloadBase64": "AAEC"})
    assert raw.payload == b"\x00\x01\x02" and edit_of(raw.to_json()) == raw


@pytest.mark.parametrize(("doc", "needle"), [
    ([], "must be an object"),
    ({"payload": "x"}, "unknown field"),
    ({"payloadBase64": "%%%"}, "not base64"),
    ({"jsonPatch": {"op": "add"}}, "list of RFC 6902"),
    ({"jsonPatch": []}, "1 to"),
    ({"jsonPatch": [{"op": "add"}]}, "jsonPatch[0]"),
    ({"setProperties": {"k": 1}}, "string values"),
    ({"removeProperties": "k"}, "list of property names"),
    ({"setProperties": {"DEAD_LETTER_REASON": "x"}}, "failure stamps"),
    ({"removeProperties": ["ORIGIN_MESSAGE_ID"]}, "failure stamps"),
    ({"setProperties": {"k": "v"}, "removeProperties": ["k"]}, "both set and removed"),
    ({"payloadBase64": "AA==", "jsonPatch": [{"op": "add", "path": "/a", "value": 1}]}, "not both"),
    ({}, "changes nothing"),
])
def test_bad_edits_name_what_is_wrong(doc: object, needle: str) -> None:
    with pytest.raises(EditError, match=None) as info:
        edit_of(doc)
    assert needle in str(info.value)


def test_json_patch_applies_or_names_the_message() -> None:
    edit = edit_of({"jsonPatch": [{"op": "replace", "path": "/n", "value": 2}, {"op": "add", "path": "/l/-", "value": "é"}]})
    assert edited_payload(b'{"n": 1, "l": []}', edit, "1:2:-1:-1") == '{"n":2,"l":["é"]}'.encode()
    with pytest.raises(EditError, match="1:2:-1:-1 has no JSON payload"):
        edited_payload(b"\xff", edit, "1:2:-1:-1")
    with pytest.raises(EditError, match="does not apply to dead letter 1:3:-1:-1"):
        edited_payload(b'{"x": 1}', edit, "1:3:-1:-1")
    failing_test = edit_of({"jsonPatch": [{"op": "test", "path": "/n", "value": 5}]})
    with pytest.raises(EditError, match="does not apply"):
        edited_payload(b'{"n": 1}', failing_test, "1:4:-1:-1")


def test_properties_are_set_and_removed() -> None:
    edit = MessageEdit(set_properties={"a": "new", "c": "3"}, remove_properties=frozenset({"b"}))
    assert edited_properties({"a": "old", "b": "2"}, edit) == {"a": "new", "c": "3"}


def test_edit_log_records_who_when_and_hashes_and_stays_bounded() -> None:
    edit = MessageEdit(payload=b"new")
    log = None
    for i in range(MAX_EDITS + 5):
        log = edit_log(log, by="ops", at_ms=1_000 + i, old=b"old", new=b"new", original=f"1:{i}:-1:-1", edit=edit)
    records = parse_edit_log(log)
    assert len(records) == MAX_EDITS and records[-1]["at"] == 1_000 + MAX_EDITS + 4
    assert records[0] == {"by": "ops", "at": 1_005, "oldPayloadSha256": hashlib.sha256(b"old").hexdigest(),
                          "newPayloadSha256": hashlib.sha256(b"new").hexdigest(), "original": "1:5:-1:-1",
                          "changes": ["payload"]}
    [first, *_] = edit_attempts({EDIT_LOG: log or ""})
    assert (first.ending, first.consumer, first.ended_at_ms) == (EDITED, "ops", 1_005)
    assert hashlib.sha256(b"old").hexdigest() in (first.reason or "")


@pytest.mark.parametrize("raw", [None, "", "not json", "{}", json.dumps([1, "x"])])
def test_an_unreadable_edit_log_is_empty(raw: str | None) -> None:
    assert parse_edit_log(raw) == []
    assert edit_attempts({EDIT_LOG: raw} if raw is not None else {}) == []
