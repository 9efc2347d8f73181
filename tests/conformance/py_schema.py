"""Python scenarios: Avro and JSON schema evolution under each schema compatibility strategy.
Each scenario creates its own namespace (the strategy is a namespace policy, and scenarios run in
parallel on the same brokers), sets the strategy, then creates producers with successive schema
versions on fresh topics and records which were accepted ("ok") or the client's error name."""
from __future__ import annotations

import contextlib
from typing import Any

from pulsar.schema import AvroSchema, JsonSchema

from tests.conformance.records import error_name
from tests.conformance.registry import scenario
from tests.conformance.targets import Target, admin, client, short


def _record(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "User", "namespace": "conformance", "fields": list(fields)}


NAME = {"name": "name", "type": "string"}
AGE = {"name": "age", "type": "int"}
V1 = _record(NAME, AGE)

# case -> the versions registered one after another (the first on an empty topic)
CASES: dict[str, list[dict[str, Any]]] = {
    "add_optional": [V1, _record(NAME, AGE, {"name": "email", "type": ["null", "string"], "default": None})],
    "add_required": [V1, _record(NAME, AGE, {"name": "email", "type": "string"})],
    "remove_required": [V1, _record(NAME)],
    "remove_defaulted": [_record(NAME, {"name": "age", "type": "int", "default": 0}), _record(NAME)],
    "widen_int_to_long": [V1, _record(NAME, {"name": "age", "type": "long"})],
    "int_to_string": [V1, _record(NAME, {"name": "age", "type": "string"})],
    # a third version compatible with the second but not the first: *_TRANSITIVE tells them apart
    "chain_backward": [V1, _record(NAME, AGE, {"name": "email", "type": "string", "default": ""}),
                       _record(NAME, AGE, {"name": "email", "type": "string"})],
    "chain_forward": [V1, _record(NAME, {"name": "age", "type": "int", "default": 0}), _record(NAME)],
}


def _json_schema(definition: dict[str, Any]) -> JsonSchema:
    holder = type("User", (), {"schema": staticmethod(lambda: definition)})
    return JsonSchema(holder)


def _namespace(t: Target, p: str, tag: str) -> str:
    ns = f"{short(p)}-{tag}"
    admin(t, "PUT", f"/admin/v2/namespaces/public/{ns}")
    return ns


def _drop_namespace(t: Target, ns: str, topics: list[str]) -> None:
    for topic in topics:
        admin(t, "DELETE", f"/admin/v2/persistent/public/{ns}/{topic}?force=true")
    admin(t, "DELETE", f"/admin/v2/namespaces/public/{ns}?force=true")


