"""Error classes, pure (failure/error_classes.py and decide.py's rule): the rules' outcomes,
MRO matching by qualified name, and a stack fingerprint that ignores line numbers."""
from __future__ import annotations

import pytest

from letterbox.failure import (
    DeadLetter,
    DeadLetterPolicy,
    DeliverAt,
    DeliveryState,
    ErrorRule,
    FailurePolicy,
    Nack,
    PolicyError,
    decide,
    decide_redeliveries,
    error_info,
    match_rule,
)
from letterbox.failure.error_classes import qualified_name

NOW = 1_000_000
DLQ = FailurePolicy(dead_letter=DeadLetterPolicy(max_redeliver_count=3))


class Outer:
    class Inner(KeyError):
        pass


def test_non_retryable_dead_letters_at_once_only_with_a_dead_letter_policy() -> None:
    rule = ErrorRule(non_retryable=True)
    assert decide(DeliveryState(), Nack(rule), DLQ, NOW) == DeadLetter("non-retryable", 1)
    assert not isinstance(decide(DeliveryState(), Nack(rule), FailurePolicy(), NOW), DeadLetter)


def test_max_attempts_replaces_the_policy_maximum() -> None:
    rule = ErrorRule(max_attempts=2)
    assert not isinstance(decide(DeliveryState(redelivery_count=0), Nack(rule), DLQ, NOW), DeadLetter)
    assert decide(DeliveryState(redelivery_count=1), Nack(rule), DLQ, NOW) == DeadLetter("max-redeliveries", 2)
    many = ErrorRule(max_attempts=10)  # above the policy's 3 redeliveries: the class may try longer
    assert not isinstance(decide(DeliveryState(redelivery_count=5), Nack(many), DLQ, NOW), DeadLetter)


def test_retry_after_runs_from_now_and_the_batch_decision_honours_it() -> None:
    rule = ErrorRule.retry_after(30)
    assert decide(DeliveryState(), Nack(rule), DLQ, NOW) == DeliverAt(NOW + 30_000, 30_000, 1)
    assert decide_redeliveries([0, 1], [5, 5], DeliveryState(), Nack(rule), DLQ, NOW) == [
        DeliverAt(NOW + 30_000, 30_000, 1), DeliverAt(NOW + 30_000, 30_000, 2)]


def test_matching_walks_the_mro_by_qualified_name() -> None:
    rules = {"KeyError": ErrorRule(non_retryable=True), f"{__name__}.Outer.Inner": ErrorRule(max_attempts=1)}
    assert match_rule(Outer.Inner, rules) == (f"{__name__}.Outer.Inner", rules[f"{__name__}.Outer.Inner"])
    assert match_rule(KeyError, rules) == ("KeyError", rules["KeyError"])
    assert match_rule(ValueError, rules) is None
    assert qualified_name(Outer.Inner) == f"{__name__}.Outer.Inner"
    assert qualified_name(ValueError) == "ValueError"


def _fails(where: int) -> BaseException:
    try:
        if where == 1:
            raise ValueError("x 1")
        raise ValueError("x 2")  # another line of the same function
    except ValueError as exc:
        return exc


def _fails_elsewhere() -> BaseException:
    try:
        raise ValueError("x")
    except ValueError as exc:
        return exc


def test_fingerprint_ignores_lines_and_tells_functions_apart() -> None:
    a, b, c = error_info(_fails(1)), error_info(_fails(2)), error_info(_fails_elsewhere())
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert len(a.fingerprint) == 12 and a.error_class == "ValueError" and a.message == "x 1"
    assert len(error_info(ValueError("y" * 5000)).message or "") == 1000


def test_bad_rules_are_refused() -> None:
    with pytest.raises(PolicyError, match="retry_after"):
        ErrorRule.retry_after(900_000)
    with pytest.raises(PolicyError, match="non_retryable"):
        ErrorRule.from_json({"nonRetryable": "yes"})
    with pytest.raises(PolicyError, match="maxAttempts"):
        ErrorRule.from_json({"maxAttempt": 3})
