# Failure groups: the fingerprint of a dead letter. Two dead letters belong to
# the same group when they died for the same reason (DEAD_LETTER_REASON), with
# the same error class (FAILURE_ERROR_CLASS, "" when absent) and the same error
# text once what varies between occurrences is normalised away (`pattern`):
# quoted values, UUIDs, hexadecimal ids and numbers. The text is the client's
# (FAILURE_DESCRIPTION), else the dead-letter description (DEAD_LETTER_DESCRIPTION).
# Pure: no I/O. The broker's groups view and group filters, the CLI and Spark's DLQ
# report all call `fingerprint`, so a group has one id everywhere.
# Invariants: a fingerprint is FINGERPRINT_CHARS lowercase hex characters; the same
# (reason, class, pattern) always gives the same one; a pattern is at most
# MAX_PATTERN_CHARS characters and single-spaced.
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from letterbox.message_properties import (
    DEAD_LETTER_DESCRIPTION,
    DEAD_LETTER_REASON,
    FAILURE_DESCRIPTION,
    FAILURE_ERROR_CLASS,
)

FINGERPRINT_CHARS = 16
MAX_PATTERN_CHARS = 200
NO_REASON = "unspecified"
FINGERPRINT = re.compile(f"[0-9a-f]{{{FINGERPRINT_CHARS}}}")

# order matters: quoted values first (they may hold anything), then ids, then numbers
_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|`[^`]*`")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\b")
_HEX_PREFIXED = re.compile(r"\b0[xX][0-9a-fA-F]+\b")
# a run of 8+ hex digits holding at least one digit and one letter (a hash, an object id)
_HEX_ID = re.compile(r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b")
_NUMBER = re.compile(r"(?:(?<![\w])[-+])?\d+(?:[.,:]\d+)*")
_SPACE = re.compile(r"\s+")


def pattern(text: str | None) -> str:
    """The error text with quoted values, UUIDs, hex ids and numbers replaced by <q>,
    <uuid>, <hex> and <n>, whitespace collapsed, clipped to MAX_PATTERN_CHARS."""
    if not text:
        return ""
    out = _QUOTED.sub("<q>", text)
    out = _UUID.sub("<uuid>", out)
    out = _HEX_PREFIXED.sub("<hex>", out)
    out = _HEX_ID.sub("<hex>", out)
    out = _NUMBER.sub("<n>", out)
    out = _SPACE.sub(" ", out).strip()
    return out[:MAX_PATTERN_CHARS]


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """What a dead letter's group is made of, and its id."""

    reason: str
    error_class: str
    pattern: str

    @property
    def fingerprint(self) -> str:
        raw = "\x1f".join((self.reason, self.error_class, self.pattern)).encode()
        return hashlib.sha256(raw).hexdigest()[:FINGERPRINT_CHARS]


def error_text(props: Mapping[str, str]) -> str:
    """The text a group is built from: FAILURE_DESCRIPTION, else DEAD_LETTER_DESCRIPTION."""
    return props.get(FAILURE_DESCRIPTION) or props.get(DEAD_LETTER_DESCRIPTION) or ""


def failure_group(props: Mapping[str, str]) -> FailureGroup:
    """The group of a dead letter, from its properties."""
    return FailureGroup(
        reason=props.get(DEAD_LETTER_REASON) or NO_REASON,
        error_class=props.get(FAILURE_ERROR_CLASS) or "",
        pattern=pattern(error_text(props)),
    )


def fingerprint(props: Mapping[str, str]) -> str:
    """The fingerprint (group id) of a dead letter, from its properties."""
    return failure_group(props).fingerprint
