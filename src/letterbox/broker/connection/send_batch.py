# The SENDs to one topic read in one pass over a connection's input (one data_received),
# from one or several of its producers, go to storage as ONE writer submission, answered
# in the loop callback that takes its commit back (the receipts written and flushed there,
# not a loop pass later), instead of a submission, a future and a loop callback each.
# Entry ids are still assigned as each SEND is handled (topic.reserve_publish), in arrival
# order, into runs of rows (storage/append_run.py): one write op per pass, no op or Entry
# per SEND until it commits.
#
# Invariants:
#   * the producers of one topic with reserved SENDs (cnx.send_batches[topic]) share one list
#     of write ops (ops_for) and are submitted together, so a submission's entry ids are
#     consecutive however their SENDs interleave;
#   * reserved appends are submitted, in reservation order, before the connection handles
#     any frame other than a SEND and before its input pass ends (ServerCnx._process), so
#     nothing else is submitted for their ledger in between: ledgers commit their ids in
#     order;
#   * receipts are written only after the submission committed (durable), in send order,
#     and before any later receipt, duplicate answer or refusal of the same producer (each
#     takes its place in the producer's answer chain, answer_chain.py; `submit_producer`
#     runs before those are chained);
#   * the batch's bytes and SEND count enter the connection's flow control once, when it is
#     submitted (still inside the input pass), and leave it once, with its receipts;
#   * a submission is atomic: if it fails, every SEND in it gets SEND_ERROR
#     (PersistenceError), as each would have (a failed append fences its ledger).
from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

from letterbox.broker.connection.answer_chain import Place, answer, take_place
from letterbox.broker.topics.topic import PersistentTopic
from letterbox.errors import ServerError
from letterbox.protocol import commands
from letterbox.protocol.receipts import encode_pending_receipts
from letterbox.storage.errors import StorageError, is_storage_fault

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.broker.topics.producer import Pending, Producer, ProducerTopic
    from letterbox.storage.ops import WriteOp

log = logging.getLogger("letterbox.producer")

_Batch = tuple["Producer", list["Pending"], int, Place]  # a producer's SENDs of the submission, their bytes


def ops_for(cnx: ServerCnx, producer: Producer) -> list[WriteOp]:
    """The write ops the producer's next SEND of this pass is reserved into: shared with the
    connection's other producers of the same topic that hold reserved SENDs, so that their
    entry ids, given in arrival order, go to storage as one run of consecutive ids."""
    if not producer.unsubmitted:
        group = cnx.send_batches.get(producer.topic)
        if group is None:
            producer.unsubmitted_ops = []  # not one a refused SEND left it sharing
            cnx.send_batches[producer.topic] = [producer]
        else:
            producer.unsubmitted_ops = group[0].unsubmitted_ops
            group.append(producer)
    return producer.unsubmitted_ops


def add(producer: Producer, entry_id: int, seq: int, highest: int | None, nbytes: int) -> None:
    """A SEND whose entry id was reserved into ops_for(); stored with the producer's others
    of this pass. Its bytes count toward the connection's backpressure from submit_producer
    on (the same input pass: reading can only pause between passes)."""
    producer.unsubmitted.append((entry_id, seq, highest, nbytes))


def submit(cnx: ServerCnx) -> None:
    """Submit every producer's reserved SENDs (end of an input pass, or before another frame)."""
    for topic in list(cnx.send_batches):
        _submit_group(cnx, topic)


def submit_producer(cnx: ServerCnx, p: Producer) -> None:
    """Submit the producer's reserved SENDs, with those of the producers sharing its ops."""
    if p.unsubmitted:
        _submit_group(cnx, p.topic)


def _submit_group(cnx: ServerCnx, topic: ProducerTopic) -> None:
    group = cnx.send_batches.pop(topic, None)
    if not group:
        return
    ops = group[0].unsubmitted_ops  # the list every producer of the group reserved into
    members = [q for q in dict.fromkeys(group) if q.unsubmitted]  # one listed twice: a refused SEND
    if not members:
        return
    assert isinstance(topic, PersistentTopic)
    lid = topic.ledger.ledger_id
    batches: list[_Batch] = []
    for q in members:
        batch, q.unsubmitted, q.unsubmitted_ops = q.unsubmitted, [], []
        nbytes = 0
        for b in batch:
            nbytes += b[3]
        cnx.flow.publish_started(nbytes, len(batch))  # one count per batch, given back in _answer
        batches.append((q, batch, nbytes, take_place(q)))
    then = functools.partial(_answer, cnx, lid, batches)
    try:
        topic.ledger.submit_appends(ops, then)
    except StorageError as exc:
        then(exc)


def _answer(cnx: ServerCnx, ledger_id: int, batches: list[_Batch], err: BaseException | None) -> None:
    """The submission's outcome, in the callback that takes its commit back: each producer's
    receipts (or refusals) in its place, and what could be written goes out at once."""
    for p, batch, nbytes, place in batches:
        cnx.flow.publish_done(nbytes, len(batch))
        if err is not None:
            seqs = [seq for _eid, seq, _highest, _nbytes in batch]
            answer(place, functools.partial(refuse_unstored, cnx, p, seqs, err))
        else:
            answer(place, functools.partial(_receipts, cnx, p.producer_id, ledger_id, batch, len(batch)))
    cnx.flush()


def _receipts(cnx: ServerCnx, producer_id: int, ledger_id: int, batch: list[Pending], count: int) -> None:
    cnx.send(encode_pending_receipts(producer_id, ledger_id, batch), count=count)


def refuse_unstored(cnx: ServerCnx, p: Producer, seqs: list[int], err: BaseException | None) -> None:
    """The one reply to SENDs that were not stored: PersistenceError for each, in order. A
    storage fault is logged once by the store (degraded); a resend must not be taken for a
    duplicate of what was never stored, so the producer's dedup position is read back."""
    level = logging.DEBUG if err is not None and is_storage_fault(err) else logging.ERROR
    log.log(level, "append failed for producer %s: %s", p.name, err)
    topic = p.topic
    if isinstance(topic, PersistentTopic) and topic.deduplication_enabled():
        p.highest_sequence_pushed = topic.ledger.last_pushed_sequence_id(p.name)
    for seq in seqs:
        cnx.send(commands.send_error(p.producer_id, seq, ServerError.PersistenceError, f"could not store message: {err}"))
