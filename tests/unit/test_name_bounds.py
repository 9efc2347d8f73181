"""Bounds on what a client's names cost in stored rows and dead-letter stamps."""
from __future__ import annotations

import json

from letterbox.failure.attempts import (
    MAX_ATTEMPTS_STAMP_BYTES,
    MAX_NAME_CHARS,
    MAX_REASON_CHARS,
    Attempt,
    clip_name,
)
from letterbox.failure.stamps import dead_letter_stamps
from letterbox.message_properties import DEAD_LETTER_DESCRIPTION, DELIVERY_ATTEMPTS


def test_a_long_consumer_name_is_clipped() -> None:
    assert clip_name(None) is None
    assert clip_name("c" * MAX_NAME_CHARS) == "c" * MAX_NAME_CHARS
    clipped = clip_name("c" * 5_000_000)
    assert clipped is not None and len(clipped) == MAX_NAME_CHARS and clipped.endswith("…")


def test_dead_letter_stamps_stay_small_whatever_the_client_sent() -> None:
    attempts = [Attempt(1, 2, clip_name("n" * 5_000_000), "127.0.0.1:1", "nack", "r" * MAX_REASON_CHARS)
                for _ in range(10)]
    stamps = dead_letter_stamps("terminated", 3, "sub", description="d" * 5_000_000, attempts=attempts)
    assert len(stamps[DEAD_LETTER_DESCRIPTION]) == MAX_REASON_CHARS
    # ten attempts of the longest name and reason: the newest that fit the budget, the newest first
    kept = json.loads(stamps[DELIVERY_ATTEMPTS])
    assert 1 <= len(kept) < 10 and len(stamps[DELIVERY_ATTEMPTS].encode()) <= MAX_ATTEMPTS_STAMP_BYTES
    assert sum(len(k.encode()) + len(v.encode()) for k, v in stamps.items()) < 8192  # inside the frame padding


def test_the_newest_attempt_is_kept_even_alone_over_the_budget() -> None:
    one = Attempt(1, 2, "n" * MAX_NAME_CHARS, "a", "nack", "\U0001f600" * MAX_REASON_CHARS)
    assert len(json.loads(dead_letter_stamps("terminated", 3, "s", attempts=[one])[DELIVERY_ATTEMPTS])) == 1