def _evolve(t: Target, ns: str, kind: str, cases: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    make = AvroSchema if kind == "avro" else None
    out: dict[str, list[str]] = {}
    with client(t) as c:
        for case, versions in cases.items():
            topic = f"persistent://public/{ns}/{kind}-{case.replace('_', '-')}"
            steps = []
            for v in versions:
                schema = make(None, schema_definition=v) if make else _json_schema(v)
                try:
                    c.create_producer(topic, schema=schema).close()
                    steps.append("ok")
                except Exception as e:
                    steps.append(error_name(e))
            out[case] = steps
    return out


def _strategy(t: Target, p: str, strategy: str, kind: str = "avro") -> Any:
    ns = _namespace(t, p, strategy.lower().replace("_", "-"))
    path = f"/admin/v2/namespaces/public/{ns}/schemaCompatibilityStrategy"
    try:
        status, _ = admin(t, "PUT", path, f'"{strategy}"')
        _, now = admin(t, "GET", path)
        return {"set": status, "get": now, "cases": _evolve(t, ns, kind, CASES)}
    finally:
        with contextlib.suppress(Exception):
            _drop_namespace(t, ns, [f"{kind}-{case.replace('_', '-')}" for case in CASES])


@scenario
def schema_avro_backward(t: Target, p: str) -> Any:
    return _strategy(t, p, "BACKWARD")


@scenario
def schema_avro_backward_transitive(t: Target, p: str) -> Any:
    return _strategy(t, p, "BACKWARD_TRANSITIVE")


@scenario
def schema_avro_forward(t: Target, p: str) -> Any:
    return _strategy(t, p, "FORWARD")


@scenario
def schema_avro_forward_transitive(t: Target, p: str) -> Any:
    return _strategy(t, p, "FORWARD_TRANSITIVE")


@scenario
def schema_avro_full(t: Target, p: str) -> Any:
    return _strategy(t, p, "FULL")


@scenario
def schema_avro_full_transitive(t: Target, p: str) -> Any:
    return _strategy(t, p, "FULL_TRANSITIVE")


@scenario
def schema_avro_always_compatible(t: Target, p: str) -> Any:
    return _strategy(t, p, "ALWAYS_COMPATIBLE")


@scenario
def schema_avro_always_incompatible(t: Target, p: str) -> Any:
    return _strategy(t, p, "ALWAYS_INCOMPATIBLE")


@scenario
def schema_json_backward(t: Target, p: str) -> Any:
    return _strategy(t, p, "BACKWARD", kind="json")


@scenario
def schema_json_default_strategy(t: Target, p: str) -> Any:
    """A namespace with no strategy set (the broker's default) and JSON schemas."""
    ns = _namespace(t, p, "jsondefault")
    try:
        return _evolve(t, ns, "json", CASES)
    finally:
        with contextlib.suppress(Exception):
            _drop_namespace(t, ns, [f"json-{case.replace('_', '-')}" for case in CASES])


@scenario
def schema_strategy_admin_answers(t: Target, p: str) -> Any:
    """GET of a namespace's strategy never set, then PUT and GET."""
    ns = _namespace(t, p, "strategyadmin")
    path = f"/admin/v2/namespaces/public/{ns}/schemaCompatibilityStrategy"
    try:
        return {"unset": list(admin(t, "GET", path)), "set": admin(t, "PUT", path, '"FORWARD"')[0],
                "after_set": list(admin(t, "GET", path))}
    finally:
        with contextlib.suppress(Exception):
            _drop_namespace(t, ns, [])


@scenario
def schema_strategy_unknown_value(t: Target, p: str) -> Any:
    """PUT of a strategy name that does not exist, over FORWARD: the status and the strategy after."""
    ns = _namespace(t, p, "strategybogus")
    path = f"/admin/v2/namespaces/public/{ns}/schemaCompatibilityStrategy"
    try:
        admin(t, "PUT", path, '"FORWARD"')
        return {"bogus": admin(t, "PUT", path, '"SOMETIMES"')[0], "after": list(admin(t, "GET", path))}
    finally:
        with contextlib.suppress(Exception):
            _drop_namespace(t, ns, [])


@scenario
def schema_type_change_and_bytes_producer(t: Target, p: str) -> Any:
    """Default strategy: an AVRO topic then a JSON producer (another type), a bytes producer
    (no schema) and a producer with the same definition again."""
    ns = _namespace(t, p, "typechange")
    topic = f"persistent://public/{ns}/t"
    out = {}
    try:
        with client(t) as c:
            for step, schema in (("avro", AvroSchema(None, schema_definition=V1)), ("json", _json_schema(V1)),
                                 ("bytes", None), ("avro_again", AvroSchema(None, schema_definition=V1))):
                try:
                    (c.create_producer(topic, schema=schema) if schema else c.create_producer(topic)).close()
                    out[step] = "ok"
                except Exception as e:
                    out[step] = error_name(e)
        status, body = admin(t, "GET", f"/admin/v2/schemas/public/{ns}/t/schemas")
        versions = body.get("getSchemaResponses", []) if isinstance(body, dict) else []
        out["registry"] = [status, [[v.get("version"), v.get("type")] for v in versions]]
        return out
    finally:
        with contextlib.suppress(Exception):
            _drop_namespace(t, ns, ["t"])
