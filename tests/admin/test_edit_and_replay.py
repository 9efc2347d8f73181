"""Edit-and-replay over the admin API, through the official client: a dead letter with a bad field
is redriven with a JSON patch; its subscription's consumer gets the patched payload once; the
attempt log of the new message shows the edit (who, when, the old payload's sha256) and the
original stays readable in the DLQ. Edits that cannot apply refuse the redrive before anything
moves."""
from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pulsar

from letterbox.client import message_id_text
from letterbox.message_properties import EDIT_LOG
from tests.admin.helpers import call
from tests.admin.redrive_helpers import DLQ_POLICY
from tests.conftest import BrokerProcess, wait_until

NS = "public/edits"  # retention set: acknowledged and redriven entries stay readable
P = f"/admin/v2/persistent/{NS}"
T = f"persistent://{NS}/"
BAD = json.dumps({"order": 7, "amount": "12,50", "currency": "EUR"}).encode()


def live_dead_letters(base: str, dlq: str, may_be_missing: bool = False) -> list[dict[str, Any]]:
    status, letters = call(base, "GET", f"{P}/{dlq}/letterbox/deadLetters?limit=10000")
    if status == 404 and may_be_missing:
        return []
    assert status == 200, letters
    return list(letters)


def _dead_letter(base: str, client: Any, topic: str, payloads: list[bytes]) -> list[dict[str, Any]]:
    """Publish `payloads` on `topic`; subscription S nacks them until they are dead letters."""
    if call(base, "GET", f"/admin/v2/namespaces/{NS}")[0] == 404:
        assert call(base, "PUT", f"/admin/v2/namespaces/{NS}")[0] == 204
        retention = json.dumps({"retentionTimeInMinutes": 60, "retentionSizeInMB": 100})
        assert call(base, "POST", f"/admin/v2/namespaces/{NS}/retention", retention)[0] == 204
    consumer = client.subscribe(T + topic, "S", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=20, properties=DLQ_POLICY)
    producer = client.create_producer(T + topic, batching_enabled=False)
    for p in payloads:
        producer.send(p, properties={"tenant-id": "t1", "note": "keep"})
    producer.close()

    def settle() -> bool:
        for _ in range(20):
            try:
                consumer.negative_acknowledge(consumer.receive(timeout_millis=50))
            except pulsar.Timeout:
                break
        return len(live_dead_letters(base, f"{topic}-S-DLQ", True)) >= len(payloads)

    assert wait_until(settle, 30, 0)
    consumer.close()
    return live_dead_letters(base, f"{topic}-S-DLQ")


def test_json_patch_redrive_delivers_the_patched_payload_once_and_logs_the_edit(
        broker: BrokerProcess, client: Any) -> None:
    base, topic = broker.admin_url, "edit-orders"
    [dead] = _dead_letter(base, client, topic, [BAD])
    patch = [{"op": "replace", "path": "/amount", "value": 12.5}, {"op": "add", "path": "/fixed", "value": True}]
    body = {"messageIds": [dead["messageId"]], "edit": {
        "jsonPatch": patch, "setProperties": {"note": "amount fixed"}, "removeProperties": ["tenant-id"]}}
    status, answer = call(base, "POST", f"{P}/{topic}-S-DLQ/letterbox/redrive", json.dumps(body))
    assert status == 200 and answer["moved"] == 1, answer

    consumer = client.subscribe(T + topic, "S", consumer_type=pulsar.ConsumerType.Shared)
    msg = consumer.receive(timeout_millis=5_000)
    assert json.loads(msg.data()) == {"order": 7, "amount": 12.5, "currency": "EUR", "fixed": True}
    props = msg.properties()
    assert props["note"] == "amount fixed" and "tenant-id" not in props
    [edit] = json.loads(props[EDIT_LOG])
    assert edit["oldPayloadSha256"] == hashlib.sha256(BAD).hexdigest()
    assert edit["newPayloadSha256"] == hashlib.sha256(msg.data()).hexdigest()
    assert edit["original"] == dead["messageId"]
    assert edit["changes"] == ["jsonPatch:2", "set:note", "removed:tenant-id"]
    # the attempt log of the message being processed starts with the edit
    status, log = call(base, "GET", f"{P}/{topic}/subscription/S/letterbox/attempts/{message_id_text(msg)}")
    assert status == 200 and log["attempts"], log
    first = log["attempts"][0]
    assert first["ending"] == "edited" and hashlib.sha256(BAD).hexdigest() in first["reason"]
    assert first["endedAt"] == edit["at"] and log["edits"] == [edit]
    consumer.acknowledge(msg)
    try:
        again = consumer.receive(timeout_millis=700)
        raise AssertionError(f"delivered twice: {again.data()!r}")
    except pulsar.Timeout:
        pass
    consumer.close()
    # the original stays readable in the DLQ's ledger (as retention keeps it), by the id the edit names
    ledger, entry = dead["messageId"].split(":")[:2]
    status, raw = call(base, "GET", f"{P}/{topic}-S-DLQ/ledger/{ledger}/entry/{entry}")
    assert status == 200 and BAD.decode() in str(raw)
    assert live_dead_letters(base, f"{topic}-S-DLQ") == []


