from __future__ import annotations

import random

from letterbox.storage.ack_ranges import RangeSet, to_ack_set_words


def test_add_merges_neighbours() -> None:
    r = RangeSet()
    for x in (5, 7, 6, 1, 3, 2):
        assert r.add(x)
    assert not r.add(6)
    assert r.to_list() == [(1, 3), (5, 7)]
    assert 2 in r and 4 not in r and 8 not in r


def test_random_order_collapses_to_one_range() -> None:
    r = RangeSet()
    ids = list(range(10, 5000))
    random.Random(1).shuffle(ids)
    for x in ids:
        r.add(x)
    assert r.to_list() == [(10, 4999)]


def test_add_range_and_absorb() -> None:
    r = RangeSet([(10, 12), (20, 25), (30, 30)])
    r.add_range(13, 19)
    assert r.to_list() == [(10, 25), (30, 30)]
    r.add_range(1, 2)
    assert r.to_list() == [(1, 2), (10, 25), (30, 30)]
    assert r.absorb_from(0) == 2
    assert r.to_list() == [(10, 25), (30, 30)]
    assert r.absorb_from(15) == 25
    assert r.to_list() == [(30, 30)]
    assert r.absorb_from(26) == 26
    assert r.absorb_from(29) == 30
    assert r.to_list() == []


def test_ack_set_words() -> None:
    # batch of 5, indexes 0 and 2 acked -> unacked bits 1, 3, 4
    assert to_ack_set_words(5, 0b00101) == [0b11010]
    # 70 messages, none acked: first word all ones (signed -1), second word 6 bits
    assert to_ack_set_words(70, 0) == [-1, 0b111111]
    # all of the first word acked: trailing words only
    assert to_ack_set_words(70, (1 << 64) - 1) == [0, 0b111111]
    assert to_ack_set_words(3, 0b111) == []
    # bit 63 unacked -> negative long like Java
    assert to_ack_set_words(64, (1 << 63) - 1) == [-(1 << 63)]


def test_copy_is_independent_and_equal() -> None:
    r = RangeSet([(1, 3), (7, 7), (10, 20)])
    c = r.copy()
    assert c.to_list() == r.to_list() == [(1, 3), (7, 7), (10, 20)]
    c.add(5)
    c.add(4)
    assert c.to_list() == [(1, 5), (7, 7), (10, 20)]
    assert r.to_list() == [(1, 3), (7, 7), (10, 20)]
    r.add(8)
    assert c.to_list() == [(1, 5), (7, 7), (10, 20)] and r.to_list() == [(1, 3), (7, 8), (10, 20)]
