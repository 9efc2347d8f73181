"""The hand-back rule of Exclusive/Failover subscriptions (broker/topics/hand_backs.py), without a
broker: which returns count as a delivery and which count a message is sent with afterwards."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from letterbox.broker.topics.hand_backs import HAND_BACK_WINDOW_S, PRUNE_AT, HandBacks, note_sent


@dataclass
class FakeConsumer:
    recounted_sends: dict[int, float] = field(default_factory=dict)


def test_a_return_right_after_the_send_is_a_hand_back_and_lowers_the_count() -> None:
    hb, c = HandBacks(), FakeConsumer()
    note_sent(c, 7)
    counted, back = hb.sort(c, [5, 7])
    assert (counted, back) == ([5], [7])
    assert hb.count_to_send(3, 7) == 2 and hb.count_to_send(3, 5) == 3
    assert c.recounted_sends == {}  # a redeliver-all takes everything: the record starts again
    note_sent(c, 7)
    assert hb.sort(c, [7]) == ([], [7])
    assert hb.count_to_send(4, 7) == 2  # each hand-back lowers it by one more


def test_a_return_after_the_window_counts() -> None:
    hb, c = HandBacks(), FakeConsumer()
    c.recounted_sends[9] = time.monotonic() - HAND_BACK_WINDOW_S - 0.05
    assert hb.sort(c, [9]) == ([9], [])
    assert hb.count_to_send(2, 9) == 2


def test_forgetting_acked_entries_and_seek() -> None:
    hb, c = HandBacks(), FakeConsumer()
    for e in (1, 2, 3):
        note_sent(c, e)
    hb.sort(c, [1, 2, 3])
    hb.forget(2)
    assert hb.count_to_send(5, 2) == 5
    hb.forget_through(1)
    assert hb.lowered == {3: 1}
    hb.reset()
    assert hb.count_to_send(5, 3) == 5


def test_the_record_of_sends_stays_small() -> None:
    c = FakeConsumer()
    old = time.monotonic() - 10
    c.recounted_sends = {e: old for e in range(PRUNE_AT)}
    note_sent(c, PRUNE_AT)
    assert list(c.recounted_sends) == [PRUNE_AT]