def test_payload_replacement_and_edits_that_cannot_apply(broker: BrokerProcess, client: Any) -> None:
    base, topic = broker.admin_url, "edit-binary"
    letters = _dead_letter(base, client, topic, [b"\x00\x01not json", BAD])
    path = f"{P}/{topic}-S-DLQ/letterbox/redrive"
    patch = {"jsonPatch": [{"op": "replace", "path": "/amount", "value": 1}]}
    # a patch on a group holding a payload that is not JSON: refused up front, nothing moved
    status, answer = call(base, "POST", path, json.dumps({"edit": patch}))
    assert status == 412 and letters[0]["messageId"] in answer["reason"] and "JSON" in answer["reason"], answer
    # a patch whose test fails on the message
    status, answer = call(base, "POST", path, json.dumps({"messageIds": [letters[1]["messageId"]], "edit": {
        "jsonPatch": [{"op": "test", "path": "/order", "value": 8}]}}))
    assert status == 412 and "does not apply" in answer["reason"], answer
    for edit, field in (({"payloadBase64": "***"}, "payloadBase64"),
                        ({"payloadBase64": "AA==", **patch}, "not both"),
                        ({"setProperties": {"REAL_TOPIC": "x"}}, "failure stamps"),
                        ({"removeProperties": ["EDIT_LOG"]}, "failure stamps"),
                        ({"jsonPatch": [{"path": "/a"}]}, "jsonPatch[0]"),
                        ({}, "changes nothing"),
                        ({"colour": "red"}, "unknown field")):
        status, answer = call(base, "POST", path, json.dumps({"edit": edit}))
        assert status == 400 and field in answer["reason"], (edit, answer)
    assert len(live_dead_letters(base, f"{topic}-S-DLQ")) == 2
    # a payload replaced with bytes
    new = b"\xff\xfe replaced"
    status, answer = call(base, "POST", path, json.dumps({
        "messageIds": [letters[0]["messageId"]], "edit": {"payloadBase64": base64.b64encode(new).decode()}}))
    assert status == 200 and answer["moved"] == 1, answer
    consumer = client.subscribe(T + topic, "S", consumer_type=pulsar.ConsumerType.Shared)
    msg = consumer.receive(timeout_millis=5_000)
    assert msg.data() == new
    assert json.loads(msg.properties()[EDIT_LOG])[0]["oldPayloadSha256"] == hashlib.sha256(b"\x00\x01not json").hexdigest()
    consumer.acknowledge(msg)
    consumer.close()


def test_a_background_redrive_task_edits_and_shows_its_edit(broker: BrokerProcess, client: Any) -> None:
    base, topic = broker.admin_url, "edit-task"
    [dead] = _dead_letter(base, client, topic, [BAD])
    edit = {"jsonPatch": [{"op": "remove", "path": "/currency"}]}
    status, task = call(base, "POST", f"{P}/{topic}-S-DLQ/letterbox/redrive", json.dumps(
        {"messageIds": [dead["messageId"]], "edit": edit, "background": True}))
    assert status == 202 and task["edit"]["jsonPatch"] == edit["jsonPatch"], task

    def finished() -> bool:
        return call(base, "GET", f"{P}/{topic}-S-DLQ/letterbox/redrive/{task['taskId']}")[1]["state"] == "finished"

    assert wait_until(finished, 20, 0.05)
    consumer = client.subscribe(T + topic, "S", consumer_type=pulsar.ConsumerType.Shared)
    msg = consumer.receive(timeout_millis=5_000)
    assert json.loads(msg.data()) == {"order": 7, "amount": "12,50"}
    consumer.acknowledge(msg)
    consumer.close()
