# Namespace policies (Pulsar admin v2 paths, GET/POST/DELETE each):
# deduplication (body true|false), retention (body RetentionPolicies
# {"retentionTimeInMinutes", "retentionSizeInMB"}), messageTTL (body: seconds),
# and letterbox extensions under .../letterbox/: deadLetterPolicy
# {"maxRedeliverCount", "deadLetterTopic"?, "initialSubscriptionName"?,
# "onKeyFailure"? ("continue" | "park": the ordered quarantine, stored only when set)} and
# redeliveryBackoff {"minDelayMs", "maxDelayMs"?, "multiplier"?, "jitter"? ("none" | "full" |
# "equal")} and circuitBreaker {"failurePercent"?, "minDeliveries"?, "windowMs"?, "minDistinct"?,
# "cooldownMs"?} (outage detection; {} turns it on with the defaults).
# GET of a policy that is not set answers 204 without a body (Pulsar answers
# null that way), except retention, which answers the broker's default.
# Bodies are validated completely before anything is stored (400 malformed or
# wrongly typed, 412 out of range). Ranges: TTL and retention minutes up to
# 2^31-1 (Pulsar's int fields), retention size up to 2^63-1 MB, redelivery
# counts 1..2^31-1, backoff delays 1 ms..MAX_DELAY (864,000 s), multiplier
# 1..100. Storage and enforcement are broker/policies/namespace_policies.py's.
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, Handler, no_content
from letterbox.admin.request_parsing import (
    MAX_DELAY,
    NAMESPACE_BASE,
    int_field,
    json_body,
    name_field,
    namespace_of,
    number_field,
    persistent_topic_field,
)
from letterbox.broker import namespace_policies as np
from letterbox.failure import CircuitPolicy
from letterbox.failure.limits import DEFAULT_BACKOFF_MAX_DELAY_MS, MAX_BACKOFF_MULTIPLIER
from letterbox.failure.policies import JITTER_VALUES, KeyFailure
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

Validator = Callable[[Any], Any]  # request body -> the value stored
MAX_INT32 = 2**31 - 1


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = PolicyRoutes(admin)
    for path, key, validate in (
        ("/deduplication", np.DEDUP, _dedup),
        ("/retention", np.RETENTION, _retention),
        ("/messageTTL", np.TTL, _ttl),
        ("/letterbox/deadLetterPolicy", np.DEAD_LETTER, _dead_letter),
        ("/letterbox/redeliveryBackoff", np.BACKOFF, _backoff),
        ("/letterbox/circuitBreaker", np.CIRCUIT, _circuit),
    ):
        router.add_get(NAMESPACE_BASE + path, routes.getter(key))
        router.add_post(NAMESPACE_BASE + path, routes.setter(key, validate))
        router.add_delete(NAMESPACE_BASE + path, routes.remover(key))


class PolicyRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.policies = admin.service.namespace_policies

    def _document(self, request: web.Request) -> tuple[str, dict[str, Any]]:
        ns = namespace_of(request)
        doc = self.policies.document(ns)
        if doc is None:
            raise AdminError(404, f"Namespace {ns} does not exist")
        return ns, doc

    def getter(self, key: str) -> Handler:
        async def get(request: web.Request) -> web.Response:
            _, doc = self._document(request)
            value = doc.get(key)
            if value is None and key == np.RETENTION:
                minutes = self.admin.service.config.retention_time_minutes
                value = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": 0}
            if value is None:
                return no_content()
            return web.json_response(value)

        return get

    def setter(self, key: str, validate: Validator) -> Handler:
        async def post(request: web.Request) -> web.Response:
            body = await json_body(request)
            if body is None:
                raise AdminError(400, "Request body is required")
            value = validate(body)
            ns, _ = self._document(request)
            if key == np.DEAD_LETTER:
                self._check_dead_letter_target(request, value)
            await self.policies.update(ns, key, value)
            return no_content()

        return post

    def _check_dead_letter_target(self, request: web.Request, policy: dict[str, Any]) -> None:
        """The broker writes dead letters into the policy's deadLetterTopic for every topic of
        the namespace: the caller must be allowed to produce there (and to consume it, for an
        initialSubscriptionName) -- a tenant admin may not point it into another tenant."""
        if not policy.get("deadLetterTopic"):
            return
        authz, role = self.admin.service.authorization, request.get("role")
        target = TopicName.parse(policy["deadLetterTopic"])
        initial = policy.get("initialSubscriptionName")
        if not authz.can_produce(role, target) or (initial and not authz.can_consume(role, target, initial)):
            what = "produce on" if not authz.can_produce(role, target) else f"consume ({initial}) on"
            raise AdminError(403, f"Role {role} is not authorized to {what} {target}, the deadLetterTopic "
                             "of this policy")

    def remover(self, key: str) -> Handler:
        async def delete(request: web.Request) -> web.Response:
            ns, _ = self._document(request)
            await self.policies.update(ns, key, None)
            return no_content()

        return delete


