# The circuit breaker of a subscription over HTTP (outage detection,
# broker/redelivery/circuit_breaker.py):
#   GET  .../{topic}/subscription/{sub}/letterbox/circuit
#        -> 200 {"topic", "subscription", "enabled", "state", "trips", "openedAt", "probeAt",
#                "window", "policy", "history"}
#   POST (same path) {"state": "open"|"closed"} -> 200 (the same answer, after the change)
# A partitioned topic answers per partition ("partitions": name -> the object above) and
# a POST applies to every partition. States: closed, open, half-open (reached only by the
# cool-down). The rule is CONSUME on the topic and subscription, as every other
# subscription operation (admin/access_rules.py).
# Errors: 400 a body that is not {"state": "open"|"closed"}, 404 unknown topic or
# subscription, 409 a subscription without a circuit policy (nothing to open or close).
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import TOPIC_BASE, json_body, topic_name
from letterbox.admin.topic_lookup import partition_targets
from letterbox.broker import CircuitBreaker, breaker_of
from letterbox.failure import CircuitState

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext
    from letterbox.topic_name import TopicName

CIRCUIT_PATH = TOPIC_BASE + "/subscription/{subscription}/letterbox/circuit"
SETTABLE = {"open": CircuitState.OPEN, "closed": CircuitState.CLOSED}
ENABLE_HINT = ("set the consumer property letterbox.circuit.enabled=true (or the namespace policy "
               "letterbox/circuitBreaker)")


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    def breakers(request: web.Request) -> tuple[TopicName, str, list[tuple[str, CircuitBreaker]]]:
        name = topic_name(request)
        sub_name = request.match_info["subscription"]
        found = []
        for topic in partition_targets(admin, name, "Reading the circuit breaker"):
            sub = topic.subscriptions.get(sub_name)
            breaker = breaker_of(sub) if sub is not None else None
            if breaker is not None:
                found.append((str(topic.name), breaker))
        if not found:
            raise AdminError(404, f"Subscription {sub_name} not found on topic {name}")
        return name, sub_name, found

    def answer(name: TopicName, sub_name: str, found: list[tuple[str, CircuitBreaker]]) -> web.Response:
        out: dict[str, Any] = {"topic": str(name), "subscription": sub_name}
        if len(found) == 1 and found[0][0] == str(name):
            out.update(found[0][1].describe())
        else:
            out["partitions"] = {t: b.describe() for t, b in found}
        return web.json_response(out)

    async def get_circuit(request: web.Request) -> web.Response:
        return answer(*breakers(request))

    async def set_circuit(request: web.Request) -> web.Response:
        body = await json_body(request)
        if not isinstance(body, dict) or set(body) != {"state"} or body["state"] not in SETTABLE:
            raise AdminError(400, 'Body must be {"state": "open"} or {"state": "closed"} '
                                  "(half-open is reached by the cool-down only)")
        name, sub_name, found = breakers(request)
        if not any(b.enabled for _t, b in found):
            raise AdminError(409, f"Subscription {sub_name} of {name} has no circuit breaker: {ENABLE_HINT}")
        for _t, b in found:
            b.force(SETTABLE[body["state"]])
        return answer(name, sub_name, found)

    router.add_get(CIRCUIT_PATH, get_circuit)
    router.add_post(CIRCUIT_PATH, set_circuit)
