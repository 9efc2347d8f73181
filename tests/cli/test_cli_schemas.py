"""`letterbox admin schemas get|list|upload|delete` and the namespace schema compatibility
strategy commands, against a real broker, with their errors."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.admin.helpers import call
from tests.broker.test_schema_registry import UserV1, _user_v2
from tests.cli.helpers import admin, ok, ok_json
from tests.conftest import BrokerProcess


def _schema_file(tmp_path: Path, definition: object, name: str) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"type": "AVRO", "schema": definition, "properties": {}}))
    return str(path)


def test_upload_get_list_delete(broker: BrokerProcess, tmp_path: Path) -> None:
    ns = f"public/cli-{uuid.uuid4().hex[:8]}"
    assert call(broker.admin_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    topic = f"{ns}/people"
    assert "set to BACKWARD" in ok(admin(broker, "namespaces", "set-schema-compatibility-strategy", ns,
                                         "--compatibility", "backward"))
    assert ok(admin(broker, "namespaces", "get-schema-compatibility-strategy", ns)).strip() == "BACKWARD"
    v1 = _schema_file(tmp_path, UserV1.schema(), "v1.json")  # the definition inline as JSON
    v2 = _schema_file(tmp_path, json.dumps(_user_v2().schema()), "v2.json")  # or as a string
    assert "version 0" in ok(admin(broker, "schemas", "upload", topic, "-f", v1))
    assert ok_json(admin(broker, "schemas", "upload", topic, "-f", v2, "-o", "json")) == {"version": {"version": 1}}
    latest = ok_json(admin(broker, "schemas", "get", topic, "-o", "json"))
    assert latest["version"] == 1 and json.loads(latest["data"]) == _user_v2().schema()
    assert ok_json(admin(broker, "schemas", "get", topic, "--version", "0", "-o", "json"))["version"] == 0
    listing = ok(admin(broker, "schemas", "list", topic))
    assert "version 0  AVRO" in listing and "version 1  AVRO" in listing
    assert "last version 1" in ok(admin(broker, "schemas", "delete", topic))
    gone = admin(broker, "schemas", "get", topic)
    assert gone.exit_code != 0 and "people not found (HTTP 404)" in gone.stderr  # no messages, no schema


def test_bad_inputs_say_what_to_fix(broker: BrokerProcess, tmp_path: Path) -> None:
    missing = admin(broker, "schemas", "upload", "t", "-f", str(tmp_path / "nope.json"))
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{type: AVRO")
    bad = admin(broker, "schemas", "upload", "t", "-f", str(garbled))
    assert bad.exit_code == 2 and "is not JSON" in bad.stderr
    broken = _schema_file(tmp_path, {"type": "record", "name": "X"}, "broken.json")
    refused = admin(broker, "schemas", "upload", "t", "-f", broken)
    assert refused.exit_code != 0 and "needs \"fields\"" in refused.stderr and "HTTP 400" in refused.stderr
    unknown = admin(broker, "schemas", "get", "no-such-topic")
    assert unknown.exit_code != 0
    assert "Topic persistent://public/default/no-such-topic not found (HTTP 404)" in unknown.stderr
    np = admin(broker, "schemas", "get", "non-persistent://public/default/x")
    assert np.exit_code == 2 and "persistent topics only" in np.stderr
    strategy = admin(broker, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "SOMETIMES")
    assert strategy.exit_code == 2 and "backward" in strategy.stderr.lower() and "SOMETIMES" in strategy.stderr
