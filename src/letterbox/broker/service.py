# BrokerService: the one object that holds the broker's shared state (like
# uvicorn's ServerState / Pulsar's BrokerService): configuration, the store,
# the topic map, open connections, and the listening socket. Topics are
# loaded lazily from the store on first use; partitioned-topic metadata and
# schemas live in the store's metadata table.
from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import os
import time
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from letterbox import __version__
from letterbox.broker.compaction.compactor import Compactor
from letterbox.broker.connection.connection_guard import ConnectionLimiter
from letterbox.broker.connection.flow_control import PublishBuffer
from letterbox.broker.moves import redrive_locks
from letterbox.broker.moves.redrive_tasks import RedriveTasks
from letterbox.broker.policies import termination_record
from letterbox.broker.policies.default_namespace import namespace_exists, seed_defaults
from letterbox.broker.policies.namespace_limits import check_new_topic
from letterbox.broker.policies.namespace_policies import NamespacePolicyCache
from letterbox.broker.policies.topic_policies import auto_creation_allowed, forget_topic_policies
from letterbox.broker.redelivery.dead_letter_rate import DeadLetterRate
from letterbox.broker.schemas.schema_registry import SchemaRegistry
from letterbox.broker.topics.inactive_topics import InactiveTopicMonitor
from letterbox.broker.topics.message_expiry import MessageExpiryMonitor
from letterbox.broker.topics.subscription import subscription_of
from letterbox.broker.topics.topic import (
    NonPersistentSubscription,
    NonPersistentTopic,
    PersistentTopic,
    Topic,
)
from letterbox.clock import Clock, Periodic, RealClock, make_clock
from letterbox.errors import NotAllowed, TopicNotFound
from letterbox.security.authentication import AuthenticationService
from letterbox.security.authorization import AuthorizationService
from letterbox.storage.data_dir_lock import DataDirLock
from letterbox.storage.store import Store
from letterbox.storage.transaction import PendingAppend
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.broker.topics.consumer import Consumer
    from letterbox.config import BrokerConfig

log = logging.getLogger("letterbox")
PARTITIONS_KEY = "partitions:"
HOUSEKEEPING_SECONDS = 60.0


