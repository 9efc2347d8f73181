# Letterbox extension: move one message of a subscription to another topic
# and acknowledge it, in one storage transaction (broker/moves/message_mover.py).
#
#   POST /admin/v2/persistent/{tenant}/{ns}/{topic}/subscription/{sub}/letterbox/move
#   {"messageId": "ledger:entry[:partition[:batchIndex]]", "target": "<topic>",
#    "properties": {...}, "deliverAfterMs": 0, "deadLetterReason": null,
#    "description": null, "initialSubscription": null}
#   -> 200 {"moved": true|false, "messageId": "<id in target>"|null}
#
# `moved` is false when the message was already acknowledged in the
# subscription (asked twice, or acknowledged meanwhile): the call is
# idempotent, so a client may repeat it after a lost response.
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import TOPIC_BASE, json_body, name_field, topic_name
from letterbox.broker import MoveRequest, PersistentTopic, move_message
from letterbox.message_properties import DEAD_LETTER_REASONS
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker import BrokerService

MOVE_PATH = TOPIC_BASE + "/subscription/{subscription}/letterbox/move"
# ledger and entry ids (up to 18 digits, so below 2^63), partition and batch index -1 or more
_MESSAGE_ID_RE = re.compile(r"[0-9]{1,18}:[0-9]{1,18}(:-?[0-9]{1,9}(:-?[0-9]{1,9})?)?")


def add_move_routes(app: web.Application, service: BrokerService) -> None:
    async def move(request: web.Request) -> web.Response:
        name = topic_name(request)
        if not service.topic_exists(name):
            raise AdminError(404, f"Topic {name} not found")
        topic = service.get_topic(name, create=False)
        if not isinstance(topic, PersistentTopic):
            raise AdminError(412, "messages can only be moved from persistent topics")
        sub = topic.subscriptions.get(request.match_info["subscription"])
        if sub is None:
            raise AdminError(404, f"Subscription {request.match_info['subscription']} not found")
        req = _parse(await json_body(request), topic)
        role = request.get("role")
        if not service.authorization.can_move(role, name, sub.name, req.target):
            raise AdminError(403, f"Role {role} may not move messages of {name} to {req.target}: it needs "
                             "produce there, or a target named <topic>-<subscription>-... in the same namespace")
        result = await move_message(sub, req)
        return web.json_response({"moved": result.moved, "messageId": result.message_id})

    app.router.add_post(MOVE_PATH, move)


def _parse(body: Any, topic: PersistentTopic) -> MoveRequest:
    if not isinstance(body, dict):
        raise AdminError(400, "Body must be a JSON object with messageId and target")
    mid = body.get("messageId")
    if not isinstance(mid, str):
        raise AdminError(400, "messageId must be a string 'ledger:entry[:partition[:batchIndex]]'")
    if not _MESSAGE_ID_RE.fullmatch(mid):
        raise AdminError(400, f"messageId {mid[:80]!r} is not 'ledger:entry[:partition[:batchIndex]]'")
    parts = [int(p) for p in mid.split(":")]
    ledger_id, entry_id = parts[0], parts[1]
    batch_index = parts[3] if len(parts) == 4 else -1
    if ledger_id != topic.ledger.ledger_id:
        raise AdminError(404, f"message {mid} is not on {topic.name} (ledger {topic.ledger.ledger_id})")
    target = body.get("target")
    if not isinstance(target, str) or not target:
        raise AdminError(400, "target must be a topic name")
    props = body.get("properties") or {}
    if not isinstance(props, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in props.items()
    ):
        raise AdminError(400, "properties must be an object of string values")
    delay = body.get("deliverAfterMs", 0)
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise AdminError(400, "deliverAfterMs must be a non-negative integer")
    reason, description = (_optional_str(body, key) for key in ("deadLetterReason", "description"))
    if reason is not None and reason not in DEAD_LETTER_REASONS:
        # a category, not free text (that goes in "description"): it labels metric series
        raise AdminError(400, f"deadLetterReason must be one of {', '.join(DEAD_LETTER_REASONS)} "
                              f"(got {reason[:80]!r}); put free text in description")
    initial = name_field(body, "initialSubscription", "subscription")
    return MoveRequest(
        entry_id=entry_id,
        batch_index=batch_index,
        target=TopicName.parse(target),
        properties=props,
        deliver_after_ms=delay,
        dead_letter_reason=reason,
        description=description,
        initial_subscription=initial,
    )


def _optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise AdminError(400, f"{key} must be a string")
    return value
