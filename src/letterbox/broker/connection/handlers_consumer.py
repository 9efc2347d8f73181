# Consume-side requests of ServerCnx: SUBSCRIBE, FLOW, ACK,
# REDELIVER_UNACKNOWLEDGED_MESSAGES, CLOSE_CONSUMER, UNSUBSCRIBE and SEEK (what a consumer
# asks about where it is: handlers_consumer_queries.py).
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, cast

from letterbox.broker.policies.namespace_limits import check_new_subscription, check_new_topic
from letterbox.broker.redelivery.redelivery_policy import consumer_policy
from letterbox.broker.schemas.schema_registry import SchemaVersion, is_typed
from letterbox.broker.topics.consumer import Consumer
from letterbox.broker.topics.subscription import subscription_of
from letterbox.broker.topics.topic import NonPersistentTopic, PersistentTopic
from letterbox.errors import LetterboxError, NotAllowed, ServerError, ServiceNotReady
from letterbox.failure.consumer_properties import (
    DLQ_INITIAL_SUBSCRIPTION,
    DLQ_TOPIC,
    without_letterbox_properties,
)
from letterbox.names import name_problem
from letterbox.protocol import commands, pb
from letterbox.security.authorization import AuthorizationFailed, is_failure_topic_of
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.failure import FailurePolicy
    from letterbox.protocol import Frame

log = logging.getLogger("letterbox.consumer")
T = pb.BaseCommand
U64 = (1 << 64) - 1
I64_MAX = (1 << 63) - 1


class ConsumerNotFound(LetterboxError):
    code = ServerError.ConsumerNotFound


def consumer_of(cnx: ServerCnx, consumer_id: int) -> Consumer:
    c = cnx.consumers.get(consumer_id)
    if c is None:
        raise ConsumerNotFound(f"no consumer with id {consumer_id} on this connection")
    return c


def _start_entry(topic: PersistentTopic, mid: pb.MessageIdData) -> int:
    """Where a non-durable subscription starts for a client-given message id."""
    ledger_id, entry_id = mid.ledgerId, mid.entryId
    if ledger_id == U64 or entry_id == U64:  # MessageId.earliest is (-1, -1)
        return topic.ledger.first_position.entry_id
    if ledger_id >= I64_MAX:  # MessageId.latest
        return topic.ledger.last_confirmed.entry_id + 1
    # start at the entry itself: the client drops what precedes its start id
    return topic.entry_id_for(ledger_id, entry_id)


