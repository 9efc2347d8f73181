# The broker as a client connection sees it: a Protocol that service.BrokerService meets,
# so that a connection holds its broker without naming the composition root. It adds to
# what topics see (topics.topics_broker.TopicsBroker) authentication, the listening ports and
# version it reports, the set of open connections with their limits and publish buffer,
# topic lookup and creation, and the names the broker gives to unnamed clients.
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from letterbox.broker.topics.topics_broker import TopicsBroker

if TYPE_CHECKING:
    from letterbox.broker.connection.connection_guard import ConnectionLimiter
    from letterbox.broker.connection.flow_control import PublishBuffer
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.broker.topics.topic import NonPersistentSubscription, PersistentTopic, Topic
    from letterbox.security.authentication import AuthenticationService
    from letterbox.topic_name import TopicName


class ConnectionBroker(TopicsBroker, Protocol):
    @property
    def version(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def tls_port(self) -> int: ...
    @property
    def authentication(self) -> AuthenticationService: ...
    @property
    def connections(self) -> set[Any]: ...  # the open ServerCnx (server_cnx.py imports this module)
    @property
    def connection_limiter(self) -> ConnectionLimiter: ...
    @property
    def publish_buffer(self) -> PublishBuffer: ...
    @property
    def np_consumers(self) -> dict[Consumer, NonPersistentSubscription]: ...

    def get_topic(self, name: TopicName, create: bool = True) -> Topic: ...
    def should_auto_partition(self, name: TopicName) -> bool: ...
    async def create_partitioned_topic(self, name: TopicName, partitions: int) -> None: ...
    async def delete_subscription(self, topic: PersistentTopic, name: str) -> None: ...
    def new_producer_name(self) -> str: ...
    def new_consumer_name(self) -> str: ...