class BrokerStats:
    """Broker-wide counters (exposed by the metrics endpoint)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.dead_letters_by_reason: dict[str, int] = {}
        # (source topic, subscription, reason) -> messages dead-lettered from there
        self.dead_letters_by_source: dict[tuple[str, str, str], int] = {}
        self.dead_letter_rate = DeadLetterRate(clock or RealClock())
        # storage transactions of message moves that failed (the messages stayed where they
        # were), by operation: dead_letter, move, redrive, purge, expire
        self.storage_failures_by_operation: dict[str, int] = {}

    def dead_lettered(self, reason: str, messages: int, topic: str = "", subscription: str = "") -> None:
        self.dead_letters_by_reason[reason] = self.dead_letters_by_reason.get(reason, 0) + messages
        key = (topic, subscription, reason)
        self.dead_letters_by_source[key] = self.dead_letters_by_source.get(key, 0) + messages
        self.dead_letter_rate.record(reason, messages)

    def storage_failed(self, operation: str) -> int:
        n = self.storage_failures_by_operation.get(operation, 0) + 1
        self.storage_failures_by_operation[operation] = n
        return n


class BrokerService:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.version = __version__
        # every broker-side "now" and timer (letterbox/clock.py); manual only for tests
        self.clock: Clock = make_clock(config.clock)
        self.data_dir_lock = DataDirLock(config.data_dir)
        self.store = Store(config.data_dir, sync=config.sync, cache_bytes=config.cache_size_mb * 1024 * 1024)  # type: ignore[arg-type]
        self.topics: dict[str, Topic] = {}
        self.stats = BrokerStats(self.clock)
        self.namespace_policies: NamespacePolicyCache = NamespacePolicyCache(self)
        self.authentication = AuthenticationService(config)
        self.authorization = AuthorizationService(self)
        self.expiry = MessageExpiryMonitor(self)
        self.redrive_tasks = RedriveTasks(self)  # persistent redrive tasks, resumed at start
        self.schemas: SchemaRegistry = SchemaRegistry(self)  # schema versions per topic (broker/schemas/schema_registry.py)
        self.compactor: Compactor = Compactor(self)  # topic compaction runs and the compactionThreshold monitor
        self.inactive_topics = InactiveTopicMonitor(self)  # inactiveTopicPolicies (namespace)
        self.connections: set[ServerCnx] = set()
        self.connection_limiter: ConnectionLimiter = ConnectionLimiter(config)
        self.publish_buffer: PublishBuffer = PublishBuffer(config)
        self.np_consumers: dict[Consumer, NonPersistentSubscription] = {}
        # bound ports of the pulsar:// and pulsar+ssl:// listeners (0: that listener is off)
        self.port = 0
        self.tls_port = 0
        self._servers: list[asyncio.base_events.Server] = []
        # unique across restarts, so generated producer names never inherit old sequence ids
        self._name_prefix = f"{config.cluster_name}-{base64.b32encode(os.urandom(5)).decode().lower()}"
        self._producer_ids = itertools.count()
        self._consumer_ids = itertools.count()
        self._np_ledger_ids = itertools.count(1 << 40)
        self.started_at = time.time()
        self._tasks: set[asyncio.Future[None]] = set()
        self._housekeeping: Periodic | None = None
        self._failures_logged: set[tuple[str, float]] = set()

    # --- lifecycle -------------------------------------------------------
    async def start(self) -> None:
        # one broker per data directory: refuse at once if another holds it
        self.data_dir_lock.acquire()
        try:
            await self._start_locked()
        except BaseException:
            for server in self._servers:
                server.close()
            await self.store.close()
            self.data_dir_lock.release()
            raise

    async def _start_locked(self) -> None:
        await self.store.start()
        await seed_defaults(self)  # public/default, before any client can connect
        from letterbox.broker.connection.inbound import open_connection

        loop = asyncio.get_running_loop()
        cfg = self.config
        if cfg.port is not None:
            server = await loop.create_server(
                lambda: open_connection(self), host=cfg.bind, port=cfg.port, backlog=1024
            )
            self._servers.append(server)
            self.port = server.sockets[0].getsockname()[1]
        if cfg.broker_service_port_tls is not None:
            from letterbox.security.tls import server_context

            server = await loop.create_server(
                lambda: open_connection(self, tls=True), host=cfg.bind, port=cfg.broker_service_port_tls,
                backlog=1024, ssl=server_context(cfg),
            )
            self._servers.append(server)
            self.tls_port = server.sockets[0].getsockname()[1]
        self.data_dir_lock.set_address(
            f"pulsar://{cfg.bind}:{self.port}" if self.port else f"pulsar+ssl://{cfg.bind}:{self.tls_port}"
        )
        # retention by time (broker default or a namespace policy) runs on a clock
        self._housekeeping = Periodic(self.clock, HOUSEKEEPING_SECONDS, self._expire_retained).start()
        self.expiry.start()
        self.redrive_tasks.resume_all()
        self.compactor.start()
        self.inactive_topics.start()

    def _expire_retained(self) -> None:
        """Retention and the replay window run on a clock: acked entries age out even when
        no ack arrives."""
        for topic in self.topics.values():
            if isinstance(topic, PersistentTopic) and (
                topic.ledger.retention_ms > 0 or topic.ledger.retention_bytes >= 0 or topic.ledger.replay_ms > 0
            ):
                topic.ledger.trim()

    async def stop(self) -> None:
        await self.redrive_tasks.pause_all()  # running tasks stay recorded as running
        await self.expiry.stop()
        await self.compactor.stop()
        self.inactive_topics.stop()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        for server in self._servers:
            server.close()
        from letterbox.protocol import commands

        for cnx in list(self.connections):
            # tell clients their producers and consumers are gone, so they reconnect
            for producer in list(cnx.producers.values()):
                cnx.send(commands.close_producer(producer.producer_id), producer_id=producer.producer_id)
            for consumer in list(cnx.consumers.values()):
                cnx.send(commands.close_consumer(consumer.consumer_id), consumer_id=consumer.consumer_id)
            cnx.close()
        for server in self._servers:
            await server.wait_closed()
        await self.store.close()
        self.data_dir_lock.release()

    def storage_failed(self, operation: str, exc: BaseException, what: str) -> None:
        """A move's storage transaction failed (nothing moved): count it; log one line
        (no traceback) per operation and degraded period, the repeats at debug level."""
        n = self.stats.storage_failed(operation)
        key = (operation, self.store.health.since)
        level = logging.DEBUG if key in self._failures_logged else logging.WARNING
        self._failures_logged.add(key)
        log.log(level, "%s of %s failed, nothing moved (failure %d): %s", operation, what, n, exc)

    # --- naming ----------------------------------------------------------
    def new_producer_name(self) -> str:
        return f"{self._name_prefix}-{next(self._producer_ids)}"

    def new_consumer_name(self) -> str:
        return f"{self._name_prefix}-c{next(self._consumer_ids)}"

    # --- topics ----------------------------------------------------------
    def get_topic(self, name: TopicName, create: bool = True) -> Topic:
        key = str(name)
        topic = self.topics.get(key)
        if topic is not None:
            return topic
        if self.partitions_of(name, create=False) > 0:
            raise NotAllowed(
                f"{name} is a partitioned topic; produce to or consume from its partitions "
                f"({name}-partition-<i>) or let the client look up its partitions"
            )
        if not name.persistent:
            if not namespace_exists(self, name.namespace_name):
                raise TopicNotFound(_no_namespace(name))
            topic = NonPersistentTopic(self, name, next(self._np_ledger_ids))
        else:
            ledger = self.store.get_ledger(key)
            if ledger is None:
                if not (create and self.may_auto_create(name)):
                    if not namespace_exists(self, name.namespace_name):
                        raise TopicNotFound(_no_namespace(name))
                    raise TopicNotFound(f"Topic {name} does not exist")
                ledger = self.store.open_ledger(key)
            ledger.clock_ms = self.clock.now_ms
            topic = PersistentTopic(self, name, ledger)
        self.topics[key] = topic
        return topic

    def redrive_running(self, dlq_name: str) -> bool:
        """Whether a redrive of the dead letter topic `dlq_name` runs now (moves/redrive_locks.py)."""
        return redrive_locks.redrive_running(dlq_name)

    def count_broker_appends(self, appends: Iterable[PendingAppend]) -> None:
        """Count the committed broker-side appends of a transaction (dead letters, moves,
        redrives) in their target topics' in-counters, as if a producer had sent them."""
        for append in appends:
            topic = self.topics.get(append.ledger.name)
            if topic is not None:
                topic.msg_in += append.num_messages
                topic.bytes_in += len(append.data)

    def persistent_topic(self, name: TopicName, create: bool = True) -> PersistentTopic:
        """The persistent topic `name`, loaded or (with `create`) created; NotAllowed for a
        non-persistent name, TopicNotFound as get_topic."""
        if not name.persistent:
            raise NotAllowed(f"topic {name} must be persistent")
        topic = self.get_topic(name, create)
        if not isinstance(topic, PersistentTopic):  # cannot happen: persistent names load one
            raise NotAllowed(f"topic {name} must be persistent")
        return topic

    def loaded_persistent_topics(self) -> list[PersistentTopic]:
        return [t for t in self.topics.values() if isinstance(t, PersistentTopic)]

    def may_auto_create(self, name: TopicName) -> bool:
        """Whether a client (or an admin call that auto-creates, as Pulsar's create-subscription)
        may create `name` by using it."""
        if auto_creation_allowed(self, name) and namespace_exists(self, name.namespace_name):
            return True
        parent = name.partitioned_parent
        return parent != name and 0 <= name.partition_index < self.partitions_of(parent, create=False)

    def partitions_of(self, name: TopicName, create: bool = False) -> int:
        value = self.store.get_metadata(PARTITIONS_KEY + str(name))
        return int(value) if value else 0

    def should_auto_partition(self, name: TopicName) -> bool:
        """True when a first lookup of `name` should create it as a partitioned topic."""
        cfg = self.config
        return (
            auto_creation_allowed(self, name)
            and namespace_exists(self, name.namespace_name)
            and cfg.auto_topic_creation_type == "partitioned"
            and name.persistent
            and name.partition_index < 0
            and self.partitions_of(name) == 0
            and str(name) not in self.topics
            and self.store.get_ledger(str(name)) is None
        )

    async def create_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        if partitions < 1:
            raise NotAllowed("number of partitions must be at least 1")
        check_new_topic(self, name, partitions - self.partitions_of(name))
        await self.store.put_metadata(PARTITIONS_KEY + str(name), str(partitions))

    def list_topics(self, namespace: str) -> list[str]:
        names: set[str] = set()
        for ledger_name in self.store.ledger_names():
            t = TopicName.parse(ledger_name)
            if t.namespace_name == namespace:
                names.add(ledger_name)
        for key, value in self.store.metadata_items(PARTITIONS_KEY):
            t = TopicName.parse(key[len(PARTITIONS_KEY) :])
            if t.namespace_name == namespace:
                names.update(str(t.partition(i)) for i in range(int(value)))
        for key, topic in self.topics.items():
            if topic.name.namespace_name == namespace:
                names.add(key)
        return sorted(names)

    def background(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a fire-and-forget storage task, keeping a reference until it ends."""
        self.track(asyncio.ensure_future(coro))

    def track(self, task: asyncio.Future[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- consumers -------------------------------------------------------
    def detach_consumer(self, consumer: Consumer) -> None:
        sub = subscription_of(consumer)
        if sub is not None:
            sub.remove_consumer(consumer)
            if not sub.durable and not sub.consumers and not sub.sought:
                sub.topic.remove_subscription(sub.name)
            return
        np_sub = self.np_consumers.pop(consumer, None)
        if np_sub is not None:
            np_sub.remove_consumer(consumer)
            if not np_sub.consumers:
                np_sub.topic.subscriptions.pop(np_sub.name, None)

    async def delete_subscription(self, topic: PersistentTopic, name: str) -> None:
        topic.remove_subscription(name)
        if name in topic.ledger.cursors():
            await topic.ledger.delete_cursor(name)

    # --- namespace policies ---------------------------------------------------
    def apply_namespace_policies(self, namespace: str) -> None:
        """A namespace policy changed: its loaded topics take up the new policies,
        trim by the new retention and wake their dispatchers."""
        for topic in list(self.topics.values()):
            if isinstance(topic, PersistentTopic) and topic.name.namespace_name == namespace:
                topic.refresh_policies()
                topic.ledger.trim()
                for sub in topic.subscriptions.values():
                    if sub.consumers:
                        sub.schedule_dispatch()

    # --- admin API support --------------------------------------------------
    def topic_exists(self, name: TopicName) -> bool:
        """A non-partitioned topic (or a partition) that is loaded or stored."""
        key = str(name)
        if key in self.topics:
            return True
        return name.persistent and self.store.get_ledger(key) is not None

    async def delete_topic(self, name: TopicName, force: bool = False) -> None:
        """Delete a non-partitioned topic (or one partition) and its stored entries and cursors.
        Refused with NotAllowed while clients are connected, unless `force` closes them."""
        key = str(name)
        topic = self.topics.get(key)
        redriving = self.redrive_tasks.running_on(name)  # small hook (review): a DLQ under a redrive
        if redriving is not None:
            if not force:
                raise NotAllowed(f"Topic {name} has a redrive running (task {redriving.id}): cancel it "
                                 "(DELETE .../letterbox/redrive) or delete with force")
            await self.redrive_tasks.stop_for_deletion(name)
        if topic is not None:
            if topic.client_count() and not force:
                raise NotAllowed(f"Topic {name} has active producers or consumers")
            topic.close_clients()
            self.topics.pop(key, None)
        if name.persistent:
            ledger = self.store.get_ledger(key)
            if ledger is not None:
                await self.compactor.topic_deleted(key, ledger.ledger_id)
            await self.store.delete_ledger(key)
            await termination_record.forget(self.store, name)
        await forget_topic_policies(self, name)

    async def delete_partitioned_topic(self, name: TopicName, force: bool = False) -> None:
        n = self.partitions_of(name)
        parts = [name.partition(i) for i in range(n)]
        if not force:
            for part in parts:
                topic = self.topics.get(str(part))
                if topic is not None and topic.client_count():
                    raise NotAllowed(f"Partition {part} has active producers or consumers")
        for part in parts:
            await self.delete_topic(part, force=True)
        await self.store.put_metadata(PARTITIONS_KEY + str(name), None)
        await forget_topic_policies(self, name)


def _no_namespace(name: TopicName) -> str:
    """Topics are created only inside existing namespaces (as Pulsar)."""
    return (f"Topic {name} does not exist: namespace {name.namespace_name} does not exist "
            f"(create it first: PUT /admin/v2/namespaces/{name.namespace_name})")
