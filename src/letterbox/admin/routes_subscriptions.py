# Subscription routes of a topic (Pulsar admin v2 paths): list, create at a
# position, delete, skip N, clear backlog (skip_all), reset cursor to a
# publish time or a message id, expire messages older than N seconds (one
# subscription or all). Operations Pulsar fans out over the partitions of a
# partitioned topic (create, delete, skip_all, reset to a time, expire) do so
# here; skip N and reset to a message id need one partition (405 otherwise).
# The work on the cursor is broker/topics/subscription_admin.py's.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, no_content
from letterbox.admin.request_parsing import TOPIC_BASE, json_body, path_int, query_flag, topic_name
from letterbox.admin.topic_lookup import partition_targets, persistent_topic, subscription
from letterbox.broker import PersistentTopic, check_new_subscription
from letterbox.broker import subscription_admin as ops
from letterbox.storage.errors import StorageError
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext
    from letterbox.broker import Subscription

SUB = TOPIC_BASE + "/subscription/{subscription}"
LATEST = 2**63 - 1


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = SubscriptionRoutes(admin)
    router.add_get(TOPIC_BASE + "/subscriptions", routes.list_subscriptions)
    router.add_put(SUB, routes.create)
    router.add_delete(SUB, routes.delete)
    router.add_post(SUB + "/skip/{n}", routes.skip)
    router.add_post(SUB + "/skip_all", routes.skip_all)
    router.add_post(SUB + "/resetcursor/{timestamp}", routes.reset_to_time)
    router.add_post(SUB + "/resetcursor", routes.reset_to_message)
    router.add_post(SUB + "/expireMessages/{seconds}", routes.expire)
    router.add_post(TOPIC_BASE + "/all_subscription/expireMessages/{seconds}", routes.expire_all)


async def _expire_each(subs: list[Subscription], seconds: int) -> None:
    """Expire in each subscription, every due message before answering. A storage failure
    after some were expired answers 503 saying so (they stay expired; the rest is as it
    was, and calling again finishes the job)."""
    done = 0
    for sub in subs:
        try:
            done += await ops.expire(sub, seconds)
        except StorageError as exc:
            done += exc.expired if isinstance(exc, ops.ExpiryInterrupted) else 0
            if not done:
                raise  # nothing changed: the usual 503
            raise AdminError(503, f"storage unavailable after {done} entries were expired (they stay "
                                  f"expired, the rest is unchanged; call again to finish): {exc}") from exc


def message_position(topic: PersistentTopic, body: Any, default_latest: bool = True) -> int:
    """The entry a MessageId / ResetCursorData body names (ledgerId, entryId,
    partitionIndex, batchIndex, isExcluded); no body is latest (or earliest)."""
    ledger = topic.ledger
    if body is None:
        return ledger.last_confirmed.entry_id + 1 if default_latest else ledger.first_position.entry_id
    if body in ("latest", "earliest"):
        return message_position(topic, None, body == "latest")
    if not isinstance(body, dict):
        raise AdminError(400, "Body must be a message id object {\"ledgerId\": n, \"entryId\": n}")
    values: dict[str, int] = {}
    for key in ("ledgerId", "entryId"):
        value = body.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise AdminError(400, f"{key} must be an integer, got {value!r}")
        values[key] = value
    excluded = body.get("isExcluded", False)
    if not isinstance(excluded, bool):
        raise AdminError(400, "isExcluded must be true or false")
    if values["ledgerId"] >= LATEST:
        return ledger.last_confirmed.entry_id + 1
    if values["ledgerId"] < 0:
        return ledger.first_position.entry_id
    entry = topic.entry_id_for(values["ledgerId"], values["entryId"])
    return entry + 1 if excluded else entry


class SubscriptionRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.service = admin.service

    async def list_subscriptions(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        if self.service.partitions_of(name) > 0:
            subs: set[str] = set()
            for topic in partition_targets(self.admin, name, "List subscriptions"):
                subs.update(n for n, s in topic.subscriptions.items() if s.durable)
            return web.json_response(sorted(subs))
        plain = self.admin.existing_topic(name)
        return web.json_response(sorted(getattr(plain, "subscriptions", {})))

    async def create(self, request: web.Request) -> web.Response:
        name, sub_name = topic_name(request), request.match_info["subscription"]
        body = await json_body(request)
        await self._auto_create(name)
        targets = partition_targets(self.admin, name, "Create subscription")
        if any(sub_name in t.subscriptions for t in targets):
            raise AdminError(409, f"Subscription {sub_name} already exists for topic {name}")
        for topic in targets:
            check_new_subscription(topic, sub_name)
        for topic in targets:
            position = message_position(topic, body)
            sub = topic.subscription_for(sub_name, True, "latest", None)
            if position != sub.cursor.mark_delete.entry_id + 1:
                sub.reset_to(position)
            await sub.cursor.flush()
        return no_content()

    async def _auto_create(self, name: TopicName) -> None:
        """Creating a subscription on a topic that does not exist creates the topic where
        auto-creation allows it, as Pulsar (partitioned when that is the auto-created type)."""
        service = self.service
        if not name.persistent or service.partitions_of(name) > 0 or service.topic_exists(name):
            return
        if service.should_auto_partition(name):
            await service.create_partitioned_topic(name, service.config.default_num_partitions)
        elif service.may_auto_create(name):
            service.persistent_topic(name, create=True)

    async def delete(self, request: web.Request) -> web.Response:
        name, sub_name = topic_name(request), request.match_info["subscription"]
        force = query_flag(request, "force")
        targets = partition_targets(self.admin, name, "Delete subscription")
        subs = [(t, subscription(t, sub_name)) for t in targets if sub_name in t.subscriptions]
        if not subs:
            raise AdminError(404, f"Subscription {sub_name} not found on topic {name}")
        if not force and any(s.consumers for _, s in subs):
            raise AdminError(412, "Subscription has active connected consumers; retry with ?force=true")
        for topic, sub in subs:
            ops.disconnect_consumers(sub)
            await self.service.delete_subscription(topic, sub.name)
        return no_content()

    async def skip(self, request: web.Request) -> web.Response:
        n = path_int(request, "n", "Number of messages to skip", minimum=0)
        topic = persistent_topic(self.admin, topic_name(request), "Skip messages")
        await ops.skip(subscription(topic, request.match_info["subscription"]), n)
        return no_content()

    async def skip_all(self, request: web.Request) -> web.Response:
        for sub in self._subs_everywhere(request, "Clear backlog"):
            await ops.clear_backlog(sub)
        return no_content()

    async def reset_to_time(self, request: web.Request) -> web.Response:
        ts = path_int(request, "timestamp", "Timestamp (epoch milliseconds)", minimum=0)
        for sub in self._subs_everywhere(request, "Reset cursor"):
            await ops.reset_cursor(sub, ops.entry_at_time(sub, ts))
        return no_content()

    async def reset_to_message(self, request: web.Request) -> web.Response:
        body = await json_body(request)
        if body is None:
            raise AdminError(400, "Body must be a message id {\"ledgerId\": n, \"entryId\": n}")
        topic = persistent_topic(self.admin, topic_name(request), "Reset-cursor at position")
        sub = subscription(topic, request.match_info["subscription"])
        await ops.reset_cursor(sub, message_position(topic, body))
        return no_content()

    async def expire(self, request: web.Request) -> web.Response:
        seconds = path_int(request, "seconds", "Expire time in seconds", minimum=0)
        await _expire_each(self._subs_everywhere(request, "Expire messages"), seconds)
        return no_content()

    async def expire_all(self, request: web.Request) -> web.Response:
        seconds = path_int(request, "seconds", "Expire time in seconds", minimum=0)
        targets = partition_targets(self.admin, topic_name(request), "Expire messages")
        await _expire_each([s for t in targets for s in list(t.subscriptions.values()) if s.durable], seconds)
        return no_content()

    def _subs_everywhere(self, request: web.Request, what: str) -> list[Subscription]:
        """The named subscription on the topic, or on every partition that has it."""
        name, sub_name = topic_name(request), request.match_info["subscription"]
        targets = partition_targets(self.admin, name, what)
        if self.service.partitions_of(name) == 0:
            return [subscription(targets[0], sub_name)]
        subs = [t.subscriptions[sub_name] for t in targets if sub_name in t.subscriptions]
        if not subs:
            raise AdminError(404, f"Subscription {sub_name} not found on topic {name}")
        return subs
