# The delivery attempt log over the admin API (letterbox extension;
# broker/redelivery/delivery_attempts.py does the work):
#
#   GET  /admin/v2/persistent/{t}/{ns}/{topic}/subscription/{sub}/letterbox/attempts/{messageId}
#        -> 200 {"topic", "subscription", "messageId", "acknowledged", "redeliveryCount",
#                "source": "subscription"|"dead-letter"|"none", "attempts": [...],
#                "deadLetter": {"topic", "messageId"} (source dead-letter only),
#                "edits": [{"by", "at", "oldPayloadSha256", "newPayloadSha256", "original", "changes"}]}
# An edited message (a redrive with an edit, failure/edits.py) lists its edits first in
# "attempts" too, with the ending `edited` (who in "consumer", when in "endedAt").
#   POST (same path) {"ending": "nack", "reason": "..."}   -> 200 {"announced": true|false}
#
# `messageId` is `ledger:entry:partition:batchIndex` (the ORIGIN_MESSAGE_ID
# form; `ledger:entry` and `ledger:entry:partition` are accepted with -1 for
# the rest). A message still unacknowledged answers from the subscription's
# log; one that was dead-lettered from this subscription answers from its
# dead letter's DELIVERY_ATTEMPTS (a scan of the dead letter topic's live
# messages that opens only the entries holding the id's bytes, and gives the
# event loop back every SCAN_YIELD_EVERY dead letters); otherwise the list is empty. A partitioned topic is answered
# from the partition the id names.
# POST is what letterbox.client consumers call before each nack (the wire
# carries no reason, and cannot tell a nack from an ack timeout): the broker
# keeps the announcement for the message's next redelivery request.
# Errors: 400 malformed id or body, 404 unknown topic, subscription or
# message, 405 non-persistent topic.
from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import TOPIC_BASE, json_body, topic_name
from letterbox.admin.topic_lookup import persistent_topic, subscription
from letterbox.broker import dead_letter_topic_name, live_dead_letters_async, stored_message
from letterbox.errors import NotAllowed
from letterbox.failure.attempts import ANNOUNCED_ENDINGS, MAX_REASON_CHARS, parse_attempts_property
from letterbox.failure.edits import edit_attempts, parse_edit_log
from letterbox.message_properties import (
    DEAD_LETTER_SUBSCRIPTION,
    DELIVERY_ATTEMPTS,
    EDIT_LOG,
    ORIGIN_MESSAGE_ID,
    origin_message_id,
)

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext
    from letterbox.broker import PersistentTopic, Subscription
    from letterbox.topic_name import TopicName

ATTEMPTS_PATH = TOPIC_BASE + "/subscription/{subscription}/letterbox/attempts/{messageId}"
_ID_RE = re.compile(r"([0-9]{1,18}):([0-9]{1,18})(?::(-?[0-9]{1,9})(?::(-?[0-9]{1,9}))?)?")
ID_FORM = "ledger:entry:partition:batchIndex (e.g. 12:7:-1:-1)"
ANNOUNCE_FIELDS = ("ending", "reason")
SCAN_YIELD_EVERY = 256  # dead letters looked at between two turns of the event loop


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = AttemptRoutes(admin)
    router.add_get(ATTEMPTS_PATH, routes.read)
    router.add_post(ATTEMPTS_PATH, routes.announce)


def parse_message_id(text: str) -> tuple[int, int, int, int]:
    """(ledger, entry, partition, batch index) of a message id; AdminError 400 if malformed."""
    m = _ID_RE.fullmatch(text)
    if m is None:
        raise AdminError(400, f"messageId {text[:80]!r} is not {ID_FORM}")
    ledger, entry, partition, batch = m.groups()
    p, b = int(partition or -1), int(batch or -1)
    if p < -1 or b < -1:
        raise AdminError(400, f"messageId {text[:80]!r}: partition and batch index are -1 or more")
    return int(ledger), int(entry), p, b


class AttemptRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin

    def _target(self, request: web.Request) -> tuple[PersistentTopic, Subscription, int, int, int]:
        """The partition, subscription, and the message's ledger, entry and batch index."""
        ledger, entry, partition, batch = parse_message_id(request.match_info["messageId"])
        name: TopicName = topic_name(request)
        partitions = self.admin.service.partitions_of(name) if name.persistent and partition >= 0 else 0
        if 0 <= partition < partitions:
            name = name.partition(partition)
        elif partitions:
            raise AdminError(404, f"message {request.match_info['messageId']} names partition {partition}; "
                                  f"{name} has {partitions} partitions")
        topic = persistent_topic(self.admin, name, "Reading delivery attempts")
        sub = subscription(topic, request.match_info["subscription"])
        own = topic.name.partition_index
        if partition != own and not (partition == -1 and own >= 0):
            raise AdminError(404, f"message {request.match_info['messageId']} names partition {partition}, "
                             f"not {topic.name}")
        if ledger != topic.ledger.ledger_id or entry >= topic.ledger.next_entry_id:
            raise AdminError(404, f"message {ledger}:{entry} does not exist on {topic.name}")
        return topic, sub, ledger, entry, batch

    async def read(self, request: web.Request) -> web.Response:
        topic, sub, ledger, entry, batch = self._target(request)
        mid = origin_message_id(ledger, entry, topic.name.partition_index, batch)
        cursor = sub.cursor
        acked = cursor.is_acked(entry) or (batch >= 0 and batch in cursor.acked_indexes(entry))
        out: dict[str, Any] = {
            "topic": str(topic.name), "subscription": sub.name, "messageId": mid, "acknowledged": acked,
            "redeliveryCount": 0 if acked else cursor.redelivery_count(entry, batch if batch >= 0 else None),
        }
        attempts = sub.redelivery.attempts(entry, batch if batch >= 0 else None)
        source = "subscription" if attempts else "none"
        # an edited message (edit-and-replay) carries its edits: they come before its deliveries
        stored = stored_message(topic, entry, batch)
        props = stored.properties if stored is not None else {}
        if acked:
            found = await self._dead_letter(sub, mid, batch)
            if found is not None:
                source, (dl_topic, dl_id, attempts, dl_props) = "dead-letter", found
                out["deadLetter"] = {"topic": dl_topic, "messageId": dl_id}
                props = props or dl_props
        edits = edit_attempts(props)
        out["source"] = "subscription" if source == "none" and edits else source
        out["attempts"] = [a.to_json() for a in (*edits, *attempts)]
        out["edits"] = parse_edit_log(props.get(EDIT_LOG))
        return web.json_response(out)

    async def _dead_letter(self, sub: Subscription, mid: str, batch: int
                           ) -> tuple[str, str, list[Any], dict[str, str]] | None:
        """The dead letter this subscription made of message `mid`, with its attempts and properties."""
        policy = sub.policy.dead_letter
        try:
            dlq = dead_letter_topic_name(sub.topic.name, sub.name, policy.dead_letter_topic if policy else None)
        except NotAllowed:
            return None
        service = self.admin.service
        if service.partitions_of(dlq) > 0 or not service.topic_exists(dlq):
            return None
        prefix = mid.rsplit(":", 1)[0] + ":"
        seen = 0
        dlq_topic = service.persistent_topic(dlq, create=False)
        async for dl in live_dead_letters_async(dlq_topic, containing=prefix.encode()):
            seen += 1
            if seen % SCAN_YIELD_EVERY == 0:  # a whole-topic scan: let the broker's other work run
                await asyncio.sleep(0)
            origin = dl.properties.get(ORIGIN_MESSAGE_ID, "")
            if dl.properties.get(DEAD_LETTER_SUBSCRIPTION) != sub.name:
                continue
            if origin == mid or (batch == -1 and origin.startswith(prefix)):
                return (str(dlq), dl.message_id, parse_attempts_property(dl.properties.get(DELIVERY_ATTEMPTS)),
                        dl.properties)
        return None

    async def announce(self, request: web.Request) -> web.Response:
        _topic, sub, _ledger, entry, batch = self._target(request)
        body = await json_body(request)
        if not isinstance(body, dict):
            raise AdminError(400, 'Body must be a JSON object {"ending": "nack", "reason": "..."}')
        unknown = sorted(set(body) - set(ANNOUNCE_FIELDS))
        if unknown:
            raise AdminError(400, f"unknown field(s) {', '.join(unknown)}: the fields are "
                             f"{', '.join(ANNOUNCE_FIELDS)}")
        ending = body.get("ending")
        if ending not in ANNOUNCED_ENDINGS:
            raise AdminError(400, f"ending must be one of {', '.join(ANNOUNCED_ENDINGS)}, got {ending!r}")
        reason = body.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise AdminError(400, "reason must be a string or null")
        if reason is not None and len(reason) > MAX_REASON_CHARS:
            raise AdminError(400, f"reason is {len(reason)} characters; at most {MAX_REASON_CHARS}")
        cursor = sub.cursor
        if cursor.is_acked(entry) or (batch >= 0 and batch in cursor.acked_indexes(entry)):
            return web.json_response({"announced": False})
        sub.redelivery.log.announce(entry, str(ending), reason)
        return web.json_response({"announced": True})