def handle_subscribe(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.subscribe
    if c.consumer_id in cnx.consumers:
        existing = cnx.consumers[c.consumer_id]
        attached = subscription_of(existing)
        if attached is not None and attached.name == c.subscription:
            cnx.send(commands.success(c.request_id))
            return
        raise ServiceNotReady(f"Consumer {c.consumer_id} is already present on the connection")
    name = TopicName.parse(c.topic)
    service = cnx.service
    metadata, policy = _admit(cnx, c, name)
    force = c.force_topic_creation if c.HasField("force_topic_creation") else True
    if force:
        check_new_topic(service, name)
    if c.HasField("schema") and is_typed(c.schema):  # the schema registry's check
        service.schemas.check_consumer(name, SchemaVersion.from_pb(c.schema))
    topic = service.get_topic(name, create=force)
    ks = c.keySharedMeta if c.HasField("keySharedMeta") else None
    sticky = None
    auto_split = True
    if ks is not None and ks.keySharedMode == pb.KeySharedMode.STICKY:
        auto_split = False
        sticky = [(r.start, r.end) for r in ks.hashRanges]
        if not sticky:
            raise NotAllowed("a Key_Shared consumer in STICKY mode must give its hash ranges")
    consumer = Consumer(
        cnx=cnx,
        consumer_id=c.consumer_id,
        name=c.consumer_name or service.new_consumer_name(),
        sub_type=c.subType,
        priority_level=c.priority_level,
        sticky_ranges=sticky,
        metadata=metadata,
        partition_index=name.partition_index,
    )
    durable = c.durable if c.HasField("durable") else True
    initial = "earliest" if c.initialPosition == pb.CommandSubscribe.Earliest else "latest"
    if isinstance(topic, NonPersistentTopic):
        _subscribe_non_persistent(cnx, c, topic, consumer, auto_split)
        return
    assert isinstance(topic, PersistentTopic)
    start = None
    if not durable and c.HasField("start_message_id"):
        start = _start_entry(topic, c.start_message_id)
    if durable:
        check_new_subscription(topic, c.subscription)
    sub = topic.subscription_for(c.subscription, durable, initial, start)
    cnx.consumers[c.consumer_id] = consumer  # known before a frame names it (ACTIVE_CONSUMER_CHANGE)
    try:
        sub.add_consumer(consumer, auto_split)  # dispatches on the next loop turn, flag set by then
        sub.read_compacted = bool(c.read_compacted)  # the last subscribed consumer's choice
        if policy is not None:
            sub.policy = policy  # PIP-22: the last created consumer's configuration wins
    except Exception as exc:
        cnx.consumers.pop(c.consumer_id, None)
        if isinstance(exc, LetterboxError) and not sub.consumers and not sub.durable:
            topic.remove_subscription(sub.name)
        raise
    cnx.send(commands.success(c.request_id))


def _admit(cnx: ServerCnx, c: pb.CommandSubscribe, name: TopicName) -> tuple[dict[str, str], FailurePolicy | None]:
    """What is refused before the topic is made (a refused subscribe leaves nothing behind):
    the subscription name, authorization, the dead letter target, the failure policy of the
    consumer's properties, read_compacted; the consumer's metadata and that policy."""
    if not c.subscription:
        raise NotAllowed("subscription name must not be empty")
    problem = name_problem("subscription", c.subscription)  # the admin API's rules too
    if problem is not None:
        raise NotAllowed(f"invalid {problem}")
    service = cnx.service
    service.authorization.check_consume(cnx.role, name, c.subscription)
    metadata = {kv.key: kv.value for kv in c.metadata}
    if service.config.pulsar_compatible_only:  # ignored, not refused, as Pulsar ignores unknown properties
        metadata = without_letterbox_properties(metadata)
    _check_dead_letter_target(cnx, name, c.subscription, metadata)
    try:
        policy = consumer_policy(metadata, c.subType)
    except NotAllowed as exc:
        # The official client raises a bare NotAllowedError; the reason is in its log and here.
        log.warning("subscribe of %r to %s from %s refused: %s", c.subscription, name, cnx.remote, exc.message)
        raise
    if c.read_compacted and c.subType not in (pb.CommandSubscribe.Exclusive, pb.CommandSubscribe.Failover):
        raise NotAllowed("Read compacted is only allowed on Exclusive and Failover subscriptions (and readers)")
    return metadata, policy


def _subscribe_non_persistent(cnx: ServerCnx, c: pb.CommandSubscribe, topic: NonPersistentTopic,
                              consumer: Consumer, auto_split: bool) -> None:
    np_sub = topic.subscriptions.get(c.subscription)
    if np_sub is None:
        from letterbox.broker.topics.topic import NonPersistentSubscription

        np_sub = NonPersistentSubscription(topic, c.subscription)
        topic.subscriptions[c.subscription] = np_sub
    cnx.consumers[c.consumer_id] = consumer  # known before a frame names it (ACTIVE_CONSUMER_CHANGE)
    try:
        np_sub.add_consumer(consumer, auto_split)
    except Exception:
        cnx.consumers.pop(c.consumer_id, None)
        raise
    consumer.subscription = None
    cnx.service.np_consumers[consumer] = np_sub
    cnx.send(commands.success(c.request_id))


def _check_dead_letter_target(cnx: ServerCnx, source: TopicName, subscription: str,
                              props: dict[str, str]) -> None:
    """A dead letter topic named in the consumer's properties is written by the broker on
    this consumer's behalf: unless it is the subscription's own failure topic, the role must
    be allowed to produce there (and to consume it, for an initial subscription)."""
    configured = props.get(DLQ_TOPIC)
    authz = cnx.service.authorization
    if not configured or not authz.enabled:
        return
    target = TopicName.parse(configured)
    if is_failure_topic_of(source, subscription, target):
        return
    if not authz.can_produce(cnx.role, target):
        raise AuthorizationFailed(
            f"Role {cnx.role} is not authorized to produce on {target}, named as dead letter topic "
            f"by consumer property {DLQ_TOPIC}"
        )
    initial = props.get(DLQ_INITIAL_SUBSCRIPTION)
    if initial:
        authz.check_consume(cnx.role, target, initial)


def handle_flow(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.flow
    consumer = consumer_of(cnx, c.consumer_id)
    sub = subscription_of(consumer)
    if sub is not None:
        sub.flow(consumer, c.messagePermits)
    else:
        np_sub = cnx.service.np_consumers.get(consumer)
        if np_sub is not None:
            np_sub.flow(consumer, c.messagePermits)


def handle_ack(cnx: ServerCnx, frame: Frame) -> None:
    """An ACK's ids, from the compiled codec's decode (`frame.ack`, the common shape) or from
    protobuf's parse (anything else, or no codec): the same acks either way."""
    ack = frame.ack
    c = frame.command.ack if ack is None else None
    ack_type: int
    if c is not None:
        consumer_id, ack_type = c.consumer_id, c.ack_type
        request_id = c.request_id if c.HasField("request_id") else None
    else:
        assert ack is not None
        consumer_id, ack_type, request_id = ack[0], ack[1], ack[2]
    consumer = consumer_of(cnx, consumer_id)
    sub = subscription_of(consumer)
    if sub is None:  # non-persistent: nothing to acknowledge
        if request_id is not None:
            cnx.send(commands.ack_response(consumer_id, request_id))
        return
    topic_ledger = sub.topic.ledger.ledger_id
    items: list[tuple[int, list[int] | None]] = []  # ids with an ack set (batch indexes), in order
    plain: list[int] = []  # whole entries
    if c is not None:
        count = len(c.message_id)
        for m in c.message_id:  # one pass, each id's fields read once
            if m.ledgerId == topic_ledger:
                acks = m.ack_set
                if acks:
                    items.append((m.entryId, list(acks)))
                else:
                    plain.append(m.entryId)
    else:
        assert ack is not None
        count = len(ack[4]) + len(ack[5])
        if ack[3] == topic_ledger:  # the decoded ids are all of one ledger
            plain, items = ack[4], cast("list[tuple[int, list[int] | None]]", ack[5])
    if ack_type == pb.CommandAck.Cumulative:
        if count != 1:
            raise NotAllowed("a cumulative ack carries exactly one message id")
        if plain:
            sub.ack_cumulative(consumer, plain[0], None)
        elif items:
            sub.ack_cumulative(consumer, items[0][0], items[0][1])
    else:
        sub.ack_individual(consumer, items, plain)
    if request_id is not None:
        rid = request_id

        def done(f: asyncio.Future[None]) -> None:
            err = None if f.cancelled() else f.exception()
            if err is None:
                cnx.send(commands.ack_response(consumer_id, rid))
            else:
                cnx.send(commands.ack_response(consumer_id, rid, ServerError.PersistenceError, str(err)))

        asyncio.ensure_future(sub.cursor.flush()).add_done_callback(done)


def handle_redeliver(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.redeliverUnacknowledgedMessages
    consumer = consumer_of(cnx, c.consumer_id)
    sub = subscription_of(consumer)
    if sub is None:
        return
    ledger_id = sub.topic.ledger.ledger_id
    if len(c.message_ids):
        sub.redeliver(consumer, [m.entryId for m in c.message_ids if m.ledgerId == ledger_id])
    else:
        sub.redeliver(consumer, None)


def handle_close_consumer(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.close_consumer
    consumer = cnx.consumers.pop(c.consumer_id, None)
    sub = subscription_of(consumer) if consumer is not None else None
    if consumer is not None:
        cnx.service.detach_consumer(consumer)
    if sub is None or not sub.durable:
        cnx.send(commands.success(c.request_id))
        return
    rid = c.request_id

    async def close() -> None:
        await sub.cursor.flush()  # a clean close leaves its acks durable
        cnx.send(commands.success(rid))

    cnx.spawn(close(), rid)


def handle_unsubscribe(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.unsubscribe
    consumer = consumer_of(cnx, c.consumer_id)
    sub = subscription_of(consumer)
    if sub is None:
        cnx.consumers.pop(c.consumer_id, None)
        cnx.service.detach_consumer(consumer)
        cnx.send(commands.success(c.request_id))
        return
    others = [x for x in sub.consumers if x is not consumer]
    force = c.HasField("force") and c.force
    if others and not force:
        raise LetterboxError(  # Pulsar's answer (SubscriptionBusy is a MetadataError)
            f"Subscription {sub.name!r} is busy: {len(others)} other connected consumer(s); "
            "close them before unsubscribing", ServerError.MetadataError)
    for other in others:
        other.cnx.close_consumer(other.consumer_id)
        sub.remove_consumer(other)
    cnx.consumers.pop(c.consumer_id, None)
    sub.remove_consumer(consumer)
    rid = c.request_id
    topic = sub.topic
    assert isinstance(topic, PersistentTopic)

    async def drop() -> None:
        await cnx.service.delete_subscription(topic, sub.name)
        cnx.send(commands.success(rid))

    cnx.spawn(drop(), rid)


def handle_seek(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.seek
    consumer = consumer_of(cnx, c.consumer_id)
    sub = subscription_of(consumer)
    if sub is None:
        raise NotAllowed("seek is not supported on non-persistent topics")
    topic = sub.topic
    assert isinstance(topic, PersistentTopic)
    ledger = topic.ledger
    if c.HasField("message_publish_time"):
        target = ledger.find_entry_by_publish_time(c.message_publish_time).entry_id
    elif c.HasField("message_id"):
        target = _start_entry(topic, c.message_id)
    else:
        raise NotAllowed("seek needs a message id or a publish time")
    sub.reset_to(target)
    if not sub.durable:
        sub.mark_sought()
    # like Pulsar: disconnect the subscription's consumers first, then answer; the
    # client completes its seek once it has re-subscribed at the new position
    for other in list(sub.consumers):
        other.cnx.close_consumer(other.consumer_id)
        sub.remove_consumer(other)
    cnx.send(commands.success(c.request_id))


HANDLERS: dict[int, Any] = {
    T.SUBSCRIBE: handle_subscribe,
    T.FLOW: handle_flow,
    T.ACK: handle_ack,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: handle_redeliver,
    T.CLOSE_CONSUMER: handle_close_consumer,
    T.UNSUBSCRIBE: handle_unsubscribe,
    T.SEEK: handle_seek,
}
