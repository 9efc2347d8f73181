# Placing each subscription on the target where it stood on the source. Pulsar's admin API can
# put a cursor at a message (create the subscription there, or reset it), which covers the
# mark-delete position; the messages acknowledged individually after it are then acknowledged on
# the target by a consumer of the subscription that receives up to the last of them and closes,
# leaving the rest unacknowledged (they come back to the next consumer).
# Idempotent: a rerun resets the cursor to the same message and acknowledges the same set.
# Invariant: the target message of a source message is found by its MIGRATED_MESSAGE_ID, so the
# positions hold however many runs the copy took.
from __future__ import annotations

from typing import Any, Protocol

from letterbox.migrate.copy import MIGRATED_MESSAGE_ID, read_all
from letterbox.migrate.plan import SubscriptionPosition, TopicPlan

LATEST = {"ledgerId": 2**63 - 1, "entryId": 2**63 - 1}
RECEIVE_TIMEOUT_MS = 10_000


class TargetAdmin(Protocol):
    def request(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None,
                timeout: float | None = None) -> Any: ...
    def get_json(self, path: str, query: dict[str, str] | None = None) -> Any: ...


def target_ids(target: Any, topic: str) -> list[tuple[int, int, Any]]:
    """(source entry id, source batch index, target message id) of each migrated message of
    `topic`, in order."""
    out = []
    for msg in read_all(target, topic):
        origin = msg.properties().get(MIGRATED_MESSAGE_ID)
        if origin is not None:
            _ledger, entry, batch = origin.split(":")
            out.append((int(entry), int(batch), msg.message_id()))
    return out


def _position(mid: Any) -> dict[str, int]:
    return {"ledgerId": mid.ledger_id(), "entryId": mid.entry_id()}


def place(admin: TargetAdmin, target: Any, plan: TopicPlan) -> None:
    """Every subscription of `plan` at its source position on the target."""
    if not plan.subscriptions:
        return
    ids = target_ids(target, plan.name)
    path = "/admin/v2/" + plan.name.replace("persistent://", "persistent/", 1)
    existing = set(admin.get_json(f"{path}/subscriptions"))
    for sub in plan.subscriptions:
        start = next((i for i, (eid, bi, _mid) in enumerate(ids) if not sub.is_acked(eid, bi)), len(ids))
        at = LATEST if start == len(ids) else _position(ids[start][2])
        if sub.name in existing:
            admin.request("POST", f"{path}/subscription/{sub.name}/resetcursor", at)
        else:
            admin.request("PUT", f"{path}/subscription/{sub.name}", at)
        _ack_after(target, plan.name, sub, ids[start:])


def _ack_after(target: Any, topic: str, sub: SubscriptionPosition, ids: list[tuple[int, int, Any]]) -> None:
    """Acknowledge on the target the messages of `ids` (those from the subscription's first
    unacknowledged one on) that `sub` acknowledged; each message of a partly acknowledged batch
    on its own, as the target stores them unbatched."""
    import pulsar

    todo = {str(mid) for eid, bi, mid in ids if sub.is_acked(eid, bi)}
    if not todo:
        return
    consumer = target.subscribe(topic, sub.name, consumer_type=pulsar.ConsumerType.Shared,
                                receiver_queue_size=1000)
    try:
        while todo:
            msg = consumer.receive(RECEIVE_TIMEOUT_MS)
            key = str(msg.message_id())
            if key in todo:
                consumer.acknowledge(msg)
                todo.discard(key)
    finally:
        consumer.close()
