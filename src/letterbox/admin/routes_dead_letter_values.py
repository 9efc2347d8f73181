# One dead letter, and the whole of a value a listing cut (listing_budget.py):
#   GET .../{dlq}/letterbox/deadLetters/{messageId}           the message as the listing
#        shows it (values cut the same way), without listing the topic
#   GET .../{dlq}/letterbox/deadLetters/{messageId}/key       the key's bytes
#   GET .../{dlq}/letterbox/deadLetters/{messageId}/property?name=NAME
#        one property value's bytes (NAME as the listing shows the key)
#   GET .../{dlq}/letterbox/deadLetters/{messageId}/payload   the payload's bytes
# Values are answered byte-exact as stored (application/octet-stream), whatever they hold.
# Only the entry the id names is read. 400 for a malformed id or a missing name, 404 for a
# message that is not a live dead letter of the topic (redriven, purged, never there), a
# message without a key, or a property it does not have.
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import TOPIC_BASE, topic_name
from letterbox.admin.routes_dead_letters import MESSAGE_ID, message_json
from letterbox.admin.topic_lookup import persistent_topic
from letterbox.broker import DeadLetter, live_dead_letters_async
from letterbox.protocol.text_fields import as_text

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

MESSAGE_PATH = TOPIC_BASE + "/letterbox/deadLetters/{messageId}"
VALUE_FIELDS = ("key", "property", "payload")


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = DeadLetterValueRoutes(admin)
    router.add_get(MESSAGE_PATH, routes.message)
    for field in VALUE_FIELDS:
        router.add_get(f"{MESSAGE_PATH}/{field}", routes.value)


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def property_value(dl: DeadLetter, name: str) -> bytes | None:
    """The stored bytes of the property whose key the listing shows as `name`."""
    for key, value in dl.raw_properties:  # pairs stored with bytes that are not UTF-8
        if as_text(key) == name:
            return _bytes(value)
    text = dl.properties.get(name)
    return None if text is None else text.encode()


class DeadLetterValueRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin

    async def _find(self, request: web.Request) -> DeadLetter:
        mid = request.match_info["messageId"]
        if not MESSAGE_ID.fullmatch(mid):
            raise AdminError(400, f"messageId {mid[:80]!r} is not a dead letter's message id "
                                  "ledger:entry:partition:batchIndex, as the deadLetters listing gives it")
        topic = persistent_topic(self.admin, topic_name(request), "Dead-letter operations")
        async for dl in live_dead_letters_async(topic, only_ids=frozenset({mid})):
            if dl.message_id == mid:
                return dl
        raise AdminError(404, f"No live dead letter {mid} on {topic.name}")

    async def message(self, request: web.Request) -> web.Response:
        return web.json_response(message_json(await self._find(request)))

    async def value(self, request: web.Request) -> web.Response:
        field = request.path.rsplit("/", 1)[1]
        name = request.query.get("name")
        if field == "property" and name is None:
            raise AdminError(400, "name is required: the property's key as the listing shows it (?name=...)")
        dl = await self._find(request)
        if field == "payload":
            body: bytes | None = dl.payload
        elif field == "key":
            body = dl.raw_key if dl.raw_key is not None else None if dl.key is None else dl.key.encode()
            if body is None:
                raise AdminError(404, f"Dead letter {dl.message_id} has no key")
        else:
            body = property_value(dl, str(name))
            if body is None:
                raise AdminError(404, f"Dead letter {dl.message_id} has no property {str(name)[:80]!r}")
        return web.Response(body=body, content_type="application/octet-stream",
                            headers={"X-Letterbox-Message-ID": dl.message_id})
