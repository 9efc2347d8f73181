# Error classes: what a letterbox.client consumer says about the exception that
# made it nack a message, and the rules that map exception classes to what
# happens next (as job systems let a handler say "this will never succeed" or
# "retry after 30 s").
#   ErrorInfo   the exception's qualified class name, its message (clipped) and a
#               stack fingerprint: a short hash of the traceback's frames (file base
#               names and function names, no line numbers, so an edit elsewhere in a
#               file keeps it), recorded in the attempt log.
#   ErrorRule   non-retryable (dead-letter now, reason `non-retryable`), retry-after
#               (the next delivery waits that long, on the broker's clock) and a
#               per-class maximum of failed attempts; decide.py applies it.
#   match_rule  the rule for an exception, with inheritance as Python sees it on the
#               client: the class's MRO is walked and the first class named in the
#               rules (by qualified name, or by bare name for builtins) wins. The
#               client resolves it and sends the matched rule with its nack
#               announcement: the broker never sees the class hierarchy.
# Pure: no I/O (the traceback is walked through its frames, no source is read).
from __future__ import annotations

import hashlib
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from letterbox.failure.errors import PolicyError
from letterbox.failure.limits import MAX_DELAY_MS

MAX_CLASS_CHARS = 256
MAX_MESSAGE_CHARS = 1000
FINGERPRINT_CHARS = 12


@dataclass(frozen=True)
class ErrorInfo:
    error_class: str
    message: str | None
    fingerprint: str


@dataclass(frozen=True)
class ErrorRule:
    non_retryable: bool = False
    retry_after_ms: int | None = None
    max_attempts: int | None = None  # dead-letter once this many attempts failed

    def __post_init__(self) -> None:
        if not isinstance(self.non_retryable, bool):
            raise PolicyError(f"non_retryable must be True or False, got {self.non_retryable!r}")
        ms = self.retry_after_ms
        if ms is not None and (type(ms) is not int or not 1 <= ms <= MAX_DELAY_MS):
            raise PolicyError(f"retry_after must be more than 0 and at most {MAX_DELAY_MS // 1000} s, got {ms!r} ms")
        n = self.max_attempts
        if n is not None and (type(n) is not int or n < 1):
            raise PolicyError(f"max_attempts must be an integer of at least 1, got {n!r}")

    @classmethod
    def retry_after(cls, delay: timedelta | float) -> ErrorRule:
        return cls(retry_after_ms=delay_ms(delay))

    def to_json(self) -> dict[str, Any]:
        return {"nonRetryable": self.non_retryable, "retryAfterMs": self.retry_after_ms,
                "maxAttempts": self.max_attempts}

    @classmethod
    def from_json(cls, doc: Any) -> ErrorRule:
        """A rule sent by a client; PolicyError naming the field for anything malformed."""
        if not isinstance(doc, dict):
            raise PolicyError("rule must be an object {nonRetryable, retryAfterMs, maxAttempts}")
        unknown = sorted(set(doc) - {"nonRetryable", "retryAfterMs", "maxAttempts"})
        if unknown:
            raise PolicyError(f"unknown rule field(s) {', '.join(unknown)}: the fields are nonRetryable, "
                              "retryAfterMs, maxAttempts")
        return cls(doc.get("nonRetryable", False), doc.get("retryAfterMs"), doc.get("maxAttempts"))


def delay_ms(delay: timedelta | float) -> int:
    """A retry-after delay in ms (a timedelta or seconds)."""
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, bool) or not isinstance(delay, int | float):
        raise PolicyError(f"retry_after must be a timedelta or a number of seconds, got {delay!r}")
    else:
        seconds = float(delay)
    ms = round(seconds * 1000)
    if not 1 <= ms <= MAX_DELAY_MS:
        raise PolicyError(f"retry_after must be more than 0 and at most {MAX_DELAY_MS // 1000} s, got {seconds:g} s")
    return ms


def qualified_name(cls: type) -> str:
    """`module.QualName`, builtins by their bare name (`ValueError`)."""
    module = cls.__module__
    name = cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    return name[:MAX_CLASS_CHARS]


def fingerprint(exc: BaseException) -> str:
    """A short hash of the traceback's frames: file base names and function names."""
    frames = [f"{f.f_code.co_filename.replace(chr(92), '/').rsplit('/', 1)[-1]}:{f.f_code.co_name}"
              for f, _line in traceback.walk_tb(exc.__traceback__)]
    text = qualified_name(type(exc)) + "\n" + "\n".join(frames)
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]


def error_info(exc: BaseException) -> ErrorInfo:
    message = str(exc)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return ErrorInfo(qualified_name(type(exc)), message or None, fingerprint(exc))


def match_rule(exc_type: type, rules: Mapping[str, ErrorRule]) -> tuple[str, ErrorRule] | None:
    """The first class of `exc_type`'s MRO named in `rules`, and its rule."""
    if not rules:
        return None
    for cls in exc_type.__mro__:
        for name in (qualified_name(cls), f"{cls.__module__}.{cls.__qualname__}"):
            rule = rules.get(name)
            if rule is not None:
                return name, rule
    return None


def check_rules(rules: Mapping[str, ErrorRule]) -> dict[str, ErrorRule]:
    """The configured rules, checked: names are non-empty strings, values ErrorRules."""
    out = {}
    for name, rule in rules.items():
        if not isinstance(name, str) or not name.strip():
            raise PolicyError(f"error class names must be non-empty strings, got {name!r}")
        if not isinstance(rule, ErrorRule):
            raise PolicyError(f"the rule of {name} must be an ErrorRule, got {type(rule).__name__}")
        out[name.strip()] = rule
    return out
