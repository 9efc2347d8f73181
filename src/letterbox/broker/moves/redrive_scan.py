# Which live dead letters a redrive or a purge takes, where each one goes, and how
# many there are (redrive.py, dead_letter_purge.py, redrive_tasks.py).
#   * A redrive takes the live dead letters matching its filter that have a target
#     (the request's, else REAL_TOPIC; subscription-only: the subscription they died
#     in, redrive_targets.py) the caller may write, and a payload that could be
#     opened; the others stay in the DLQ (a task counts them as skipped).
#   * Every walk over the DLQ here is an async scan (dead_letters.live_dead_letters_async):
#     it gives the event loop back every few milliseconds, so counting or selecting
#     in a DLQ of hundreds of thousands of messages never stalls the broker's other
#     clients. One pass (survey) answers all a redrive's up-front questions: how many
#     match, how many can move, their targets, and why the others cannot.
#   * Refused up front: a target a producer could not write either (terminated, a
#     partitioned topic's parent name; redrive_targets.target_refusal).
#   * Scans keep counts and targets, never the dead letters themselves: memory does
#     not grow with the DLQ.
from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from letterbox.broker.moves.dead_letters import (
    DeadLetter,
    DeadLetterFilter,
    is_dead_letter_topic,
    live_dead_letters,
    live_dead_letters_async,
)
from letterbox.broker.moves.redrive_targets import (
    SubscriptionTarget,
    check_subscription_only,
    subscription_target,
    target_refusal,
)
from letterbox.errors import NotAllowed, TopicNotFound
from letterbox.failure.edits import EditError, MessageEdit, edited_payload
from letterbox.message_properties import REAL_TOPIC
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedTopic, MovesBroker


class NotDeadLetterTopic(NotAllowed):
    """Redrive or purge of a topic whose messages are not dead letters."""


@dataclass(frozen=True)
class RedriveRequest:
    filter: DeadLetterFilter
    target: TopicName | None = None
    max_messages: int | None = None
    rate_per_second: float | None = None
    dry_run: bool = False
    # back into the subscription each message died in only (redrive_targets.py)
    subscription_only: bool = False
    # the caller's right to write a target, asked per message as it moves (a message that
    # arrives during the redrive with another REAL_TOPIC is checked too); None: no check
    may_write: Callable[[TopicName], bool] | None = None
    # edit-and-replay: the change made to each message on its way back, by role `editor`
    edit: MessageEdit | None = None
    editor: str | None = None


@dataclass
class Survey:
    """One pass over a DLQ for a redrive: what matches its filter and what of it can move."""

    matching: int = 0  # live dead letters matching the filter, movable or not
    redrivable: int = 0  # of those, the ones the redrive would move now
    targets: set[TopicName] = field(default_factory=set)  # where those go (plain redrive)
    problems: dict[str, int] = field(default_factory=dict)  # subscription-only: why not, how many
    edit_refused: str | None = None  # an edit: why it does not apply to the first message it fails on


def check_dead_letter_topic(topic: MovedTopic) -> None:
    """Raise NotDeadLetterTopic for a topic that holds messages and is not a
    dead letter topic (an empty topic has nothing to move and passes)."""
    if is_dead_letter_topic(topic) or next(live_dead_letters(topic), None) is None:
        return
    raise NotDeadLetterTopic(
        f"{topic.name} is not a dead letter topic (its name does not end in -DLQ and its "
        "messages carry no DEAD_LETTER_REASON); redrive and purge only work on dead letter topics"
    )


def sub_target(dl: DeadLetter, req: RedriveRequest, dlq: TopicName,
               service: MovesBroker) -> SubscriptionTarget | str:
    """Subscription-only: where `dl` goes back to, or why it cannot."""
    found = subscription_target(service, dl, dlq)
    if isinstance(found, str):
        return found
    if req.may_write is not None and not req.may_write(found.topic):
        return f"not allowed to produce on {found.topic}"
    return found


