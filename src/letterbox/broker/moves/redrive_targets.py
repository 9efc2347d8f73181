# Where a subscription-only redrive puts a dead letter back: the subscription
# it died in, on the topic it came from.
#   * the subscription is the message's DEAD_LETTER_SUBSCRIPTION (stamped by
#     every broker-side dead-letter move); without it (a client-side DLQ of the
#     official clients) it is read from the DLQ's default name
#     `<REAL_TOPIC's partitioned parent>-<subscription>-DLQ`;
#   * the topic is REAL_TOPIC. A partition name is used as is; a partitioned
#     parent is resolved to the partition named in ORIGIN_MESSAGE_ID
#     (`ledger:entry:partition:batch`), since subscriptions live on partitions;
#   * a terminated source takes no message back (nor does a terminated or
#     partitioned-parent target of a plain redrive: target_refusal);
#   * only a DURABLE subscription that exists now qualifies. A message whose
#     subscription cannot be named, or no longer exists, is not moved (it stays in
#     the DLQ and a redrive task counts it as skipped).
# The move itself (redrive.py) appends the message to the topic and, in the SAME
# storage transaction, acknowledges the new entry on every other durable cursor
# of the topic that exists at that moment (other subscriptions, internal
# cursors): they never see it, and a crash leaves either all of it or none.
# Readers and non-durable subscriptions read the topic as a log and are not
# acknowledged; a subscription created later from "earliest" sees the entry.
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from letterbox.broker.moves.move_transaction import is_terminated, terminated_refusal
from letterbox.errors import InvalidTopicName, LetterboxError, NotAllowed, TopicNotFound
from letterbox.failure import TopicRole, topic_role
from letterbox.failure.naming import DLQ_SUFFIX, partitioned_parent
from letterbox.message_properties import DEAD_LETTER_SUBSCRIPTION, ORIGIN_MESSAGE_ID, REAL_TOPIC
from letterbox.storage.managed_cursor import ManagedCursor
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.moves.dead_letters import DeadLetter
    from letterbox.broker.moves.move_ends import MovedTopic, MovesBroker


class SubscriptionGone(TopicNotFound):
    """A subscription-only redrive whose messages' subscription does not exist."""


@dataclass(frozen=True)
class SubscriptionTarget:
    topic: TopicName  # the source topic, a partition for a partitioned source
    subscription: str


def dead_letter_subscription(dl: DeadLetter, dlq: TopicName) -> str | None:
    """The subscription `dl` was dead-lettered from, or None when nothing says."""
    named = dl.properties.get(DEAD_LETTER_SUBSCRIPTION)
    if named:
        return named
    real = _real_topic(dl)
    if real is None:
        return None
    prefix = partitioned_parent(str(real)) + "-"
    name = str(dlq.partitioned_parent)
    if name.startswith(prefix) and name.endswith(DLQ_SUFFIX) and len(name) > len(prefix) + len(DLQ_SUFFIX):
        return name[len(prefix):-len(DLQ_SUFFIX)]
    return None


def _real_topic(dl: DeadLetter) -> TopicName | None:
    real = dl.properties.get(REAL_TOPIC)
    if not real:
        return None
    try:
        return TopicName.parse(real)
    except InvalidTopicName:
        return None


def _origin_partition(dl: DeadLetter) -> int | None:
    parts = (dl.properties.get(ORIGIN_MESSAGE_ID) or "").split(":")
    try:
        return int(parts[2]) if len(parts) == 4 else None
    except ValueError:
        return None


def subscription_target(service: MovesBroker, dl: DeadLetter, dlq: TopicName) -> SubscriptionTarget | str:
    """Where `dl` goes back to, or why it cannot (a sentence naming what is missing)."""
    real = _real_topic(dl)
    if real is None:
        return "it has no (valid) REAL_TOPIC property"
    sub = dead_letter_subscription(dl, dlq)
    if sub is None:
        return (f"no subscription is named: it has no {DEAD_LETTER_SUBSCRIPTION} property and {dlq} is "
                f"not named <topic>-<subscription>-DLQ after {real}")
    if topic_role(str(real)) is TopicRole.DEAD_LETTER:
        return f"its source {real} is itself a dead letter topic"
    partitions = service.partitions_of(real)
    if partitions > 0:
        p = _origin_partition(dl)
        if p is None or not 0 <= p < partitions:
            return (f"{real} is partitioned ({partitions} partitions) and its ORIGIN_MESSAGE_ID names "
                    "no partition of it")
        real = real.partition(p)
    if not real.persistent:
        return f"its source {real} is not persistent"
    if not service.topic_exists(real):
        return f"its source topic {real} does not exist"
    if is_terminated(service, real):
        return f"its source topic {real} is terminated (it takes no more messages)"
    ledger = service.store.get_ledger(str(real))
    if ledger is None or sub not in ledger.cursors():
        return f"subscription {sub!r} of {real} does not exist (durable subscriptions only)"
    return SubscriptionTarget(real, sub)


def target_refusal(service: MovesBroker, name: TopicName) -> str | None:
    """Why a (plain) redrive may not append to `name`, or None: a producer could not either."""
    partitions = service.partitions_of(name)
    if partitions > 0:
        return (f"redrive target {name} is a partitioned topic ({partitions} partitions): redrive to one "
                f"of its partitions ({name}-partition-<i>) as the target")
    return terminated_refusal(service, name, "redrive target")


def target_topic(service: MovesBroker, target: SubscriptionTarget) -> MovedTopic:
    """The loaded source topic of `target` (never created: it exists)."""
    return service.persistent_topic(target.topic, create=False)


def other_cursors(topic: MovedTopic, subscription: str) -> list[ManagedCursor]:
    """Every durable cursor of `topic` but `subscription`'s, in a fixed (name) order:
    the cursors a subscription-only redrive acknowledges its new entry on."""
    cursors = topic.ledger.cursors()
    if subscription not in cursors:
        raise SubscriptionGone(f"subscription {subscription!r} of {topic.name} does not exist")
    return [c for name, c in sorted(cursors.items()) if name != subscription and isinstance(c, ManagedCursor)]


def check_subscription_only(dlq: TopicName, target: TopicName | None, problems: dict[str, int]) -> None:
    """Refuse a subscription-only redrive (before anything moves) whose matching messages
    cannot all go back to their subscription: `problems` counts them by why (a scan's,
    redrive_scan.survey, of subscription_target's answers)."""
    if target is not None:
        raise NotAllowed("a subscription-only redrive goes back to each message's source topic and "
                         "subscription: it takes no target")
    if problems:
        listed = "; ".join(f"{n} message(s): {why}" for why, n in sorted(problems.items())[:5])
        error: type[LetterboxError] = SubscriptionGone if any(
            "does not exist" in why for why in problems) else NotAllowed
        raise error(f"cannot redrive into the dead-lettering subscription: {listed}. Recreate the "
                    "subscription, narrow the filter, or redrive to the topic (without subscription-only)")
