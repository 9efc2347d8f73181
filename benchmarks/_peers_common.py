# What the peers.py worker processes share: the payload format (a 10-digit index, then
# G(ood) or P(oison), padded to --size), which messages fail (every 10th), the tally of a
# consumer (exactly-once accounting) and the line protocol with peers.py: a worker prints
# "READY" once subscribed (consumers), "DONE <json>" when its clock stops, then drains.
from __future__ import annotations

import json
import resource
import sys
import time

FAIL_EVERY = 10  # every 10th message (index % 10 == 9) always fails in W2
SUBSCRIPTION = "work"
POISON = ord("P")


def poison(i: int, failing: bool) -> bool:
    return failing and i % FAIL_EVERY == FAIL_EVERY - 1


def payload(i: int, failing: bool, size: int) -> bytes:
    head = b"%010d" % i + (b"P" if poison(i, failing) else b"G")
    return head + b"x" * max(0, size - len(head))


def cpu_now() -> float:
    """User + system CPU seconds of this process, every thread included (client I/O threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def say(tag: str, body: dict[str, object] | None = None) -> None:
    print(tag if body is None else f"{tag} {json.dumps(body)}", flush=True)


class Tally:
    """A consumer's exactly-once accounting: distinct good messages acked, distinct dead
    letters, and everything seen more than once."""

    def __init__(self, n: int, failing: bool) -> None:
        self.n = n
        self.good_expected = sum(1 for i in range(n) if not poison(i, failing))
        self.dead_expected = n - self.good_expected
        self.acked = bytearray(n)
        self.dead = bytearray(n)
        self.good = self.dead_letters = 0
        self.duplicates = 0  # a good message delivered again after its ack, or a dead letter twice
        self.good_in_dlq = 0
        self.deliveries = self.nacks = 0
        self.t_start = time.time()
        self.cpu_start = cpu_now()
        self.t_done: float | None = None
        self.cpu_done = 0.0

    def on_ack(self, i: int) -> None:
        if self.acked[i]:
            self.duplicates += 1
        else:
            self.acked[i] = 1
            self.good += 1

    def on_dead_letter(self, data: bytes) -> None:
        i = int(data[:10])
        if data[10] != POISON:
            self.good_in_dlq += 1
        elif self.dead[i]:
            self.duplicates += 1
        else:
            self.dead[i] = 1
            self.dead_letters += 1

    @property
    def complete(self) -> bool:
        return self.good >= self.good_expected and self.dead_letters >= self.dead_expected

    def stop_clock(self) -> None:
        if self.t_done is None:
            self.t_done = time.time()
            self.cpu_done = cpu_now()
            say("DONE", {"t_done": self.t_done})

    def result(self) -> dict[str, object]:
        lost = (self.good_expected - self.good) + (self.dead_expected - self.dead_letters)
        return {
            "complete": self.complete, "t_done": self.t_done, "acked": self.good,
            "good_expected": self.good_expected, "dead_letters": self.dead_letters,
            "dead_expected": self.dead_expected, "duplicates": self.duplicates, "lost": lost,
            "good_in_dlq": self.good_in_dlq, "deliveries": self.deliveries, "nacks": self.nacks,
            "cpu_s": round(self.cpu_done - self.cpu_start, 3),
        }


def fail(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    sys.exit(2)
