# The schema registry over HTTP (Pulsar admin v2 paths; the registry is
# broker/schemas/schema_registry.py):
#   GET    /admin/v2/schemas/{t}/{ns}/{topic}/schema            latest version
#   GET    .../schema/{version}                                  one version
#   GET    .../schemas                                           {"getSchemaResponses": [...]}
#   POST   .../schema   body {"type": "AVRO", "schema": "<definition>", "properties": {}}
#                       -> {"version": {"version": n}}; an equal schema answers its version
#   DELETE .../schema   every version -> {"version": <last deleted>}
#   GET/POST/PUT/DELETE /admin/v2/namespaces/{t}/{ns}/schemaCompatibilityStrategy
#                       the namespace's strategy (body: a JSON string of Pulsar's enum)
# A schema answers as Pulsar's GetSchemaResponse: {"version", "type" (a name),
# "timestamp", "data" (the definition text), "properties"}.
# Errors: an unknown namespace, or a topic with neither messages nor schema, 404;
# no such version 404; a malformed body or definition 400 naming what is
# wrong; a schema the namespace's strategy refuses 409 with the reason.
# Rules (admin/access_rules.py): reads LOOKUP, upload/delete and the strategy
# TENANT_ADMIN.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import NAMESPACE_BASE, json_body, namespace_of, path_int
from letterbox.admin.routes_namespace_policies import PolicyRoutes
from letterbox.broker import (
    STRATEGIES,
    STRATEGY_POLICY,
    TYPE_NAMES,
    SchemaVersion,
    check_definition,
    type_name,
)
from letterbox.broker import avro_resolution as avro
from letterbox.errors import IncompatibleSchema
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

SCHEMAS_BASE = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
STRATEGY_PATH = NAMESPACE_BASE + "/schemaCompatibilityStrategy"
_UPLOAD_FIELDS = ("type", "schema", "properties")


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    service = admin.service
    registry = service.schemas

    def topic_of(request: web.Request, need_schema: bool = True) -> TopicName:
        m = request.match_info
        ns = namespace_of(request)
        if service.namespace_policies.document(ns) is None:
            raise AdminError(404, f"Namespace {ns} does not exist")
        name = TopicName.parse(f"persistent://{ns}/{m['topic']}")
        known = service.topic_exists(name) or service.partitions_of(name) > 0
        if need_schema and not registry.versions(name):
            raise AdminError(404, f"Topic {name} not found" if not known else f"Topic {name} has no schema")
        return name

    async def get_latest(request: web.Request) -> web.Response:
        name = topic_of(request)
        latest = registry.latest(name)
        assert latest is not None
        return web.json_response(_response(latest))

    async def get_version(request: web.Request) -> web.Response:
        name = topic_of(request)
        version = path_int(request, "version", "schema version")
        found = registry.get(name, version)
        if found is None:
            raise AdminError(404, f"Schema version {version} of {name} not found")
        return web.json_response(_response(found))

    async def get_all(request: web.Request) -> web.Response:
        name = topic_of(request)
        return web.json_response({"getSchemaResponses": [_response(v) for v in registry.versions(name)]})

    async def upload(request: web.Request) -> web.Response:
        schema = _upload_body(await json_body(request))
        name = topic_of(request, need_schema=False)
        try:
            version, write = registry.add(name, schema)
        except IncompatibleSchema as exc:
            raise AdminError(409, exc.message) from None
        if write is not None:
            await write
        return web.json_response({"version": {"version": version.version}})

    async def delete(request: web.Request) -> web.Response:
        name = topic_of(request)
        gone, write = registry.delete_all(name)
        await write
        return web.json_response({"version": gone[-1].version})

    router.add_get(SCHEMAS_BASE + "/schema", get_latest)
    router.add_get(SCHEMAS_BASE + "/schema/{version}", get_version)
    router.add_get(SCHEMAS_BASE + "/schemas", get_all)
    router.add_post(SCHEMAS_BASE + "/schema", upload)
    router.add_delete(SCHEMAS_BASE + "/schema", delete)
    policies = PolicyRoutes(admin)
    stored_strategy = policies.getter(STRATEGY_POLICY)

    async def get_strategy(request: web.Request) -> web.StreamResponse:
        answer = await stored_strategy(request)
        # Pulsar's answer for a namespace that never set one
        return web.json_response("UNDEFINED") if answer.status == 204 else answer

    router.add_get(STRATEGY_PATH, get_strategy)
    router.add_post(STRATEGY_PATH, policies.setter(STRATEGY_POLICY, _strategy))
    router.add_put(STRATEGY_PATH, policies.setter(STRATEGY_POLICY, _strategy))  # pulsar-admin uses PUT
    router.add_delete(STRATEGY_PATH, policies.remover(STRATEGY_POLICY))


def _response(v: SchemaVersion) -> dict[str, Any]:
    return {"version": v.version, "type": type_name(v.type), "timestamp": v.timestamp,
            "data": v.data.decode("utf-8", errors="replace"), "properties": v.properties}


def _upload_body(body: Any) -> SchemaVersion:
    if not isinstance(body, dict):
        raise AdminError(400, "Body must be a JSON object {\"type\", \"schema\", \"properties\"}")
    unknown = sorted(set(body) - set(_UPLOAD_FIELDS))
    if unknown:
        raise AdminError(400, f"Unknown field(s) {unknown} in the schema; known: {list(_UPLOAD_FIELDS)}")
    kind = body.get("type")
    if not isinstance(kind, str) or kind.upper() not in TYPE_NAMES or kind.upper() == "NONE":
        known = [k for k in TYPE_NAMES if k != "NONE"]
        raise AdminError(400, f"type must be one of {known}, got {kind!r}")
    definition = body.get("schema", "")
    if not isinstance(definition, str):
        raise AdminError(400, "schema must be a string (the schema definition, e.g. Avro JSON text)")
    props = body.get("properties") or {}
    if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise AdminError(400, "properties must be an object of strings")
    schema = SchemaVersion(-1, TYPE_NAMES[kind.upper()], "", definition.encode(), dict(props))
    try:
        check_definition(schema)
    except avro.AvroSchemaError as exc:
        raise AdminError(400, f"Invalid {kind.upper()} schema: {exc}") from None
    return schema


def _strategy(body: Any) -> str:
    if not isinstance(body, str) or body.upper() not in STRATEGIES:
        raise AdminError(400, f"Body must be one of {list(STRATEGIES)} (a JSON string), got {body!r}")
    return body.upper()
