# Inactive topic deletion (pulsar-admin `namespaces set-inactive-topic-policies`): a
# loaded topic of a namespace whose inactiveTopicPolicies say deleteWhileInactive is
# deleted once it has been inactive for maxInactiveDurationSeconds. Inactive means no
# producer and no consumer, and, by inactiveTopicDeleteMode,
#   delete_when_no_subscriptions        it has no durable subscription either;
#   delete_when_subscriptions_caught_up every subscription has acknowledged everything.
# Checked every CHECK_SECONDS on the broker's clock. Unlike Pulsar's default there is no
# broker-wide deletion: only the namespace policy deletes. Dead letter and retry topics
# are never deleted by it (letterbox keeps dead letters until someone reads them).
# A check walks every loaded topic, SLICE topics per event-loop turn.
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from letterbox.failure.naming import TopicRole, topic_role

if TYPE_CHECKING:
    from letterbox.broker.topics.topic import PersistentTopic
    from letterbox.broker.topics.topics_broker import TopicsBroker
    from letterbox.clock import Timer

log = logging.getLogger("letterbox.inactive")
POLICY_KEY = "inactive_topic_policies"
MODES = ("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up")
CHECK_SECONDS = 1.0
SLICE = 250  # topics checked per event-loop turn (a policy lookup each)


class InactiveTopicMonitor:
    def __init__(self, service: TopicsBroker) -> None:
        self.service = service
        self.idle_since: dict[str, int] = {}
        self._timer: Timer | None = None
        self._running = False

    def start(self) -> None:
        self._running = True
        self._schedule()

    def stop(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self) -> None:
        if self._running:
            self._timer = self.service.clock.call_later(CHECK_SECONDS, self._tick)

    def _tick(self) -> None:
        asyncio.ensure_future(self.check()).add_done_callback(lambda _f: self._schedule())

    def _policy(self, topic: PersistentTopic) -> dict[str, Any] | None:
        from letterbox.broker.policies.topic_policies import effective_document

        policy = effective_document(self.service, topic.name).get(POLICY_KEY)
        return policy if policy and policy.get("deleteWhileInactive") else None

    @staticmethod
    def _inactive(topic: PersistentTopic, mode: str) -> bool:
        if topic.client_count() or topic_role(str(topic.name)) != TopicRole.SOURCE:
            return False
        durable = [s for s in topic.subscriptions.values() if s.durable]
        if mode == "delete_when_no_subscriptions":
            return not durable
        return all(s.backlog() == 0 for s in durable)

    async def check(self) -> None:
        from letterbox.broker.topics.topic import PersistentTopic

        now = self.service.clock.now_ms()
        seen: set[str] = set()
        for i, (key, topic) in enumerate(list(self.service.topics.items())):
            if i % SLICE == SLICE - 1:  # thousands of topics: let clients run between slices
                await asyncio.sleep(0)
            if not isinstance(topic, PersistentTopic):
                continue
            policy = self._policy(topic)
            if policy is None or not self._inactive(topic, str(policy.get("inactiveTopicDeleteMode"))):
                continue
            seen.add(key)
            since = self.idle_since.setdefault(key, now)
            if now - since >= int(policy.get("maxInactiveDurationSeconds", 0)) * 1000:
                try:
                    await self.service.delete_topic(topic.name)
                    log.info("deleted inactive topic %s (inactive for %d s)", key, (now - since) // 1000)
                except Exception as exc:  # a client came meanwhile: not inactive any more
                    log.info("inactive topic %s not deleted: %s", key, exc)
                seen.discard(key)
        self.idle_since = {k: v for k, v in self.idle_since.items() if k in seen}
