"""The schemas REST API (/admin/v2/schemas/{t}/{ns}/{topic}/schema[s]) and the namespace
schemaCompatibilityStrategy policy, against a real broker: upload, get latest and by
version, list, delete, and every bad input with its status and reason; a producer sees
what was uploaded."""
from __future__ import annotations

import json
import uuid

import pulsar
import pytest
from pulsar.schema import AvroSchema

from tests.admin.helpers import call
from tests.broker.test_schema_registry import UserV1, _user_v2
from tests.conftest import BrokerProcess

V1 = json.dumps(UserV1.schema())
V2 = json.dumps(_user_v2().schema())
REQUIRED_EXTRA = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}, {"name": "city", "type": "string"}]})


@pytest.fixture
def ns(broker: BrokerProcess) -> str:
    name = f"public/api-{uuid.uuid4().hex[:8]}"
    assert call(broker.admin_url, "PUT", f"/admin/v2/namespaces/{name}")[0] == 204
    return name


def upload(broker: BrokerProcess, path: str, definition: str, kind: str = "AVRO") -> tuple[int, object]:
    return call(broker.admin_url, "POST", f"/admin/v2/schemas/{path}/schema",
                json.dumps({"type": kind, "schema": definition, "properties": {}}))


def test_upload_get_list_delete(broker: BrokerProcess, client: pulsar.Client, ns: str) -> None:
    base = broker.admin_url
    assert call(base, "POST", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy", '"BACKWARD"')[0] == 204
    assert upload(broker, f"{ns}/orders", V1) == (200, {"version": {"version": 0}})
    assert upload(broker, f"{ns}/orders", V1) == (200, {"version": {"version": 0}})  # same schema, same version
    assert upload(broker, f"{ns}/orders", V2) == (200, {"version": {"version": 1}})
    status, latest = call(base, "GET", f"/admin/v2/schemas/{ns}/orders/schema")
    assert status == 200 and latest["version"] == 1 and latest["type"] == "AVRO"
    assert json.loads(latest["data"]) == json.loads(V2)
    status, first = call(base, "GET", f"/admin/v2/schemas/{ns}/orders/schema/0")
    assert status == 200 and json.loads(first["data"]) == json.loads(V1)
    status, every = call(base, "GET", f"/admin/v2/schemas/{ns}/orders/schemas")
    assert [v["version"] for v in every["getSchemaResponses"]] == [0, 1]
    # a producer with the uploaded v2 schema gets version 1 on its messages
    producer = client.create_producer(f"persistent://{ns}/orders", schema=AvroSchema(_user_v2()))
    producer.close()
    assert call(base, "GET", f"/admin/v2/schemas/{ns}/orders/schemas")[1] == every
    assert call(base, "DELETE", f"/admin/v2/schemas/{ns}/orders/schema") == (200, {"version": 1})
    status, body = call(base, "GET", f"/admin/v2/schemas/{ns}/orders/schema")
    assert status == 404 and "orders" in body["reason"]
    # versions are never reused after a delete
    assert upload(broker, f"{ns}/orders", V1) == (200, {"version": {"version": 2}})


def test_incompatible_upload_is_409_with_the_reason(broker: BrokerProcess, ns: str) -> None:
    assert call(broker.admin_url, "POST", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy",
                '"BACKWARD"')[0] == 204
    assert upload(broker, f"{ns}/t", V1)[0] == 200
    status, body = upload(broker, f"{ns}/t", REQUIRED_EXTRA)
    assert status == 409
    assert "BACKWARD" in body["reason"] and "city" in body["reason"] and "no default" in body["reason"]
    status, body = upload(broker, f"{ns}/t", "", kind="STRING")
    assert status == 409 and "STRING differs from AVRO" in body["reason"]
    assert [v["version"] for v in call(broker.admin_url, "GET", f"/admin/v2/schemas/{ns}/t/schemas")[1]
            ["getSchemaResponses"]] == [0]


@pytest.mark.parametrize(("body", "status", "reason"), [
    ('{"type": "AVRO", "schema": "{not json"}', 400, "not JSON"),
    ('{"type": "AVRO", "schema": "{\\"type\\": \\"record\\", \\"name\\": \\"X\\"}"}', 400, "fields"),
    ('{"type": "AVRO", "schema": "{\\"type\\": \\"record\\", \\"name\\": \\"X\\", \\"fields\\": '
     '[{\\"name\\": \\"a\\", \\"type\\": \\"Money\\"}]}"}', 400, "unknown type 'Money'"),
    ('{"type": "PICTURE", "schema": ""}', 400, "type must be one of"),
    ('{"type": "AVRO", "schema": 5}', 400, "schema must be a string"),
    ('{"type": "AVRO", "schema": "\\"int\\"", "extra": 1}', 400, "Unknown field(s) ['extra']"),
    ('[1, 2]', 400, "Body must be a JSON object"),
    ('{"type": "AVRO", "schema": "\\"int\\"", "properties": {"a": 1}}', 400, "properties must be"),
])
def test_malformed_uploads_are_400_naming_what_is_wrong(broker: BrokerProcess, ns: str, body: str, status: int,
                                                         reason: str) -> None:
    got, reply = call(broker.admin_url, "POST", f"/admin/v2/schemas/{ns}/bad/schema", body)
    assert got == status and reason in reply["reason"], reply
    assert call(broker.admin_url, "GET", f"/admin/v2/schemas/{ns}/bad/schema")[0] == 404  # nothing stored


def test_unknown_topic_namespace_and_version_are_404(broker: BrokerProcess, ns: str) -> None:
    base = broker.admin_url
    status, body = call(base, "GET", f"/admin/v2/schemas/{ns}/nobody-here/schema")
    assert status == 404 and body["reason"] == f"Topic persistent://{ns}/nobody-here not found"
    assert call(base, "GET", f"/admin/v2/schemas/{ns}/nobody-here/schemas")[0] == 404
    assert call(base, "DELETE", f"/admin/v2/schemas/{ns}/nobody-here/schema")[0] == 404
    status, body = upload(broker, "public/no-such-ns/t", V1)
    assert status == 404 and "Namespace public/no-such-ns does not exist" in body["reason"]
    assert upload(broker, f"{ns}/versions", V1)[0] == 200
    status, body = call(base, "GET", f"/admin/v2/schemas/{ns}/versions/schema/7")
    assert status == 404 and "version 7" in body["reason"]
    status, body = call(base, "GET", f"/admin/v2/schemas/{ns}/versions/schema/seven")
    assert status == 412 and "schema version" in body["reason"]  # path numbers: admin/request_parsing.path_int


def test_strategy_policy_values_and_errors(broker: BrokerProcess, ns: str) -> None:
    path = f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy"
    assert call(broker.admin_url, "GET", path) == (200, "UNDEFINED")  # not set (the broker default, FULL, applies), as Pulsar
    for value in ("FULL_TRANSITIVE", "ALWAYS_COMPATIBLE"):
        assert call(broker.admin_url, "POST", path, json.dumps(value))[0] == 204
        assert call(broker.admin_url, "GET", path) == (200, value)
    assert call(broker.admin_url, "PUT", path, '"FORWARD"')[0] == 204  # pulsar-admin's method
    assert call(broker.admin_url, "GET", path) == (200, "FORWARD")
    status, body = call(broker.admin_url, "POST", path, '"SOMETIMES"')
    assert status == 400 and "BACKWARD" in body["reason"] and "SOMETIMES" in body["reason"]
    assert call(broker.admin_url, "GET", path) == (200, "FORWARD")  # the refused value changed nothing
    assert call(broker.admin_url, "DELETE", path)[0] == 204
    assert call(broker.admin_url, "GET", path) == (200, "UNDEFINED")
    assert call(broker.admin_url, "POST", "/admin/v2/namespaces/public/nope/schemaCompatibilityStrategy",
                '"FULL"')[0] == 404


def test_transitive_strategies_check_every_version(broker: BrokerProcess, ns: str) -> None:
    """v1 {name}, v2 adds optional `email`, v3 makes `email` required: v3 reads v2's data
    (BACKWARD accepts it) but not v1's, which has no email (BACKWARD_TRANSITIVE refuses it)."""
    def rec(*fields: dict[str, object]) -> str:
        return json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"},
                                                                         *fields]})

    v1 = rec()
    v2 = rec({"name": "email", "type": ["null", "string"], "default": None})
    v3 = rec({"name": "email", "type": ["null", "string"]})
    path = f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy"
    for strategy, topic, expected in (("BACKWARD", "plain", 200), ("BACKWARD_TRANSITIVE", "transitive", 409)):
        assert call(broker.admin_url, "POST", path, json.dumps(strategy))[0] == 204
        assert upload(broker, f"{ns}/{topic}", v1)[0] == 200
        assert upload(broker, f"{ns}/{topic}", v2)[0] == 200
        status, body = upload(broker, f"{ns}/{topic}", v3)
        assert status == expected, body
        if status == 409:
            assert "BACKWARD_TRANSITIVE" in body["reason"] and "version 0" in body["reason"]
