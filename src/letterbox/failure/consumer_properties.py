# The consumer properties (the official client's `properties=` at subscribe)
# through which consumers set their subscription's failure policy on the
# broker, written once: the broker reads them (PIP-22: the last created
# consumer's configuration wins), the RetryConsumer writes them. A consumer
# that sets none of the keys leaves the subscription's policy as it is.
# Invariant: every `letterbox.`-prefixed consumer property is one of KEYS or MARKERS; any
# other (a misspelling) is refused, so a typo never silently drops a policy.
from __future__ import annotations

from collections.abc import Mapping

from letterbox.failure.circuit import CircuitPolicy
from letterbox.failure.errors import PolicyError
from letterbox.failure.limits import DEFAULT_BACKOFF_MAX_DELAY_MS, DEFAULT_BACKOFF_MULTIPLIER
from letterbox.failure.policies import (
    JITTER_VALUES,
    Backoff,
    DeadLetterPolicy,
    FailurePolicy,
    Jitter,
    KeyFailure,
    PolicyOrigin,
)

BACKOFF_MIN_MS = "letterbox.backoff.min_ms"
BACKOFF_MAX_MS = "letterbox.backoff.max_ms"
BACKOFF_MULTIPLIER = "letterbox.backoff.multiplier"
DLQ_MAX_REDELIVERIES = "letterbox.dlq.max_redeliveries"
DLQ_TOPIC = "letterbox.dlq.topic"
DLQ_INITIAL_SUBSCRIPTION = "letterbox.dlq.initial_subscription"
# not a policy: set by letterbox.client consumers, which announce each nack (and its
# reason) to the broker before they perform it (broker/redelivery/delivery_attempts.py)
ANNOUNCES_FAILURES = "letterbox.client.announces_failures"
MARKERS = (ANNOUNCES_FAILURES,)
DLQ_ON_KEY_FAILURE = "letterbox.dlq.on_key_failure"
BACKOFF_JITTER = "letterbox.backoff.jitter"
# outage detection (circuit.py): on with CIRCUIT_ENABLED=true or any of the tuning keys
CIRCUIT_ENABLED = "letterbox.circuit.enabled"
CIRCUIT_KEYS = {  # key -> CircuitPolicy field
    "letterbox.circuit.failure_percent": "failure_percent",
    "letterbox.circuit.min_deliveries": "min_deliveries",
    "letterbox.circuit.window_ms": "window_ms",
    "letterbox.circuit.min_distinct": "min_distinct",
    "letterbox.circuit.cooldown_ms": "cooldown_ms",
}
KEYS = (BACKOFF_MIN_MS, BACKOFF_MAX_MS, BACKOFF_MULTIPLIER, BACKOFF_JITTER, DLQ_MAX_REDELIVERIES, DLQ_TOPIC,
        DLQ_INITIAL_SUBSCRIPTION, DLQ_ON_KEY_FAILURE, CIRCUIT_ENABLED, *CIRCUIT_KEYS)
KEY_FAILURE_VALUES = tuple(k.value for k in KeyFailure)
PREFIX = "letterbox."


def without_letterbox_properties(md: Mapping[str, str]) -> dict[str, str]:
    """`md` without its `letterbox.*` keys (a broker started --pulsar-compatible-only ignores them)."""
    return {k: v for k, v in md.items() if not k.startswith(PREFIX)}


def declares_policy(md: Mapping[str, str]) -> bool:
    """True when any `letterbox.*` policy key is set (a known one, or a misspelling to refuse)."""
    return any(k.startswith(PREFIX) and k not in MARKERS for k in md)


def policy_from_consumer_properties(md: Mapping[str, str]) -> FailurePolicy:
    """The policy a consumer's properties set; raises PolicyError naming the bad key."""
    unknown = sorted(k for k in md if k.startswith(PREFIX) and k not in KEYS and k not in MARKERS)
    if unknown:
        raise PolicyError(
            f"unknown consumer propert{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}: "
            f"the letterbox.* keys are {', '.join(KEYS)}"
        )
    backoff = None
    if BACKOFF_MIN_MS in md:
        low = _int(md, BACKOFF_MIN_MS, 1)
        high = _int(md, BACKOFF_MAX_MS, low) if BACKOFF_MAX_MS in md else max(low, DEFAULT_BACKOFF_MAX_DELAY_MS)
        mult = _float(md, BACKOFF_MULTIPLIER) if BACKOFF_MULTIPLIER in md else DEFAULT_BACKOFF_MULTIPLIER
        backoff = Backoff(low, high, mult, _jitter(md))
    elif BACKOFF_MAX_MS in md or BACKOFF_MULTIPLIER in md or BACKOFF_JITTER in md:
        raise PolicyError(f"{BACKOFF_MAX_MS}, {BACKOFF_MULTIPLIER} and {BACKOFF_JITTER} need {BACKOFF_MIN_MS} "
                          "as well")
    dead_letter = None
    if DLQ_MAX_REDELIVERIES in md:
        dead_letter = DeadLetterPolicy(
            _int(md, DLQ_MAX_REDELIVERIES, 1),
            dead_letter_topic=md.get(DLQ_TOPIC) or None,
            initial_subscription_name=md.get(DLQ_INITIAL_SUBSCRIPTION) or None,
        )
    elif DLQ_TOPIC in md or DLQ_INITIAL_SUBSCRIPTION in md:
        raise PolicyError(f"{DLQ_TOPIC} and {DLQ_INITIAL_SUBSCRIPTION} need {DLQ_MAX_REDELIVERIES} as well")
    on_key_failure = _key_failure(md)
    if on_key_failure is KeyFailure.PARK and dead_letter is None:
        raise PolicyError(f"{DLQ_ON_KEY_FAILURE}={KeyFailure.PARK.value} needs {DLQ_MAX_REDELIVERIES} as well "
                          "(messages are parked in the dead letter topic)")
    return FailurePolicy(dead_letter=dead_letter, backoff=backoff, origin=PolicyOrigin.TOPIC,
                         on_key_failure=on_key_failure, circuit=_circuit(md))