def _int(body: dict[str, Any], key: str, default: int | None, minimum: int, maximum: int = MAX_INT32) -> int:
    if key not in body and default is not None:
        return default
    value = int_field(body, key, minimum, maximum)
    if value is None:
        raise AdminError(400, f"{key} is required")
    return value


def _object(body: Any, what: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise AdminError(400, f"{what} must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise AdminError(400, f"Unknown field(s) {unknown} in {what}; known: {list(allowed)}")
    return body


def _dedup(body: Any) -> bool:
    if not isinstance(body, bool):
        raise AdminError(400, f"Body must be true or false, got {body!r}")
    return body


def _retention(body: Any) -> dict[str, int]:
    obj = _object(body, "Retention policies", ("retentionTimeInMinutes", "retentionSizeInMB"))
    return {
        "retentionTimeInMinutes": _int(obj, "retentionTimeInMinutes", 0, -1),
        "retentionSizeInMB": _int(obj, "retentionSizeInMB", 0, -1, 2**63 - 1),
    }


def _ttl(body: Any) -> int:
    if isinstance(body, bool) or not isinstance(body, int):
        raise AdminError(400, f"Body must be the TTL in seconds (an integer), got {body!r}")
    if not 0 <= body <= MAX_INT32:
        raise AdminError(412, f"Invalid value for message TTL: {body} (must be between 0 and {MAX_INT32})")
    return body


def _optional_str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise AdminError(400, f"{key} must be a non-empty string or null")
    return value


def _dead_letter(body: Any) -> dict[str, Any]:
    obj = _object(body, "Dead letter policy", ("maxRedeliverCount", "deadLetterTopic", "initialSubscriptionName",
                                               "onKeyFailure"))
    topic = _optional_str(obj, "deadLetterTopic")
    if topic is not None:
        persistent_topic_field("deadLetterTopic", topic)
    _optional_str(obj, "initialSubscriptionName")
    out = {
        "maxRedeliverCount": _int(obj, "maxRedeliverCount", None, 1),
        "deadLetterTopic": topic,
        "initialSubscriptionName": name_field(obj, "initialSubscriptionName", "subscription"),
    }
    on_key_failure = obj.get("onKeyFailure")
    if on_key_failure is not None:
        accepted = [k.value for k in KeyFailure]
        if on_key_failure not in accepted:
            raise AdminError(400, f"onKeyFailure must be one of {', '.join(accepted)}, got {on_key_failure!r}")
        out["onKeyFailure"] = on_key_failure
    return out


def _backoff(body: Any) -> dict[str, Any]:
    obj = _object(body, "Redelivery backoff", ("minDelayMs", "maxDelayMs", "multiplier", "jitter"))
    low = _int(obj, "minDelayMs", None, 1, MAX_DELAY)
    high = _int(obj, "maxDelayMs", max(low, DEFAULT_BACKOFF_MAX_DELAY_MS), low, MAX_DELAY)
    mult = number_field(obj, "multiplier", 1.0, MAX_BACKOFF_MULTIPLIER)
    out: dict[str, Any] = {"minDelayMs": low, "maxDelayMs": high, "multiplier": 2.0 if mult is None else mult}
    jitter = obj.get("jitter")
    if jitter is not None:
        if jitter not in JITTER_VALUES:
            raise AdminError(400, f"jitter must be one of {', '.join(JITTER_VALUES)}, got {jitter!r}")
        out["jitter"] = jitter
    return out


def _circuit(body: Any) -> dict[str, Any]:
    obj = _object(body, "Circuit breaker", tuple(np.CIRCUIT_FIELDS))
    highest = {"failurePercent": 100, "windowMs": MAX_DELAY, "cooldownMs": MAX_DELAY}
    out = {k: _int(obj, k, None, 1, highest.get(k, 1_000_000)) for k in np.CIRCUIT_FIELDS if k in obj}
    CircuitPolicy(**{np.CIRCUIT_FIELDS[k]: v for k, v in out.items()})  # (the bounds above are its own)
    return out
