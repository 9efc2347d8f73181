"""The ordered quarantine's pure decisions (letterbox.failure.key_quarantine) and its policy
(`letterbox.dlq.on_key_failure`); the refusal at subscribe time is in tests/broker/test_ordered_quarantine.py."""
from __future__ import annotations

import re

import pytest

from letterbox.failure import PolicyError, policy_from_consumer_properties
from letterbox.failure import key_quarantine as kq
from letterbox.failure.policies import KeyFailure

DLQ = {"letterbox.dlq.max_redeliveries": "3"}


def test_policy_values() -> None:
    assert policy_from_consumer_properties(DLQ).on_key_failure is KeyFailure.CONTINUE
    for value, want in (("park", KeyFailure.PARK), ("continue", KeyFailure.CONTINUE), (" Park ", KeyFailure.PARK)):
        policy = policy_from_consumer_properties({**DLQ, "letterbox.dlq.on_key_failure": value})
        assert policy.on_key_failure is want
    with pytest.raises(PolicyError, match=re.escape(
            "consumer property letterbox.dlq.on_key_failure must be one of continue, park, got 'stop'")):
        policy_from_consumer_properties({**DLQ, "letterbox.dlq.on_key_failure": "stop"})
    with pytest.raises(PolicyError, match=r"on_key_failure=park needs letterbox\.dlq\.max_redeliveries"):
        policy_from_consumer_properties({"letterbox.dlq.on_key_failure": "park"})


def test_park_is_refused_on_shared_only() -> None:
    for t in (kq.SubscriptionType.EXCLUSIVE, kq.SubscriptionType.FAILOVER, kq.SubscriptionType.KEY_SHARED):
        kq.check_key_failure(KeyFailure.PARK, t)
    with pytest.raises(PolicyError, match="needs an ordered subscription"):
        kq.check_key_failure(KeyFailure.PARK, kq.SubscriptionType.SHARED)
    kq.check_key_failure(KeyFailure.CONTINUE, kq.SubscriptionType.SHARED)
    assert not kq.parks(KeyFailure.PARK, kq.SubscriptionType.SHARED, True)
    assert not kq.parks(KeyFailure.PARK, kq.SubscriptionType.FAILOVER, False)  # non-durable
    assert kq.parks(KeyFailure.PARK, kq.SubscriptionType.FAILOVER, True)


def test_which_dead_letters_poison() -> None:
    assert kq.poisons("max-redeliveries") and kq.poisons("terminated")
    assert not kq.poisons("expired") and not kq.poisons("parked-behind")


def test_key_state() -> None:
    assert kq.key_state(False, False) is kq.KeyState.POISONED
    assert kq.key_state(False, True) is kq.KeyState.POISONED
    assert kq.key_state(True, True) is kq.KeyState.DRAINING
    assert kq.key_state(True, False) is kq.KeyState.RELEASED


def test_gate() -> None:
    g = kq.gate
    A, W, P = kq.Gate.ADMIT, kq.Gate.WAIT, kq.Gate.PARK
    # no key: never held, whatever else
    assert g(None, 5, state=kq.KeyState.POISONED, returning=False, out=3, first_waiting=4) is A
    # one message of a key out at a time; it may come again (a redelivery)
    assert g("k", 5, state=None, returning=False, out=None, first_waiting=None) is A
    assert g("k", 5, state=None, returning=False, out=5, first_waiting=None) is A
    assert g("k", 6, state=None, returning=False, out=5, first_waiting=None) is W
    # nothing overtakes a waiting message of its key
    assert g("k", 9, state=None, returning=False, out=None, first_waiting=7) is W
    assert g("k", 7, state=None, returning=False, out=None, first_waiting=7) is A
    # poisoned: everything parked, even messages a redrive brought back
    assert g("k", 9, state=kq.KeyState.POISONED, returning=True, out=None, first_waiting=None) is P
    # draining: the redriven ones flow (in order), new ones are parked behind them
    assert g("k", 9, state=kq.KeyState.DRAINING, returning=True, out=None, first_waiting=None) is A
    assert g("k", 9, state=kq.KeyState.DRAINING, returning=True, out=8, first_waiting=None) is W
    assert g("k", 9, state=kq.KeyState.DRAINING, returning=False, out=None, first_waiting=None) is P


def test_a_redeliver_all_counts_the_oldest_only() -> None:
    assert kq.counted_on_redeliver_all([34, 27, 40]) == [27]
    assert kq.counted_on_redeliver_all([]) == []

