# The ordered quarantine's decisions (`letterbox.dlq.on_key_failure = park`),
# pure: the broker (broker/redelivery/key_quarantine.py) gathers the facts and applies
# the answer.
# - Where it applies: Exclusive, Failover and Key_Shared, where the order of a
#   key is promised. Shared promises no order, so park is refused there.
# - Which dead letters poison their key: max-redeliveries and terminated (a
#   handler gave up on the message). An expiry is about time, not about the
#   message, and a parked message never poisons again.
# - The gate, asked for every entry of a key before it is dispatched:
#     ADMIT  dispatch it;
#     WAIT   an earlier message of its key is still out (delivered, not yet
#            acknowledged or dead-lettered) or waiting: it waits behind it, so a
#            key has at most ONE message out at a time (like an SQS FIFO message
#            group) and a failing message can never be overtaken by its key;
#     PARK   its key is poisoned: move it to the dead letter topic behind the
#            poisoned message.
#   Messages without a key are never held or parked (they keep today's
#   behaviour): the quarantine is per key, and a keyless stream has none.
# - A poisoned key's state follows its poisoned dead letter:
#     POISONED  the dead letter is live: every message of the key is parked;
#     DRAINING  the dead letter was redriven or purged while a redrive of the
#               dead letter topic still runs: the messages it brings back
#               (`returning`: they name their origin in this topic) flow in
#               order, new ones are parked behind them (the running redrive
#               picks them up after the others), so none overtakes;
#     RELEASED  handled and no redrive running: the key is an ordinary key again.
# - Counting a redeliver-all: on Exclusive and Failover the official clients
#   answer a nack (or an ack timeout) by asking for EVERY unacknowledged
#   message again, naming none. Counting them all would dead-letter -- and so
#   poison -- innocent keys whose current message was only waiting for its
#   acknowledgement to be sent. With park, only the oldest of them by position
#   counts: the one blocking its key, as a failing message does (everything
#   else moves on); the others come back uncounted (the rule of a consumer that
#   went away, decide.ConsumerGone).
from __future__ import annotations

import enum
from collections.abc import Sequence

from letterbox.failure.decide import SubscriptionType
from letterbox.failure.errors import PolicyError
from letterbox.failure.policies import KeyFailure
from letterbox.message_properties import REASON_MAX_REDELIVERIES, REASON_TERMINATED

ORDERED_TYPES = frozenset({SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER, SubscriptionType.KEY_SHARED})
POISONING_REASONS = frozenset({REASON_MAX_REDELIVERIES, REASON_TERMINATED})


class Gate(enum.Enum):
    ADMIT = "admit"
    WAIT = "wait"
    PARK = "park"


class KeyState(enum.Enum):
    POISONED = "poisoned"
    DRAINING = "draining"
    RELEASED = "released"


def check_key_failure(on_key_failure: KeyFailure, sub_type: int) -> None:
    """Raise PolicyError when `on_key_failure` cannot apply to a subscription of `sub_type`."""
    if on_key_failure is KeyFailure.PARK and sub_type not in ORDERED_TYPES:
        raise PolicyError(
            "letterbox.dlq.on_key_failure=park needs an ordered subscription (Exclusive, Failover or "
            "Key_Shared): a Shared subscription promises no order to keep"
        )


def parks(on_key_failure: KeyFailure, sub_type: int | None, durable: bool) -> bool:
    """Whether a subscription runs the quarantine (only durable ones dead-letter on the broker)."""
    return on_key_failure is KeyFailure.PARK and durable and sub_type in ORDERED_TYPES


def poisons(reason: str) -> bool:
    """Whether a dead letter for `reason` poisons its key."""
    return reason in POISONING_REASONS


def counted_on_redeliver_all(entry_ids: Sequence[int]) -> list[int]:
    """Of the messages a redeliver-all gives back, those that count a redelivery (park)."""
    return [min(entry_ids)] if entry_ids else []


def key_state(poison_handled: bool, redrive_running: bool) -> KeyState:
    if not poison_handled:
        return KeyState.POISONED
    return KeyState.DRAINING if redrive_running else KeyState.RELEASED


def gate(key: str | None, entry_id: int, *, state: KeyState | None, returning: bool,
         out: int | None, first_waiting: int | None) -> Gate:
    """The fate of entry `entry_id` of `key` now. `state`: its key's quarantine state (None:
    not poisoned); `returning`: it was brought back by a redrive; `out`: the entry of its key
    that is out now (or reserved to go next); `first_waiting`: the first entry of its key
    waiting behind that one."""
    if key is None:
        return Gate.ADMIT
    if state is KeyState.POISONED or (state is KeyState.DRAINING and not returning):
        return Gate.PARK
    if out is not None and out != entry_id:
        return Gate.WAIT
    if first_waiting is not None and first_waiting < entry_id:
        return Gate.WAIT
    return Gate.ADMIT
