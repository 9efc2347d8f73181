# Publish-side requests of ServerCnx: PRODUCER, SEND, CLOSE_PRODUCER.
# SEND_RECEIPTs leave in send order and only after the entry is durable, and a
# refusal after the receipts of the producer's earlier SENDs (receipt_order.py).
# Every SEND is checked before it is stored (protocol/message_check.py: counts
# against the payload, sizes against max_message_size); a payload that must be
# decompressed past OFF_LOOP_BYTES is checked in a worker thread, and the
# producer's later SENDs queue behind it so entries keep their send order.
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from letterbox.broker.connection import send_batch
from letterbox.broker.connection.receipt_order import chain, error_in_order
from letterbox.broker.policies.namespace_limits import check_new_subscription, check_new_topic
from letterbox.broker.policies.topic_policies import check_new_producer
from letterbox.broker.schemas.schema_registry import SchemaVersion, is_typed, version_bytes
from letterbox.broker.topics import backlog_quota
from letterbox.broker.topics.producer import ACCESS_MODE_NAMES, Producer
from letterbox.broker.topics.topic import NonPersistentTopic, PersistentTopic
from letterbox.broker.topics.topic_termination import refuse_producer
from letterbox.errors import LetterboxError, NotAllowed, ServerError, ServiceNotReady
from letterbox.protocol import MalformedFrame, commands, pb
from letterbox.protocol.framing import Frame, SendFacts, SendScan, parse_send_payload
from letterbox.protocol.message_check import (
    InvalidMessage,
    check_message,
    chunk_id_of,
    needs_expanding,
)
from letterbox.protocol.send_decoder import SendCommand
from letterbox.storage.errors import StorageError
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx

log = logging.getLogger("letterbox.producer")
T = pb.BaseCommand
# payloads that expand to more than this are checked off the event loop
OFF_LOOP_BYTES = 256 * 1024


