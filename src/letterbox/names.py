# The rules a name must follow: tenants, namespaces and clusters as Pulsar's
# NamedEntity allows them (ASCII letters, digits and - = : . _), local topic
# names, subscription names and roles (any printable text). No name is empty,
# longer than MAX_NAME_LENGTH, contains "/", "..", NUL or another control
# character. (Percent-encoding is a property of a URL, not of a name: the
# admin API checks it on the raw request path.)
# Pure functions: TopicName, the admin API and the CLI all ask here, so a name
# one accepts the others accept too.
from __future__ import annotations

import re
from typing import Literal

NameKind = Literal["tenant", "namespace", "cluster", "topic", "subscription", "role"]
MAX_NAME_LENGTH = 1024
_ENTITY_RE = re.compile(r"^[-=:.\w]+$", re.ASCII)
_ENTITY_KINDS = ("tenant", "namespace", "cluster")


def _control_char(value: str) -> str | None:
    for ch in value:
        if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            return ch
    return None


def name_problem(kind: NameKind, value: str) -> str | None:
    """Why `value` is not a valid name of this kind, or None when it is."""
    if not isinstance(value, str) or not value:
        return f"{kind} name is empty"
    if len(value) > MAX_NAME_LENGTH:
        return f"{kind} name is longer than {MAX_NAME_LENGTH} characters"
    bad = _control_char(value)
    if bad is not None:
        return f"{kind} name {value!r} contains the control character {bad!r}"
    if "/" in value:
        return f"{kind} name {value!r} contains '/'"
    if ".." in value:
        return f"{kind} name {value!r} contains '..'"
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        return f"{kind} name {value!r} is not valid Unicode text"
    if kind in _ENTITY_KINDS and not _ENTITY_RE.match(value):
        return f"{kind} name {value!r} may only contain letters, digits and - = : . _"
    if value.strip() != value:
        return f"{kind} name {value!r} starts or ends with white space"
    return None
