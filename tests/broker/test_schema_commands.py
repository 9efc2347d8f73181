"""GET_OR_CREATE_SCHEMA and GET_SCHEMA over a raw socket with our own codec (the official
Python client only sends GET_OR_CREATE_SCHEMA for AUTO_PRODUCE producers): a new schema gets
the next version, an equal one its stored version, a refused one IncompatibleSchema in the
GET_OR_CREATE_SCHEMA_RESPONSE; GET_SCHEMA answers the latest or the version asked for, and
TopicNotFound naming the version that does not exist."""
from __future__ import annotations

import json
import uuid

from letterbox.errors import ServerError
from letterbox.protocol import pb
from letterbox.protocol.framing import encode_command
from tests.admin.helpers import call
from tests.broker.test_robustness import RawConn
from tests.conftest import BrokerProcess

T = pb.BaseCommand


def _avro(*fields: str) -> bytes:
    return json.dumps({"type": "record", "name": "Event", "fields": [
        {"name": f, "type": "string"} if not f.endswith("?") else
        {"name": f[:-1], "type": ["null", "string"], "default": None} for f in fields]}).encode()


def get_or_create(topic: str, rid: int, data: bytes) -> bytes:
    schema = pb.Schema(name="Event", schema_data=data, type=pb.Schema.Avro)
    body = pb.CommandGetOrCreateSchema(request_id=rid, topic=topic, schema=schema)
    return encode_command(T(type=T.GET_OR_CREATE_SCHEMA, getOrCreateSchema=body))


def get_schema(topic: str, rid: int, version: int | None = None) -> bytes:
    body = pb.CommandGetSchema(request_id=rid, topic=topic)
    if version is not None:
        body.schema_version = version.to_bytes(8, "big", signed=True)
    return encode_command(T(type=T.GET_SCHEMA, getSchema=body))


def test_get_or_create_then_get_by_version(broker: BrokerProcess, conn: RawConn) -> None:
    ns = f"public/raw-{uuid.uuid4().hex[:8]}"
    assert call(broker.admin_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    assert call(broker.admin_url, "POST", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy",
                '"BACKWARD"')[0] == 204
    topic = f"persistent://{ns}/events"
    versions = []
    for rid, data in enumerate((_avro("id"), _avro("id", "note?"), _avro("id")), start=1):
        conn.send(get_or_create(topic, rid, data))
        r = conn.expect(T.GET_OR_CREATE_SCHEMA_RESPONSE).command.getOrCreateSchemaResponse
        assert r.request_id == rid and not r.HasField("error_code"), r
        versions.append(int.from_bytes(r.schema_version, "big", signed=True))
    assert versions == [0, 1, 0]
    conn.send(get_or_create(topic, 9, _avro("id", "must")))  # a required field without default
    r = conn.expect(T.GET_OR_CREATE_SCHEMA_RESPONSE).command.getOrCreateSchemaResponse
    assert r.request_id == 9 and r.error_code == ServerError.IncompatibleSchema
    assert "must" in r.error_message and "no default" in r.error_message
    conn.send(get_schema(topic, 10))
    latest = conn.expect(T.GET_SCHEMA_RESPONSE).command.getSchemaResponse
    assert int.from_bytes(latest.schema_version, "big") == 1 and latest.schema.schema_data == _avro("id", "note?")
    conn.send(get_schema(topic, 11, 0))
    first = conn.expect(T.GET_SCHEMA_RESPONSE).command.getSchemaResponse
    assert int.from_bytes(first.schema_version, "big") == 0 and first.schema.schema_data == _avro("id")
    conn.send(get_schema(topic, 12, 5))
    missing = conn.expect(T.GET_SCHEMA_RESPONSE).command.getSchemaResponse
    assert missing.error_code == ServerError.TopicNotFound and "schema version 5" in missing.error_message
    bad = pb.CommandGetSchema(request_id=13, topic=topic, schema_version=b"\x01")
    conn.send(encode_command(T(type=T.GET_SCHEMA, getSchema=bad)))
    refused = conn.expect(T.GET_SCHEMA_RESPONSE).command.getSchemaResponse
    assert refused.error_code == ServerError.NotAllowedError and "8 bytes" in refused.error_message
