# The stored record of a terminated topic: the position of the last entry it will ever
# hold, as metadata under TERMINATED_KEY + topic name, so a termination survives a restart
# and deleting the topic forgets it. topics/topic_termination.py writes it and acts on it;
# a topic reads it when it loads, and a move reads it to refuse a terminated target.
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from letterbox.storage.position import Position

if TYPE_CHECKING:
    from letterbox.storage.store import Store
    from letterbox.topic_name import TopicName

TERMINATED_KEY = "topic-terminated:"


def load(store: Store, name: TopicName) -> Position | None:
    raw = store.get_metadata(TERMINATED_KEY + str(name))
    if raw is None:
        return None
    data = json.loads(raw)
    return Position(int(data["ledgerId"]), int(data["entryId"]))


async def forget(store: Store, name: TopicName) -> None:
    if store.get_metadata(TERMINATED_KEY + str(name)) is not None:
        await store.put_metadata(TERMINATED_KEY + str(name), None)
