# The broker as what works on its loaded topics sees it (inactive-topic deletion, message
# expiry, termination, the connections): TopicBroker, with the loaded topics as they are
# (topic.PersistentTopic, topic.Topic) and their deletion. service.BrokerService meets it.
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from letterbox.broker.topics.topic_broker import TopicBroker

if TYPE_CHECKING:
    from letterbox.broker.topics.topic import PersistentTopic, Topic
    from letterbox.topic_name import TopicName


class TopicsBroker(TopicBroker, Protocol):
    @property
    def topics(self) -> Mapping[str, Topic]: ...

    def persistent_topic(self, name: TopicName, create: bool = True) -> PersistentTopic: ...
    def loaded_persistent_topics(self) -> list[PersistentTopic]: ...
    async def delete_topic(self, name: TopicName, force: bool = False) -> None: ...
