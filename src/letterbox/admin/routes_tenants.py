# Tenants and namespaces: list, get, create, delete (Pulsar admin v2 paths).
# A tenant with namespaces, or a namespace with topics, cannot be deleted
# (409). Namespace policies have their own module (routes_namespace_policies);
# a create body may carry Pulsar's auth_policies (permissions, routes_permissions).
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, no_content
from letterbox.admin.request_parsing import check_name, json_body, namespace_of
from letterbox.broker import NAMESPACE_KEY
from letterbox.names import NameKind
from letterbox.security.authorization import (
    AUTH_POLICIES,
    TENANT_KEY,
    check_auth_policies,
    empty_auth_policies,
)

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    routes = TenantRoutes(admin)
    router.add_get("/admin/v2/tenants", routes.list_tenants)
    router.add_get("/admin/v2/tenants/{tenant}", routes.get_tenant)
    router.add_put("/admin/v2/tenants/{tenant}", routes.create_tenant)
    router.add_post("/admin/v2/tenants/{tenant}", routes.update_tenant)
    router.add_delete("/admin/v2/tenants/{tenant}", routes.delete_tenant)
    router.add_get("/admin/v2/namespaces/{tenant}", routes.list_namespaces)
    router.add_get("/admin/v2/namespaces/{tenant}/{namespace}", routes.get_namespace)
    router.add_put("/admin/v2/namespaces/{tenant}/{namespace}", routes.create_namespace)
    router.add_delete("/admin/v2/namespaces/{tenant}/{namespace}", routes.delete_namespace)
    router.add_get("/admin/v2/namespaces/{tenant}/{namespace}/topics", routes.namespace_topics)


class TenantRoutes:
    def __init__(self, admin: AdminContext) -> None:
        self.admin = admin
        self.service = admin.service

    # --- tenants -------------------------------------------------------------------
    async def list_tenants(self, request: web.Request) -> web.Response:
        return web.json_response(self.admin.tenants())

    async def get_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        value = self.service.store.get_metadata(TENANT_KEY + tenant)
        if value is None:
            raise AdminError(404, f"Tenant {tenant} does not exist")
        return web.json_response(json.loads(value))

    def _tenant_info(self, body: Any) -> dict[str, Any]:
        cluster = self.service.config.cluster_name
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise AdminError(400, "Tenant info must be a JSON object")
        roles = body.get("adminRoles", [])
        clusters = body.get("allowedClusters") or [cluster]
        if not isinstance(roles, list) or not isinstance(clusters, list):
            raise AdminError(400, "adminRoles and allowedClusters must be lists")
        lists: tuple[tuple[NameKind, list[Any]], ...] = (("role", roles), ("cluster", clusters))
        for kind, values in lists:
            for value in values:
                if not isinstance(value, str):
                    raise AdminError(400, f"adminRoles and allowedClusters must be lists of strings, got {value!r}")
                check_name(kind, value)
        known = {cluster, *self.admin.registered_clusters()}
        unknown = [c for c in clusters if c not in known]
        if unknown:
            raise AdminError(412, f"Clusters {unknown} do not exist")
        return {"adminRoles": roles, "allowedClusters": clusters}

    async def create_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        info = self._tenant_info(await json_body(request))
        if self.service.store.get_metadata(TENANT_KEY + tenant) is not None:
            raise AdminError(409, f"Tenant {tenant} already exists")
        await self.service.store.put_metadata(TENANT_KEY + tenant, json.dumps(info))
        return no_content()

    async def update_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        info = self._tenant_info(await json_body(request))
        self.admin.require_tenant(tenant)
        await self.service.store.put_metadata(TENANT_KEY + tenant, json.dumps(info))
        return no_content()

    async def delete_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        self.admin.require_tenant(tenant)
        if self.admin.namespaces(tenant):
            raise AdminError(409, f"The tenant {tenant} still has active namespaces")
        await self.service.store.put_metadata(TENANT_KEY + tenant, None)
        return no_content()

    # --- namespaces ----------------------------------------------------------------
    async def list_namespaces(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        self.admin.require_tenant(tenant)
        return web.json_response(self.admin.namespaces(tenant))

    async def get_namespace(self, request: web.Request) -> web.Response:
        ns = namespace_of(request)
        value = self.service.store.get_metadata(NAMESPACE_KEY + ns)
        if value is None:
            raise AdminError(404, f"Namespace {ns} does not exist")
        policies = {
            "bundles": {"numBundles": 1},
            "deleted": False,
            AUTH_POLICIES: empty_auth_policies(),
            **json.loads(value),
        }
        return web.json_response(policies)

    async def create_namespace(self, request: web.Request) -> web.Response:
        tenant, name = request.match_info["tenant"], request.match_info["namespace"]
        body = await json_body(request)
        if body is not None and not isinstance(body, dict):
            raise AdminError(400, "Namespace policies must be a JSON object")
        self.admin.require_tenant(tenant)
        ns = f"{tenant}/{name}"
        if self.admin.namespace_exists(ns):
            raise AdminError(409, f"Namespace {ns} already exists")
        doc: dict[str, Any] = {}
        if body and body.get(AUTH_POLICIES) is not None:
            try:
                doc[AUTH_POLICIES] = check_auth_policies(body[AUTH_POLICIES])
            except ValueError as exc:
                raise AdminError(400, f"Invalid namespace policies: {exc}") from None
        await self.service.store.put_metadata(NAMESPACE_KEY + ns, json.dumps(doc))
        self.service.namespace_policies.forget(ns)
        return no_content()

    async def delete_namespace(self, request: web.Request) -> web.Response:
        ns = namespace_of(request)
        self.admin.require_namespace(ns)
        if self.service.list_topics(ns):
            raise AdminError(409, f"Cannot delete non empty namespace {ns}")
        await self.service.store.put_metadata(NAMESPACE_KEY + ns, None)
        self.service.namespace_policies.forget(ns)
        return no_content()

    async def namespace_topics(self, request: web.Request) -> web.Response:
        topics = self.admin.namespace_topics(namespace_of(request))
        mode = request.query.get("mode", "PERSISTENT").upper()
        if mode == "PERSISTENT":
            topics = [t for t in topics if t.startswith("persistent://")]
        elif mode == "NON_PERSISTENT":
            topics = [t for t in topics if t.startswith("non-persistent://")]
        return web.json_response(topics)
