# Dispatch rate limits (pulsar-admin `namespaces set-dispatch-rate` -- per topic -- and
# `set-subscription-dispatch-rate` -- per subscription): at most
# dispatchThrottlingRateInMsg messages and dispatchThrottlingRateInByte bytes (each -1
# or 0: no limit) are sent per ratePeriodInSecond window, as Pulsar's DispatchRateLimiter
# counts them. The dispatcher asks `admit(entry)` before sending a new entry; a refused
# entry stays unread and the dispatcher is woken when the window turns (service.clock).
# Redeliveries (the replay queue) are not throttled. A window always admits its first
# entry, so a batch larger than the limit still goes out (one per window).
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from letterbox.clock import Clock
    from letterbox.storage.entry import Entry

TOPIC_RATE = "topicDispatchRate"  # namespace document keys (Pulsar's Policies fields)
SUBSCRIPTION_RATE = "subscriptionDispatchRate"


@dataclass(frozen=True)
class DispatchRate:
    messages: int  # per period; <= 0: no limit
    bytes: int
    period_s: int

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> DispatchRate | None:
        if not value:
            return None
        rate = cls(int(value.get("dispatchThrottlingRateInMsg", -1)),
                   int(value.get("dispatchThrottlingRateInByte", -1)), max(1, int(value.get("ratePeriodInSecond", 1))))
        return rate if rate.messages > 0 or rate.bytes > 0 else None


class Window:
    """One rate's counters over its current period."""

    def __init__(self) -> None:
        self.start_ms = -1
        self.messages = 0
        self.bytes = 0
        self.wake: object | None = None

    def admit(self, rate: DispatchRate, entry: Entry, now_ms: int) -> bool:
        if self.start_ms < 0 or now_ms >= self.start_ms + rate.period_s * 1000:
            self.start_ms, self.messages, self.bytes = now_ms, 0, 0
        n, size = entry.num_messages, len(entry.data)
        fresh = self.messages == 0 and self.bytes == 0
        if not fresh and ((rate.messages > 0 and self.messages + n > rate.messages)
                          or (rate.bytes > 0 and self.bytes + size > rate.bytes)):
            return False
        self.messages += n
        self.bytes += size
        return True


class Rates(Protocol):
    """A topic's dispatch rates (topic_policies.TopicLimits)."""

    @property
    def subscription_dispatch_rate(self) -> DispatchRate | None: ...
    @property
    def topic_dispatch_rate(self) -> DispatchRate | None: ...


class Clocked(Protocol):
    @property
    def clock(self) -> Clock: ...


class RatedTopic(Protocol):
    @property
    def limits(self) -> Rates: ...
    @property
    def service(self) -> Clocked: ...


class RatedSubscription(Protocol):
    """A subscription whose dispatch the rates bound (its topic's and its own)."""

    @property
    def topic(self) -> RatedTopic: ...


_windows: weakref.WeakKeyDictionary[object, Window] = weakref.WeakKeyDictionary()


def admit(sub: RatedSubscription, entry: Entry, wake: Callable[[], None]) -> bool:
    """May the subscription's dispatcher send `entry` now? If not, `wake` is called when
    the window that refused it turns."""
    limits = sub.topic.limits
    now = sub.topic.service.clock.now_ms()
    for owner, rate in ((sub, limits.subscription_dispatch_rate), (sub.topic, limits.topic_dispatch_rate)):
        if rate is None:
            continue
        window = _windows.get(owner)
        if window is None:
            window = _windows[owner] = Window()
        if not window.admit(rate, entry, now):
            delay = max(0.001, (window.start_ms + rate.period_s * 1000 - now) / 1000)
            sub.topic.service.clock.call_later(delay, wake)
            return False
    return True
