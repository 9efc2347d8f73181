# The schema registry in the CLI (pulsar-admin's names; the REST API is admin/routes_schemas.py):
#   letterbox admin schemas get TOPIC [--version N]    GET .../schema[/{version}]
#   letterbox admin schemas list TOPIC                 GET .../schemas
#   letterbox admin schemas upload TOPIC -f FILE       POST .../schema (FILE: {"type", "schema", "properties"})
#   letterbox admin schemas delete TOPIC               DELETE .../schema
#   letterbox admin namespaces set-schema-compatibility-strategy NS --compatibility BACKWARD
#   letterbox admin namespaces get-schema-compatibility-strategy NS
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.params import NAMESPACE, TOPIC, namespace_path, q
from letterbox.config import SCHEMA_COMPATIBILITY_STRATEGIES
from letterbox.topic_name import TopicName

STRATEGIES = SCHEMA_COMPATIBILITY_STRATEGIES


@click.group()
def schemas() -> None:
    """Get, list, upload and delete the schemas of a topic (like pulsar-admin schemas)."""


def register(admin: click.Group, namespaces: click.Group) -> None:
    admin.add_command(schemas)
    namespaces.add_command(set_strategy)
    namespaces.add_command(get_strategy)


def schema_path(topic: TopicName) -> str:
    if not topic.persistent:
        raise click.BadParameter(f"{topic}: schemas are kept for persistent topics only", param_hint="TOPIC")
    return "/admin/v2/schemas/" + "/".join(q(s) for s in (topic.tenant, topic.namespace, topic.local))


def _describe(v: dict[str, Any]) -> str:
    return f"version {v.get('version')}  {v.get('type')}  {v.get('data')}"


@admin_command(schemas, "get", "topic", TOPIC)
@click.option("--version", "-v", "version", type=click.IntRange(min=0), default=None,
              help="This version (default: the latest).")
def schemas_get(a: AdminContext, topic: TopicName, version: int | None) -> None:
    """Show TOPIC's latest schema, or one version of it."""
    path = schema_path(topic) + "/schema" + ("" if version is None else f"/{version}")
    result = a.client.get_json(path)
    a.report(_describe(result), result)


@admin_command(schemas, "list", "topic", TOPIC)
def schemas_list(a: AdminContext, topic: TopicName) -> None:
    """List every schema version of TOPIC."""
    result = a.client.get_json(schema_path(topic) + "/schemas")
    versions = result.get("getSchemaResponses", []) if isinstance(result, dict) else []
    a.report("\n".join(_describe(v) for v in versions) or f"{topic} has no schema", result)


@admin_command(schemas, "upload", "topic", TOPIC)
@click.option("--filename", "-f", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help='JSON file {"type": "AVRO", "schema": "<definition>", "properties": {}}.')
def schemas_upload(a: AdminContext, topic: TopicName, filename: Path) -> None:
    """Upload a new schema version for TOPIC (refused if the namespace's strategy forbids it)."""
    try:
        body = json.loads(filename.read_text())
    except OSError as exc:
        raise click.BadParameter(f"cannot read {filename}: {exc.strerror}", param_hint="'-f' / '--filename'") from None
    except ValueError as exc:
        raise click.BadParameter(f"{filename} is not JSON ({exc}); it must hold "
                                 '{"type": "AVRO", "schema": "<definition>", "properties": {}}',
                                 param_hint="'-f' / '--filename'") from None
    if isinstance(body, dict) and isinstance(body.get("schema"), (dict, list)):
        body["schema"] = json.dumps(body["schema"])  # a definition written inline as JSON
    result = a.client.post_json(schema_path(topic) + "/schema", body)
    version = (result or {}).get("version", {})
    a.report(f"Uploaded the schema of {topic}: version {version.get('version')}", result)


@admin_command(schemas, "delete", "topic", TOPIC)
def schemas_delete(a: AdminContext, topic: TopicName) -> None:
    """Delete every schema version of TOPIC."""
    result = a.client.request("DELETE", schema_path(topic) + "/schema").json()
    a.report(f"Deleted the schemas of {topic} (last version {result.get('version')})", result)


@admin_command(None, "set-schema-compatibility-strategy", "namespace", NAMESPACE)
@click.option("--compatibility", "-c", required=True, type=click.Choice(STRATEGIES, case_sensitive=False),
              help="How a new schema version must relate to the stored ones.")
def set_strategy(a: AdminContext, namespace: str, compatibility: str) -> None:
    """Set NAMESPACE's schema compatibility strategy."""
    value = compatibility.upper()
    a.client.request("PUT", namespace_path(namespace) + "/schemaCompatibilityStrategy", value)  # as pulsar-admin
    a.done(f"Schema compatibility strategy of {namespace} set to {value}", namespace=namespace,
           schemaCompatibilityStrategy=value)


@admin_command(None, "get-schema-compatibility-strategy", "namespace", NAMESPACE)
def get_strategy(a: AdminContext, namespace: str) -> None:
    """Show NAMESPACE's schema compatibility strategy (UNDEFINED: the broker's schema_compatibility_strategy)."""
    result = a.client.request("GET", namespace_path(namespace) + "/schemaCompatibilityStrategy").json()
    value = result or "UNDEFINED"
    a.report(value, {"namespace": namespace, "schemaCompatibilityStrategy": value})
