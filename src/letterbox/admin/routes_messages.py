# Reading messages without consuming them (Pulsar admin v2 paths): peek the
# n-th unacknowledged message of a subscription, get a message by ledger and
# entry id, examine the n-th message from the start or end of a topic. None
# of them moves a cursor. 404 with a reason when the message does not exist
# (out of range, trimmed, or another ledger id); 405 on a partitioned or
# non-persistent topic, as in Pulsar.
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.message_response import message_response
from letterbox.admin.request_parsing import TOPIC_BASE, path_int, query_int, topic_name
from letterbox.admin.topic_lookup import persistent_topic, subscription
from letterbox.broker import subscription_admin as ops

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = MessageRoutes(admin)
    router.add_get(TOPIC_BASE + "/subscription/{subscription}/position/{n}", routes.peek)
    router.add_get(TOPIC_BASE + "/ledger/{ledgerId}/entry/{entryId}", routes.by_id)
    router.add_get(TOPIC_BASE + "/examinemessage", routes.examine)


class MessageRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin

    async def peek(self, request: web.Request) -> web.Response:
        n = path_int(request, "n", "Message position", minimum=1)
        topic = persistent_topic(self.admin, topic_name(request), "Peek messages")
        sub = subscription(topic, request.match_info["subscription"])
        entry = ops.peek_nth(sub, n)
        if entry is None:
            raise AdminError(404, f"Message not found: subscription {sub.name} has fewer than {n} messages")
        return await message_response(entry, self.admin.service.config.max_message_size)

    async def by_id(self, request: web.Request) -> web.Response:
        ledger_id = path_int(request, "ledgerId", "ledgerId", minimum=0)
        entry_id = path_int(request, "entryId", "entryId", minimum=0)
        topic = persistent_topic(self.admin, topic_name(request), "Get message by id")
        entry = topic.ledger.read_entry(entry_id) if ledger_id == topic.ledger.ledger_id else None
        if entry is None:
            raise AdminError(404, f"Message not found: {ledger_id}:{entry_id} is not stored on {topic.name}")
        return await message_response(entry, self.admin.service.config.max_message_size)

    async def examine(self, request: web.Request) -> web.Response:
        initial = request.query.get("initialPosition", "latest")
        if initial not in ("earliest", "latest"):
            raise AdminError(412, f"initialPosition must be 'earliest' or 'latest', got {initial!r}")
        n = max(1, query_int(request, "messagePosition", 1))
        topic = persistent_topic(self.admin, topic_name(request), "Examine messages")
        ledger = topic.ledger
        first, last = ledger.first_position.entry_id, ledger.last_confirmed.entry_id
        if last < first:
            raise AdminError(404, f"Message not found: topic {topic.name} has no messages")
        eid = first + n - 1 if initial == "earliest" else last - n + 1
        entry = ledger.read_entry(eid) if first <= eid <= last else None
        if entry is None:
            raise AdminError(404, f"Message not found: topic {topic.name} has {last - first + 1} entries")
        return await message_response(entry, self.admin.service.config.max_message_size)
