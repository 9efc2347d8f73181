# Permission routes (Pulsar admin v2 paths); the decisions that use what they
# store are security/authorization.py's.
#
#   GET    /admin/v2/namespaces/{t}/{ns}/permissions          -> {role: [actions]}
#   POST   /admin/v2/namespaces/{t}/{ns}/permissions/{role}   body: [actions] -> 204
#   DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{role}   -> 204
#   GET    /admin/v2/namespaces/{t}/{ns}/permissions/subscription/{sub} -> [roles]
#   POST   /admin/v2/namespaces/{t}/{ns}/permissions/subscription/{sub} body: [roles] -> 204
#   DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{sub}/{role} -> 204
#   GET    /admin/v2/{domain}/{t}/{ns}/{topic}/permissions    -> namespace + topic grants
#   POST   /admin/v2/{domain}/{t}/{ns}/{topic}/permissions/{role} body: [actions] -> 204
#   DELETE /admin/v2/{domain}/{t}/{ns}/{topic}/permissions/{role} -> 204
#
# Everything is stored in the namespace document's "auth_policies" (Pulsar's
# Policies JSON field), so GET of the namespace returns it too. A grant
# replaces the role's actions; a revoke of a role that has no grant at that
# level is 404 (topic: 412 when the grant is the namespace's, as Pulsar says).
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, no_content
from letterbox.admin.request_parsing import (
    NAMESPACE_BASE,
    TOPIC_BASE,
    check_name,
    json_body,
    namespace_of,
    topic_name,
)
from letterbox.security.authorization import (
    AUTH_POLICIES,
    DESTINATION_AUTH,
    NAMESPACE_AUTH,
    SUBSCRIPTION_AUTH_ROLES,
    check_actions,
)

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = PermissionRoutes(admin)
    ns = NAMESPACE_BASE + "/permissions"
    router.add_get(ns, routes.list_namespace)
    router.add_get(ns + "/subscription/{subscription}", routes.subscription_roles)
    router.add_post(ns + "/subscription/{subscription}", routes.grant_subscription)
    router.add_delete(ns + "/{subscription}/{role}", routes.revoke_subscription)
    router.add_post(ns + "/{role}", routes.grant_namespace)
    router.add_delete(ns + "/{role}", routes.revoke_namespace)
    router.add_get(TOPIC_BASE + "/permissions", routes.list_topic)
    router.add_post(TOPIC_BASE + "/permissions/{role}", routes.grant_topic)
    router.add_delete(TOPIC_BASE + "/permissions/{role}", routes.revoke_topic)


async def _actions(request: web.Request) -> list[str]:
    body = await json_body(request)
    try:
        return check_actions(body)
    except ValueError as exc:
        raise AdminError(400, f"Invalid permissions body: {exc}") from None


class PermissionRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.service = admin.service
        self.authz = admin.service.authorization

    def _policies(self, ns: str) -> dict[str, Any]:
        self.admin.require_namespace(ns)
        return self.authz.auth_policies(ns)

    async def _store(self, ns: str, policies: dict[str, Any]) -> web.Response:
        await self.service.namespace_policies.update(ns, AUTH_POLICIES, policies)
        return no_content()

    # --- namespace ------------------------------------------------------------------
    async def list_namespace(self, request: web.Request) -> web.Response:
        return web.json_response(self._policies(namespace_of(request))[NAMESPACE_AUTH])

    async def grant_namespace(self, request: web.Request) -> web.Response:
        ns, role = namespace_of(request), request.match_info["role"]
        actions = await _actions(request)
        policies = self._policies(ns)
        policies[NAMESPACE_AUTH][role] = actions
        return await self._store(ns, policies)

    async def revoke_namespace(self, request: web.Request) -> web.Response:
        ns, role = namespace_of(request), request.match_info["role"]
        policies = self._policies(ns)
        if policies[NAMESPACE_AUTH].pop(role, None) is None:
            raise AdminError(404, f"Role {role} has no permissions on namespace {ns}")
        return await self._store(ns, policies)

    # --- subscription roles -------------------------------------------------------------
    async def subscription_roles(self, request: web.Request) -> web.Response:
        ns, sub = namespace_of(request), request.match_info["subscription"]
        return web.json_response(self._policies(ns)[SUBSCRIPTION_AUTH_ROLES].get(sub, []))

    async def grant_subscription(self, request: web.Request) -> web.Response:
        ns, sub = namespace_of(request), request.match_info["subscription"]
        roles = await json_body(request)
        if not isinstance(roles, list) or not roles or not all(isinstance(r, str) and r for r in roles):
            raise AdminError(400, f"Body must be a non-empty JSON list of role names, got {roles!r}")
        for role in roles:
            check_name("role", role)
        policies = self._policies(ns)
        current = set(policies[SUBSCRIPTION_AUTH_ROLES].get(sub, []))
        policies[SUBSCRIPTION_AUTH_ROLES][sub] = sorted(current | set(roles))
        return await self._store(ns, policies)

    async def revoke_subscription(self, request: web.Request) -> web.Response:
        ns, sub, role = namespace_of(request), request.match_info["subscription"], request.match_info["role"]
        policies = self._policies(ns)
        roles = policies[SUBSCRIPTION_AUTH_ROLES].get(sub, [])
        if role not in roles:
            raise AdminError(404, f"Role {role} is not listed for subscription {sub} in {ns}")
        remaining = [r for r in roles if r != role]
        if remaining:
            policies[SUBSCRIPTION_AUTH_ROLES][sub] = remaining
        else:
            del policies[SUBSCRIPTION_AUTH_ROLES][sub]
        return await self._store(ns, policies)

    # --- topic ------------------------------------------------------------------------
    async def list_topic(self, request: web.Request) -> web.Response:
        name = topic_name(request)
        policies = self._policies(name.namespace_name)
        merged: dict[str, set[str]] = {r: set(a) for r, a in policies[NAMESPACE_AUTH].items()}
        for role, actions in policies[DESTINATION_AUTH].get(str(name), {}).items():
            merged.setdefault(role, set()).update(actions)
        return web.json_response({r: sorted(a) for r, a in merged.items()})

    async def grant_topic(self, request: web.Request) -> web.Response:
        name, role = topic_name(request), request.match_info["role"]
        actions = await _actions(request)
        policies = self._policies(name.namespace_name)
        policies[DESTINATION_AUTH].setdefault(str(name), {})[role] = actions
        return await self._store(name.namespace_name, policies)

    async def revoke_topic(self, request: web.Request) -> web.Response:
        name, role = topic_name(request), request.match_info["role"]
        policies = self._policies(name.namespace_name)
        grants = policies[DESTINATION_AUTH].get(str(name), {})
        if role not in grants:
            if role in policies[NAMESPACE_AUTH]:
                raise AdminError(
                    412, f"Permissions of role {role} are granted on namespace {name.namespace_name}, "
                    "not on the topic: revoke them there"
                )
            raise AdminError(404, f"Role {role} has no permissions on topic {name}")
        del grants[role]
        if not grants:
            del policies[DESTINATION_AUTH][str(name)]
        return await self._store(name.namespace_name, policies)
