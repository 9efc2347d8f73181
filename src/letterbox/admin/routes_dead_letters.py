# Dead-letter operations (letterbox extensions; broker/moves/dead_letters.py and
# broker/moves/redrive.py do the work):
#   GET  /admin/v2/namespaces/{t}/{ns}/letterbox/deadLetterTopics
#   GET  /admin/v2/persistent/{t}/{ns}/{dlq}/letterbox/deadLetters?limit=N&reason=R&group=G&after=ID
#        (paged by size and values cut: listing_budget.py; whole values: routes_dead_letter_values.py)
#   GET  .../{dlq}/letterbox/deadLetters/groups   (failure groups, routes_dead_letter_groups.py)
#   POST /admin/v2/persistent/{t}/{ns}/{dlq}/letterbox/redrive   (JSON filter + target ...;
#        subscriptionOnly: back into the dead-lettering subscription only; background: answer
#        202 with a persistent task at once, see routes_redrive_tasks.py; edit: change each
#        message on its way back, failure/edits.py -- needs the `edit` permission too, 403 without)
#   DELETE .../{dlq}/letterbox/redrive   cancel the redrive running on that DLQ
#   POST /admin/v2/persistent/{t}/{ns}/{dlq}/letterbox/purge     (JSON filter)
# Request bodies are checked field by field before anything runs (400 for
# malformed JSON, unknown fields or wrong types, 412 for out-of-range values,
# 404 for a target in a namespace that does not exist, 409 while a redrive of
# the same DLQ runs, 412 for a topic that is not a dead letter topic). A reason
# filter (body or ?reason=) must be one of DEAD_LETTER_REASONS, the list the CLI's
# --reason takes: anything else is 400 naming the valid ones, never "0 matched".
from __future__ import annotations

import base64
import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.listing_budget import Clipped, ListingPage, clip_properties
from letterbox.admin.request_parsing import (
    NAMESPACE_BASE,
    TOPIC_BASE,
    int_field,
    json_body,
    namespace_of,
    number_field,
    persistent_topic_field,
    query_int,
    topic_name,
)
from letterbox.admin.routes_dead_letter_groups import group_field
from letterbox.admin.routes_dead_letter_groups import register as register_groups
from letterbox.admin.routes_redrive_tasks import register as register_tasks
from letterbox.admin.topic_lookup import persistent_topic
from letterbox.broker import (
    DeadLetter,
    DeadLetterFilter,
    PersistentTopic,
    SubscriptionGone,
    live_dead_letters_async,
    summary_async,
)
from letterbox.broker import redrive as rd
from letterbox.errors import InvalidTopicName
from letterbox.failure.edits import EditError, edit_of
from letterbox.message_properties import DEAD_LETTER_REASONS, REAL_TOPIC
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

DEFAULT_LIMIT = 100
# a dead letter's id as the listing gives it (DeadLetter.message_id)
MESSAGE_ID = re.compile(r"[0-9]{1,18}:[0-9]{1,18}:-?[0-9]{1,9}:-?[0-9]{1,9}")
MAX_LIMIT = 10_000
FILTER_FIELDS = ("reason", "properties", "deadLetteredAfter", "deadLetteredBefore", "messageIds", "dryRun", "key",
                 "group")
REDRIVE_FIELDS = (*FILTER_FIELDS, "target", "maxMessages", "ratePerSecond", "subscriptionOnly", "background", "edit")


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = DeadLetterRoutes(admin)
    router.add_get(NAMESPACE_BASE + "/letterbox/deadLetterTopics", routes.topics)
    router.add_get(TOPIC_BASE + "/letterbox/deadLetters", routes.messages)
    router.add_post(TOPIC_BASE + "/letterbox/redrive", routes.redrive)
    router.add_delete(TOPIC_BASE + "/letterbox/redrive", routes.cancel_redrive)
    router.add_post(TOPIC_BASE + "/letterbox/purge", routes.purge)
    register_tasks(admin, router)
    register_groups(admin, router)


def message_json(dl: DeadLetter) -> dict[str, Any]:
    """One dead letter as JSON (keys and properties cut as listing_budget says); `error` is
    set when its stored payload could not be opened (the payload is then the stored bytes)."""
    try:
        text: str | None = dl.payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    clipped = Clipped()
    out: dict[str, Any] = {
        "messageId": dl.message_id,
        "key": None if dl.key is None else clipped.text(dl.key, "key"),
        "properties": clip_properties(dl.properties, clipped),
        "publishTime": dl.publish_time,
        "eventTime": dl.event_time or None,
        "payloadBase64": base64.b64encode(dl.payload).decode(),
        "payloadText": text,
    }
    if dl.error is not None:
        out["error"] = dl.error
    return clipped.mark(out)