def _jitter(md: Mapping[str, str]) -> Jitter:
    value = md.get(BACKOFF_JITTER)
    if value is None:
        return Jitter.NONE
    try:
        return Jitter(value.strip().lower())
    except ValueError:
        raise PolicyError(f"consumer property {BACKOFF_JITTER} must be one of {', '.join(JITTER_VALUES)}, "
                          f"got {value!r}") from None


def _circuit(md: Mapping[str, str]) -> CircuitPolicy | None:
    enabled = md.get(CIRCUIT_ENABLED)
    if enabled is not None and enabled.strip().lower() not in ("true", "false"):
        raise PolicyError(f"consumer property {CIRCUIT_ENABLED} must be true or false, got {enabled!r}")
    tuned = {f: _int(md, key, 1) for key, f in CIRCUIT_KEYS.items() if key in md}
    if enabled is not None and enabled.strip().lower() == "false":
        if tuned:
            raise PolicyError(f"{CIRCUIT_ENABLED}=false and {', '.join(sorted(k for k in CIRCUIT_KEYS if k in md))} "
                              "contradict each other: remove one")
        return None
    if enabled is None and not tuned:
        return None
    try:
        return CircuitPolicy(**tuned)
    except PolicyError as exc:
        raise PolicyError(f"consumer property letterbox.circuit.*: {exc}") from None


def _key_failure(md: Mapping[str, str]) -> KeyFailure:
    if DLQ_ON_KEY_FAILURE not in md:
        return KeyFailure.CONTINUE
    value = md[DLQ_ON_KEY_FAILURE]
    try:
        return KeyFailure(value.strip().lower())
    except ValueError:
        raise PolicyError(f"consumer property {DLQ_ON_KEY_FAILURE} must be one of "
                          f"{', '.join(KEY_FAILURE_VALUES)}, got {value!r}") from None


def consumer_properties_of(dead_letter: DeadLetterPolicy | None, backoff: Backoff | None = None,
                           dead_letter_topic: str | None = None) -> dict[str, str]:
    """The consumer properties that set `dead_letter` / `backoff` on the broker
    (`dead_letter_topic` overrides the policy's, e.g. with the resolved default name)."""
    out: dict[str, str] = {}
    if dead_letter is not None:
        out[DLQ_MAX_REDELIVERIES] = str(dead_letter.max_redeliver_count)
        topic = dead_letter_topic or dead_letter.dead_letter_topic
        if topic:
            out[DLQ_TOPIC] = topic
        if dead_letter.initial_subscription_name:
            out[DLQ_INITIAL_SUBSCRIPTION] = dead_letter.initial_subscription_name
    if backoff is not None:
        out[BACKOFF_MIN_MS] = str(backoff.min_delay_ms)
        out[BACKOFF_MAX_MS] = str(backoff.max_delay_ms)
        out[BACKOFF_MULTIPLIER] = repr(float(backoff.multiplier))
        if backoff.jitter is not Jitter.NONE:
            out[BACKOFF_JITTER] = backoff.jitter.value
    return out


def _int(md: Mapping[str, str], key: str, minimum: int) -> int:
    try:
        value = int(md[key])
    except ValueError:
        raise PolicyError(
            f"consumer property {key} must be an integer of at least {minimum}, got {md[key]!r}") from None
    if value < minimum:
        raise PolicyError(f"consumer property {key} must be at least {minimum}, got {value}")
    return value


def _float(md: Mapping[str, str], key: str) -> float:
    try:
        value = float(md[key])
    except ValueError:
        raise PolicyError(
            f"consumer property {key} must be a number between 1 and 100, got {md[key]!r}") from None
    if not 1.0 <= value <= 100.0:
        raise PolicyError(f"consumer property {key} must be between 1 and 100, got {value}")
    return value
