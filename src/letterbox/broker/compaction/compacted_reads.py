# Reads of a subscription whose consumer subscribed with read_compacted (Pulsar's
# readCompacted: Exclusive / Failover subscriptions and readers only).
# Invariant: below or at the compaction horizon such a subscription reads the topic's
# compacted view (the latest value per key, under the original message ids); past the
# horizon -- or with no view -- it reads the ledger as any other subscription does. Entries
# the view left out are never sent to it.
from __future__ import annotations

from typing import TYPE_CHECKING

from letterbox.broker.compaction.compaction_entries import compacted_out_mask, keyed_messages
from letterbox.storage.ack_ranges import to_ack_set_words

if TYPE_CHECKING:
    from letterbox.broker.compaction.compacted_topic import Subscription
    from letterbox.storage.entry import Entry


def read_compacted(sub: Subscription, start: int, limit: int) -> list[Entry] | None:
    """The next entries from `start` for a read_compacted subscription: the view's while
    `start` is within the horizon, then the ledger's after it; None when the ledger is to
    be read as usual (no view, or `start` past the horizon)."""
    compactor = sub.topic.service.compactor
    ledger = sub.topic.ledger
    view = compactor.views.horizon(ledger.ledger_id)
    if view is None or start > view.horizon:
        return None
    found = compactor.views.read(ledger.ledger_id, view, start, limit)
    if found:
        return found
    return ledger.read_entries(max(view.horizon + 1, ledger.first_position.entry_id), limit)


def compacted_entry(sub: Subscription, entry_id: int) -> Entry | None:
    """The entry to send again (a redelivery) to a read_compacted subscription: the view's
    copy within the horizon (the ledger may have trimmed the original), else None."""
    compactor = sub.topic.service.compactor
    ledger = sub.topic.ledger
    view = compactor.views.horizon(ledger.ledger_id)
    if view is None or entry_id > view.horizon:
        return None
    return compactor.views.read_one(ledger.ledger_id, view, entry_id)


def last_compacted_id(sub: Subscription) -> tuple[int, int] | None:
    """(entry id, batch index) of the last message a read_compacted subscription can get,
    when nothing was published after the horizon (Pulsar answers GetLastMessageId from
    the compacted view then, entry -1 for an empty view); None: the ledger's last entry
    answers."""
    compactor = sub.topic.service.compactor
    ledger = sub.topic.ledger
    view = compactor.views.horizon(ledger.ledger_id)
    if view is None or ledger.last_confirmed.entry_id > view.horizon:
        return None
    last = compactor.views.last(ledger.ledger_id, view)
    if last is None:  # every key removed: entry -1, which the clients read as "nothing to read"
        return -1, -1
    messages = keyed_messages(last.data)
    return last.entry_id, messages[-1].index if messages else -1


def compacted_ack_set(sub: Subscription, entry: Entry, ack_set: list[int] | None) -> list[int] | None:
    """The ack set to send with an entry of the view: the cursor's, with the messages the
    view marked compacted_out counted as acknowledged (the official clients skip acked
    batch indexes; Java clients skip compacted_out ones too)."""
    view = sub.topic.service.compactor.views.horizon(sub.topic.ledger.ledger_id)
    if view is None or entry.entry_id > view.horizon or entry.num_messages < 2:
        return ack_set
    size, out = compacted_out_mask(entry.data)
    if not out:
        return ack_set
    acked = out
    for index in sub.cursor.acked_indexes(entry.entry_id):
        acked |= 1 << index
    return to_ack_set_words(size, acked)