def target_of(dl: DeadLetter, req: RedriveRequest) -> TopicName | None:
    """Where `dl` goes: the request's target or its REAL_TOPIC; None when it has none
    or the caller may not write there (it then stays in the DLQ)."""
    if req.target is not None:
        target: TopicName | None = req.target
    else:
        real = dl.properties.get(REAL_TOPIC)
        target = TopicName.parse(real) if real else None
    if target is not None and req.may_write is not None and not req.may_write(target):
        return None
    return target


async def matching(topic: MovedTopic, flt: DeadLetterFilter, start: int = 0) -> AsyncGenerator[DeadLetter, None]:
    """Live dead letters matching `flt` from entry `start` on (the loop is given back as it goes);
    with message ids in the filter only the entries they name are read."""
    async with contextlib.aclosing(live_dead_letters_async(topic, start, flt.message_ids)) as letters:
        async for dl in letters:
            if flt.matches(dl):
                yield dl


async def movable(topic: MovedTopic, req: RedriveRequest, start: int = 0
                  ) -> AsyncGenerator[tuple[DeadLetter, TopicName, SubscriptionTarget | None], None]:
    """The dead letters `req` moves, from entry `start` on, each with its target decided once."""
    async with contextlib.aclosing(matching(topic, req.filter, start)) as letters:
        async for dl in letters:
            if dl.error is not None:
                continue  # an unreadable one stays in the DLQ, listed with its error
            if req.subscription_only:
                sub = sub_target(dl, req, topic.name, topic.service)
                if not isinstance(sub, str):
                    yield dl, sub.topic, sub
            else:
                name = target_of(dl, req)
                if name is not None:
                    yield dl, name, None


async def survey(topic: MovedTopic, req: RedriveRequest) -> Survey:
    """Count, in one pass, what `req` matches and would move now, with the targets (plain)
    or the reasons a message cannot go back to its subscription (subscription-only)."""
    out = Survey()
    async with contextlib.aclosing(matching(topic, req.filter)) as letters:
        async for dl in letters:
            out.matching += 1
            if dl.error is not None:
                continue
            if req.subscription_only:
                why = subscription_target(topic.service, dl, topic.name)
                if isinstance(why, str):
                    out.problems[why] = out.problems.get(why, 0) + 1
                elif req.may_write is None or req.may_write(why.topic):
                    out.redrivable += 1
            else:
                name = target_of(dl, req)
                if name is not None:
                    out.redrivable += 1
                    out.targets.add(name)
            if req.edit is not None and out.edit_refused is None:
                try:
                    edited_payload(dl.payload, req.edit, dl.message_id)
                except EditError as exc:
                    out.edit_refused = str(exc)
    return out


async def count_matching(topic: MovedTopic, flt: DeadLetterFilter) -> int:
    """Live dead letters matching `flt`, movable or not."""
    count = 0
    async with contextlib.aclosing(matching(topic, flt)) as letters:
        async for _dl in letters:
            count += 1
    return count


def check_targets(topic: MovedTopic, req: RedriveRequest, found: Survey) -> None:
    """Refuse a redrive whose targets cannot take its messages: every target another
    persistent topic in a namespace that exists; subscription-only, every matching
    message's subscription exists (redrive_targets.check_subscription_only)."""
    service = topic.service
    if req.subscription_only:
        check_subscription_only(topic.name, req.target, found.problems)
        return
    names = {req.target} if req.target is not None else found.targets
    for name in sorted(str(n) for n in names):
        target = TopicName.parse(name)
        if target == topic.name:
            raise NotAllowed(f"cannot redrive {topic.name} into itself")
        if not target.persistent:
            raise NotAllowed(f"redrive target {target} must be a persistent topic")
        ns = target.namespace_name
        if service.namespace_policies.document(ns) is None and not service.list_topics(ns):
            raise TopicNotFound(f"redrive target {target}: namespace {ns} does not exist")
        why = target_refusal(service, target)
        if why is not None:
            raise NotAllowed(why)