def dead_letter_order(message_id: str) -> tuple[int, int]:
    """A dead letter's place in its listing: (entry, batch index); ValueError if not an id."""
    if not MESSAGE_ID.fullmatch(message_id):
        raise ValueError(message_id)
    _, entry, _, batch = message_id.split(":")
    return int(entry), int(batch)


def parse_filter(body: Any, allowed: tuple[str, ...]) -> tuple[DeadLetterFilter, bool, dict[str, Any]]:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise AdminError(400, "Body must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise AdminError(400, f"Unknown field(s) {unknown}; known: {list(allowed)}")
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise AdminError(400, f"reason must be a string, got {reason!r}")
    known_reason(reason)
    props = body.get("properties")
    if props is None:
        props = {}
    if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
        raise AdminError(400, f"properties must be an object of string values, got {json.dumps(props)[:60]}")
    dry_run = body.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise AdminError(400, "dryRun must be true or false")
    ids = body.get("messageIds")
    if ids is not None:
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise AdminError(400, f"messageIds must be a list of message id strings, got {json.dumps(ids)[:60]}")
        if not 1 <= len(ids) <= MAX_LIMIT:
            raise AdminError(412, f"messageIds must hold 1 to {MAX_LIMIT} ids, got {len(ids)}")
        bad = next((i for i in ids if not MESSAGE_ID.fullmatch(i)), None)
        if bad is not None:
            raise AdminError(400, f"messageIds: {bad[:80]!r} is not a dead letter's message id "
                                  "ledger:entry:partition:batchIndex, as the deadLetters listing gives it "
                                  "(e.g. 12:7:-1:-1)")
    key = body.get("key")
    if key is not None and not isinstance(key, str):
        raise AdminError(400, f"key must be a string (the message key), got {json.dumps(key)[:60]}")
    flt = DeadLetterFilter(
        reason=reason,
        properties=props,
        after_ms=int_field(body, "deadLetteredAfter", 0),
        before_ms=int_field(body, "deadLetteredBefore", 0),
        message_ids=frozenset(ids) if ids is not None else None,
        key=key,
        group=group_field(body.get("group")),
    )
    return flt, dry_run, body


def known_reason(reason: str | None) -> str | None:
    """A reason filter as given, or 400 naming the valid reasons (a typo would match nothing)."""
    if reason is not None and reason not in DEAD_LETTER_REASONS:
        raise AdminError(400, f"Unknown reason {reason[:60]!r}: the reason filter is one of "
                              f"{', '.join(DEAD_LETTER_REASONS)}")
    return reason


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise AdminError(400, f"{key} must be true or false, got {json.dumps(value)[:60]}")
    return value


class DeadLetterRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.service = admin.service

    def _dlq(self, request: web.Request) -> PersistentTopic:
        return persistent_topic(self.admin, topic_name(request), "Dead-letter operations")

    async def topics(self, request: web.Request) -> web.Response:
        ns = namespace_of(request)
        self.admin.require_namespace(ns)
        out = []
        for name in self.service.list_topics(ns):
            tn = TopicName.parse(name)
            if not tn.persistent or not self.service.topic_exists(tn):
                continue
            topic = self.service.get_topic(tn, create=False)
            if isinstance(topic, PersistentTopic):
                found = await summary_async(topic)  # None: not a dead letter topic
                if found is not None:
                    out.append(found)
        return web.json_response(out)

    async def messages(self, request: web.Request) -> web.Response:
        limit = query_int(request, "limit", DEFAULT_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            raise AdminError(412, f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        flt = DeadLetterFilter(reason=known_reason(request.query.get("reason")),
                               group=group_field(request.query.get("group"), "query parameter group"))
        topic = self._dlq(request)
        page = ListingPage(request, limit, dead_letter_order)
        start = page.after[0] if page.after is not None else 0
        async for dl in live_dead_letters_async(topic, start_entry=start):
            if page.skips(dl.message_id) or not flt.matches(dl):
                continue
            if not page.add(dl.message_id, lambda dl=dl: message_json(dl)):  # type: ignore[misc]
                break
        return page.response()

    async def redrive(self, request: web.Request) -> web.Response:
        flt, dry_run, body = parse_filter(await json_body(request), REDRIVE_FIELDS)
        target = body.get("target")
        target_name = None
        if target is not None:
            if not isinstance(target, str):
                raise AdminError(400, f"target must be a topic name, got {target!r}")
            target_name = persistent_topic_field("target", target)
        rate = number_field(body, "ratePerSecond", rd.MIN_RATE, rd.MAX_RATE)
        subscription_only, background = _flag(body, "subscriptionOnly"), _flag(body, "background")
        if subscription_only and target_name is not None:
            raise AdminError(400, "subscriptionOnly puts each message back into the subscription it died in, "
                                  "on its source topic: leave out target")
        authz, role = self.admin.service.authorization, request.get("role")
        edit = None
        if body.get("edit") is not None:
            try:
                edit = edit_of(body["edit"])
            except EditError as exc:
                raise AdminError(400, str(exc)) from None
        req = rd.RedriveRequest(
            filter=flt, target=target_name, max_messages=int_field(body, "maxMessages", 1),
            rate_per_second=rate, dry_run=dry_run, subscription_only=subscription_only,
            edit=edit, editor=role if edit is not None else None,
        )
        dlq = self._dlq(request)
        if edit is not None and not authz.can_edit(role, dlq.name):
            raise AdminError(403, f"Role {role} may redrive but not edit dead letters of {dlq.name}: an edit "
                                  "needs the `edit` permission on the topic or its namespace (grant-permission "
                                  "--actions edit), or a super user")
        if target_name is not None:
            self.admin.require_namespace(target_name.namespace_name)
        await self._check_targets(request, dlq, req)
        checked = authz.enabled and not authz.is_super_user(role)
        if checked:
            req = dataclasses.replace(req, may_write=lambda t: authz.can_produce(role, t))
        try:
            if dry_run:
                result = await rd.redrive(dlq, req)
                return web.json_response({"matched": result.matched, "moved": 0,
                                          "remaining": result.remaining, "dryRun": True})
            task = await self.service.redrive_tasks.start(dlq, req, role if checked else None, background)
        except rd.RedriveRunning as exc:
            raise AdminError(409, f"{exc} (DELETE {request.path})") from None
        except SubscriptionGone as exc:
            raise AdminError(404, str(exc)) from None
        if background:
            return web.json_response(task.view(), status=202,
                                     headers={"Location": f"{request.path}/{task.id}"})
        if task.failure is not None:
            raise task.failure  # mapped like any other error (503 for storage, 404, 412 ...)
        remaining = task.remaining or 0
        out = {"matched": task.moved + remaining, "moved": task.moved,
               "remaining": remaining, "dryRun": False}
        if task.state == "cancelled":
            out["cancelled"] = True
        return web.json_response(out, headers={"Letterbox-Redrive-Task": task.id})

    async def _check_targets(self, request: web.Request, dlq: PersistentTopic, req: rd.RedriveRequest) -> None:
        """A redrive appends to its target, or to each message's REAL_TOPIC (a property any
        producer on the DLQ could have set): the caller must be allowed to produce on every
        one. Checked here before the redrive runs (403 for the whole request) and again per
        message while it runs (RedriveRequest.may_write): a message arriving in the DLQ
        meanwhile with a REAL_TOPIC the caller may not write stays in the DLQ."""
        authz, role = self.admin.service.authorization, request.get("role")
        if not authz.enabled or authz.is_super_user(role):
            return
        targets = {req.target} if req.target is not None else set()
        if req.target is None:
            async for dl in live_dead_letters_async(dlq):
                real = dl.properties.get(REAL_TOPIC)
                if real and req.filter.matches(dl):
                    try:
                        targets.add(TopicName.parse(real))
                    except InvalidTopicName:
                        continue  # the redrive leaves it where it is

        refused = sorted(str(t) for t in targets if not authz.can_produce(role, t))
        if refused:
            raise AdminError(403, f"Role {role} is not authorized to produce on {', '.join(refused[:5])}: "
                             "a redrive needs produce on every topic it writes to (its target or each "
                             "message's REAL_TOPIC)")

    async def cancel_redrive(self, request: web.Request) -> web.Response:
        dlq = self._dlq(request)
        if await self.service.redrive_tasks.cancel_dlq(dlq.name) is None and not rd.cancel_redrive(dlq):
            raise AdminError(404, f"No redrive is running on {dlq.name}")
        return web.json_response({"cancelled": True})

    async def purge(self, request: web.Request) -> web.Response:
        flt, dry_run, _ = parse_filter(await json_body(request), FILTER_FIELDS)
        purged = await rd.purge(self._dlq(request), flt, dry_run)
        return web.json_response({"purged": purged, "dryRun": dry_run})
