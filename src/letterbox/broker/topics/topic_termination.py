# Topic termination (pulsar-admin `topics terminate`): a terminated persistent
# topic takes no more messages -- new producers are refused with
# TopicTerminatedError, a SEND that raced the termination gets a SEND_ERROR
# with the same code -- and every subscription that has acknowledged all of
# it tells its consumers REACHED_END_OF_TOPIC (end_of_topic.py). The last message id is fixed at termination and stored
# as metadata (policies/termination_record.py), so the state survives a
# restart; deleting the topic forgets it.
# Invariants: `topic.terminated` is None or the position of the last entry the
# topic will ever hold (entry -1 for a topic terminated empty); it is set
# before the termination is stored, so no append is reserved after it.
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from letterbox.broker.policies.termination_record import TERMINATED_KEY
from letterbox.broker.topics.end_of_topic import notify_end_of_topic
from letterbox.errors import LetterboxError, ServerError
from letterbox.storage.position import Position

if TYPE_CHECKING:
    from letterbox.broker.topics.topic import PersistentTopic
    from letterbox.broker.topics.topics_broker import TopicsBroker

class TopicTerminated(LetterboxError):
    code = ServerError.TopicTerminatedError


def refuse_producer(topic: object) -> None:
    """Raised at producer creation on a terminated topic."""
    if getattr(topic, "terminated", None) is not None:
        raise TopicTerminated(f"Topic {getattr(topic, 'name', '')} was already terminated")


async def terminate(service: TopicsBroker, topic: PersistentTopic) -> Position:
    """Terminate `topic` (idempotent): refuse further appends, wait for the appends already
    reserved to be durable, store the last position, close the producers (their reconnect
    is refused with TopicTerminatedError) and tell caught-up consumers the end was reached."""
    if topic.terminated is not None:
        return topic.terminated
    ledger = topic.ledger
    topic.terminated = Position(ledger.ledger_id, ledger.next_entry_id - 1)  # no more reservations
    await service.store.barrier()
    last = Position(ledger.ledger_id, ledger.next_entry_id - 1)
    topic.terminated = last
    value = json.dumps({"ledgerId": last.ledger_id, "entryId": last.entry_id})
    await service.store.put_metadata(TERMINATED_KEY + str(topic.name), value)
    topic.close_producers()
    for sub in topic.subscriptions.values():
        notify_end_of_topic(sub)
    return last