def handle_producer(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.producer
    rid, pid = c.request_id, c.producer_id
    cnx.closed_producers.discard(pid)  # the client took the broker's close: its SENDs count again
    if pid in cnx.pending_producers:
        raise ServiceNotReady(f"Producer {pid} is still being created on this connection")
    existing = cnx.producers.get(pid)
    if existing is not None:
        # a client retrying its create on the same connection gets the same answer
        cnx.send(_success(cnx, rid, existing))
        return
    name = TopicName.parse(c.topic)
    if c.producer_access_mode not in ACCESS_MODE_NAMES:
        raise NotAllowed(f"unknown producer access mode {c.producer_access_mode}")
    service = cnx.service
    schema_version = _admit(cnx, c, name)
    topic = service.get_topic(name, create=True)
    refuse_producer(topic)  # a terminated topic takes no producer (TopicTerminatedError)
    check_new_producer(topic)  # maxProducersPerTopic
    backlog_quota.check_producer(topic)  # ProducerBlockedQuotaExceeded{Exception,Error}
    user_named = bool(c.HasField("producer_name") and c.producer_name)
    pname = c.producer_name if user_named else service.new_producer_name()
    producer = Producer(cnx, pid, pname, topic, c.producer_access_mode, user_named)
    producer.metadata = {kv.key: kv.value for kv in c.metadata}
    producer.schema_version = schema_version
    if isinstance(topic, PersistentTopic):
        producer.highest_sequence_pushed = topic.ledger.last_pushed_sequence_id(pname)
        if c.HasField("initial_subscription_name") and c.initial_subscription_name:
            check_new_subscription(topic, c.initial_subscription_name)
            topic.subscription_for(c.initial_subscription_name, True, "earliest", None)
    wait = topic.add_producer(producer, c.topic_epoch if c.HasField("topic_epoch") else None)
    if wait is None:
        cnx.producers[pid] = producer
        cnx.send(_success(cnx, rid, producer))
        return
    _wait_for_exclusive(cnx, rid, producer, wait)


def _admit(cnx: ServerCnx, c: pb.CommandProducer, name: TopicName) -> bytes:
    """Authorization, storage health, topic limit, schema registry; the schema version."""
    service = cnx.service
    service.authorization.check_produce(cnx.role, name)
    health = service.store.health
    if name.persistent and health.degraded:
        # Not while storage writes fail: the official clients re-create their producer after
        # a SEND error and restart their send timeout when that succeeds, so accepting it
        # would resend (and fail) pending messages forever instead of timing them out.
        raise ServiceNotReady(f"the broker cannot store messages now ({health.describe()}); retry later")
    if c.HasField("initial_subscription_name") and c.initial_subscription_name:
        # creating a subscription is consuming (as Pulsar checks it)
        service.authorization.check_consume(cnx.role, name, c.initial_subscription_name)
    check_new_topic(service, name)
    if c.HasField("schema") and is_typed(c.schema):  # the schema registry: refuses an incompatible one
        return version_bytes(service.schemas.add(name, SchemaVersion.from_pb(c.schema))[0].version)
    return b""


def _wait_for_exclusive(cnx: ServerCnx, rid: int, producer: Producer, wait: asyncio.Future[None]) -> None:
    """WaitForExclusive: tell the client it is queued, answer again once it holds the topic."""
    cnx.pending_producers[pid := producer.producer_id] = wait
    cnx.send(_success(cnx, rid, producer, ready=False))

    def granted(fut: asyncio.Future[None]) -> None:
        cnx.pending_producers.pop(pid, None)
        if fut.cancelled() or cnx.closed:
            producer.topic.remove_producer(producer)
            return
        failure = fut.exception()
        if isinstance(failure, LetterboxError):  # fenced out by an ExclusiveWithFencing producer
            producer.closed = True
            cnx.send(commands.error(rid, failure.code, failure.message))
            return
        cnx.producers[pid] = producer
        cnx.send(_success(cnx, rid, producer))

    wait.add_done_callback(granted)


def _success(cnx: ServerCnx, rid: int, p: Producer, ready: bool = True) -> bytes:
    version = p.schema_version
    epoch = p.topic_epoch if p.topic_epoch is not None else p.topic.topic_epoch
    return commands.producer_success(
        rid, p.name, p.highest_sequence_pushed, version, topic_epoch=epoch if ready else None,
        producer_ready=ready,
    )


def handle_send(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.send
    assert c is not None  # every SEND frame carries its fields
    pid = c.producer_id
    producer = cnx.producers.get(pid)
    if producer is None:
        if pid in cnx.closed_producers:  # it crossed CLOSE_PRODUCER: resent once the producer is back
            return
        raise NotAllowed(f"no producer with id {pid} on this connection; create the producer first")
    hp = frame.headers_and_payload
    if hp is None:
        raise NotAllowed("SEND without a message payload")
    facts = frame.facts
    if _checked(producer, facts, cnx.service.config.max_message_size):
        assert facts is not None
        _publish(cnx, producer, pid, c.sequence_id, c.highest_sequence_id, hp, facts[0], facts[1], facts[2])
        return
    max_size = cnx.service.config.max_message_size
    try:
        meta, payload = _parsed(hp, max_size)
    except LetterboxError as exc:  # answered after the producer's earlier receipts, as each SEND is
        error_in_order(cnx, producer, c.sequence_id, exc.code, exc.message)
        return
    declared = c.num_messages
    if producer.checking is None and needs_expanding(meta) <= OFF_LOOP_BYTES:
        try:
            num = check_message(declared, meta, payload, max_size)
        except InvalidMessage as exc:
            _refuse(cnx, producer, c.sequence_id, exc)
            return
        _publish(cnx, producer, pid, c.sequence_id, c.highest_sequence_id, hp, num, meta.publish_time,
                 _deliver_at(meta))
        return
    # a SEND waiting for its check holds its bytes: it counts toward the connection's backpressure
    cnx.flow.publish_started(len(hp))
    task = asyncio.ensure_future(_check_off_loop(cnx, producer, producer.checking, frame, payload, meta))
    producer.checking = task
    cnx.service.track(task)


def _parsed(hp: bytes, max_size: int) -> tuple[pb.MessageMetadata, memoryview]:
    """A SEND's metadata and payload; LetterboxError if it is malformed, fails its CRC32C
    (ChecksumError) or is larger than max_message_size."""
    try:
        meta, payload, checksum_ok = parse_send_payload(hp)
    except MalformedFrame as exc:
        raise LetterboxError(f"malformed message: {exc}") from None
    if not checksum_ok:
        raise LetterboxError("message checksum mismatch: the payload was corrupted in transit", ServerError.ChecksumError)
    if len(payload) > max_size:
        raise NotAllowed(f"message of {len(payload)} bytes exceeds the maximum of {max_size} bytes")
    return meta, payload


def _checked(producer: Producer, facts: SendFacts | None, max_size: int) -> bool:
    """The compiled codec found the SEND surely acceptable (protocol/send_scan.py says what
    holds then), it fits max_message_size, and no earlier SEND of the producer is still being
    checked: it can be published from `facts` alone."""
    return facts is not None and producer.checking is None and facts[3] <= max_size


def handle_sends(cnx: ServerCnx, sends: list[SendScan], dispatch: Callable[[Frame], None]) -> None:
    """A run of SEND frames read by the compiled codec (ServerProtocol.take_sends), in order:
    one that is surely acceptable (facts, a ready producer, within max_message_size) is
    published here; any other goes to `dispatch` as a Frame, exactly as next_event gives it."""
    producers = cnx.producers
    max_size = cnx.service.config.max_message_size
    for pid, seq, num, highest, cmd, hp, facts in sends:
        if cnx.closed:  # as _process stops reading frames once the connection is closed
            return
        producer = producers.get(pid)
        if producer is None or facts is None or not _checked(producer, facts, max_size):
            dispatch(Frame(None, hp, send=SendCommand(pid, seq, num, highest), raw=cmd, facts=facts))
            continue
        try:
            _publish(cnx, producer, pid, seq, highest, hp, facts[0], facts[1], facts[2])
        except LetterboxError as exc:  # as ServerCnx._dispatch answers a SEND's error
            cnx.send(commands.send_error(pid, seq, exc.code, exc.message))
        except Exception as exc:  # a bug must not take the broker down
            log.exception("error handling SEND from %s", cnx.remote)
            cnx.send(commands.send_error(pid, seq, ServerError.UnknownError, f"internal error: {exc}"))


async def _check_off_loop(
    cnx: ServerCnx,
    producer: Producer,
    before: asyncio.Future[None] | None,
    frame: Frame,
    payload: memoryview,
    meta: pb.MessageMetadata,
) -> None:
    """Check a SEND in a worker thread (after the producer's earlier checks), then publish it."""
    c = frame.send
    assert c is not None
    try:
        if before is not None:
            await asyncio.wait([before])
        declared = c.num_messages
        max_size = cnx.service.config.max_message_size
        try:
            num = await asyncio.to_thread(check_message, declared, meta, payload, max_size)
        except InvalidMessage as exc:
            _refuse(cnx, producer, c.sequence_id, exc)
            return
        if not cnx.closed and cnx.producers.get(c.producer_id) is producer:
            assert frame.headers_and_payload is not None
            _publish(cnx, producer, c.producer_id, c.sequence_id, c.highest_sequence_id, frame.headers_and_payload,
                     num, meta.publish_time, _deliver_at(meta))
            send_batch.submit_producer(cnx, producer)  # not in an input pass: store it now
    finally:
        cnx.flow.publish_done(len(frame.headers_and_payload or b""))
        if producer.checking is asyncio.current_task():
            producer.checking = None


def _deliver_at(meta: pb.MessageMetadata) -> int | None:
    return meta.deliver_at_time if meta.HasField("deliver_at_time") else None


def _publish(
    cnx: ServerCnx, producer: Producer, pid: int, seq: int, highest: int | None, hp: bytes, num: int,
    publish_time: int, deliver_at_time: int | None,
) -> None:
    top = highest if highest is not None and highest > seq else seq
    topic = producer.topic
    nbytes = len(hp)
    producer.msg_in += num
    producer.bytes_in += nbytes
    if isinstance(topic, NonPersistentTopic):
        pos = topic.publish_now(hp, num)
        cnx.send(commands.send_receipt(pid, seq, pos.ledger_id, pos.entry_id, highest))
        return
    assert isinstance(topic, PersistentTopic)
    if topic.terminated is not None:  # a SEND that raced the termination
        error_in_order(cnx, producer, seq, ServerError.TopicTerminatedError, f"Topic {topic.name} was already terminated")
        return
    if deliver_at_time is not None and not topic.limits.delayed_delivery:
        deliver_at_time = None  # the namespace's delayedDelivery policy is off: deliver now
    if not producer.pushes(seq, top, topic.deduplication_enabled(), lambda: chunk_id_of(hp)):
        chain(cnx, producer, None, seq, highest)
        return
    try:
        eid = topic.reserve_publish(producer, send_batch.ops_for(cnx, producer), hp, num, publish_time, top,
                                    deliver_at_time)
    except StorageError as exc:  # cannot write now (storage fault): PersistenceError, in order
        send_batch.submit_producer(cnx, producer)
        fut = asyncio.get_running_loop().create_future()
        fut.set_exception(exc)
        cnx.flow.publish_started(nbytes)
        chain(cnx, producer, fut, seq, highest, nbytes)
        return
    send_batch.add(producer, eid, seq, highest, nbytes)


def _refuse(cnx: ServerCnx, p: Producer, seq: int, exc: InvalidMessage) -> None:
    """SEND_ERROR for a message the check refused, after the receipts of earlier SENDs.
    Its code is ChecksumError: the one SEND_ERROR code on which the official clients
    drop exactly that message (failing its send) and keep the connection; on any other
    code the C++ client (so the Python one) closes the connection and re-sends the same
    message forever. The text says what is wrong."""
    error_in_order(cnx, p, seq, ServerError.ChecksumError, f"message refused: {exc}")


def handle_close_producer(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.close_producer
    producer = cnx.producers.pop(c.producer_id, None)
    pending = cnx.pending_producers.pop(c.producer_id, None)
    if pending is not None:
        pending.cancel()
    if producer is not None:
        producer.topic.remove_producer(producer)
    cnx.send(commands.success(c.request_id))


HANDLERS: dict[int, Any] = {
    T.PRODUCER: handle_producer,
    T.SEND: handle_send,
    T.CLOSE_PRODUCER: handle_close_producer,
}
