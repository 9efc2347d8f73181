"""Failure groups' fingerprint (letterbox.failure.fingerprint): what varies between two
occurrences of one failure is normalised away, what tells two failures apart is kept."""
from __future__ import annotations

import pytest

from letterbox.failure.fingerprint import (
    FINGERPRINT,
    FailureGroup,
    failure_group,
    fingerprint,
    pattern,
)
from letterbox.message_properties import (
    DEAD_LETTER_DESCRIPTION,
    DEAD_LETTER_REASON,
    FAILURE_DESCRIPTION,
    FAILURE_ERROR_CLASS,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("order 12345 failed", "order <n> failed"),
    ("order 7 failed", "order <n> failed"),
    ("amount -3.75 below 0", "amount <n> below <n>"),
    ("Timeout after 30.5s talking to db-7", "Timeout after <n>s talking to db-<n>"),
    ("at 2026-11-28 22:08:19", "at <n>-<n>-<n> <n>"),
    ("column \"email\" is null", "column <q> is null"),
    ("column 'phone' is null", "column <q> is null"),
    ("KeyError: 'user_id'", "KeyError: <q>"),
    ("value `x = 1` rejected", "value <q> rejected"),
    ('escaped "a \\" b" end', "escaped <q> end"),
    ("request 550e8400-e29b-41d4-a716-446655440000 failed", "request <uuid> failed"),
    ("request 550E8400E29B41D4A716446655440000 failed", "request <uuid> failed"),
    ("object 0xDEADBEEF freed", "object <hex> freed"),
    ("commit 5f3a9c2e1b7d missing", "commit <hex> missing"),
    ("mongo id 64b7f0c2a1e4d3b2c1a09f87", "mongo id <hex>"),
    ("deadbeef is a word of letters only", "deadbeef is a word of letters only"),
    ("  many   spaces\n\tand lines  ", "many spaces and lines"),
    ("", ""),
    (None, ""),
])
def test_pattern_normalises_what_varies(text: str | None, expected: str) -> None:
    assert pattern(text) == expected


def test_pattern_is_clipped() -> None:
    assert len(pattern("word " * 500)) == 200


def test_occurrences_of_one_failure_share_a_fingerprint() -> None:
    a = {DEAD_LETTER_REASON: "max-redeliveries", FAILURE_ERROR_CLASS: "db.Timeout",
         FAILURE_DESCRIPTION: "timeout after 30s on shard 4 (request 550e8400-e29b-41d4-a716-446655440000)"}
    b = {DEAD_LETTER_REASON: "max-redeliveries", FAILURE_ERROR_CLASS: "db.Timeout",
         FAILURE_DESCRIPTION: "timeout after 12s on shard 9 (request 6ba7b810-9dad-11d1-80b4-00c04fd430c8)"}
    assert fingerprint(a) == fingerprint(b)
    assert FINGERPRINT.fullmatch(fingerprint(a))


@pytest.mark.parametrize("change", [
    {DEAD_LETTER_REASON: "terminated"},
    {FAILURE_ERROR_CLASS: "ValueError"},
    {FAILURE_DESCRIPTION: "schema mismatch on field 3"},
])
def test_reason_class_and_text_each_tell_groups_apart(change: dict[str, str]) -> None:
    base = {DEAD_LETTER_REASON: "max-redeliveries", FAILURE_ERROR_CLASS: "KeyError",
            FAILURE_DESCRIPTION: "missing key 'id' in record 5"}
    assert fingerprint({**base, **change}) != fingerprint(base)


def test_absent_values_default() -> None:
    assert failure_group({}) == FailureGroup("unspecified", "", "")
    assert failure_group({DEAD_LETTER_DESCRIPTION: "bad row 5"}).pattern == "bad row <n>"
    # the client's text wins over the dead-letter description
    props = {DEAD_LETTER_DESCRIPTION: "bad row 5", FAILURE_DESCRIPTION: "parse error at 9"}
    assert failure_group(props).pattern == "parse error at <n>"
    # an empty error class is the same as none
    assert fingerprint({FAILURE_ERROR_CLASS: ""}) == fingerprint({})
