"""Edit-and-replay needs the `edit` permission besides a redrive's rights: a tenant admin who may
redrive gets 403 for an edit until `edit` is granted; a consume-only role may not redrive at all;
a super user may edit. Nothing moves on a refusal."""
from __future__ import annotations

import json
from typing import Any

from tests.security.conftest import Secured

DLQ = "persistent://ed/ns/orders-S-DLQ"
REDRIVE = "/admin/v2/persistent/ed/ns/orders-S-DLQ/letterbox/redrive"
EDIT = {"edit": {"jsonPatch": [{"op": "replace", "path": "/amount", "value": 1}]}}


def _live(secured: Secured) -> int:
    status, letters = secured.admin("GET", "/admin/v2/persistent/ed/ns/orders-S-DLQ/letterbox/deadLetters")
    assert status == 200, letters
    return len(letters)


def test_edit_needs_the_edit_permission(secured: Secured, role_client: Any) -> None:
    assert secured.admin("PUT", "/admin/v2/tenants/ed", {"adminRoles": ["ed-admin"]})[0] == 204
    assert secured.admin("PUT", "/admin/v2/namespaces/ed/ns")[0] == 204
    assert secured.admin("POST", "/admin/v2/namespaces/ed/ns/permissions/reader", ["consume", "produce"])[0] == 204
    producer = role_client("admin").create_producer(DLQ)
    for _ in range(3):
        producer.send(json.dumps({"amount": "x"}).encode(),
                      properties={"REAL_TOPIC": "persistent://ed/ns/orders", "DEAD_LETTER_REASON": "terminated"})
    producer.close()

    status, reply = secured.admin("POST", REDRIVE, {**EDIT, "dryRun": True}, role="ed-admin")
    assert status == 403 and "edit" in reply["reason"] and "grant-permission" in reply["reason"], reply
    status, reply = secured.admin("POST", REDRIVE, EDIT, role="reader")
    assert status == 403, reply
    assert _live(secured) == 3
    # without an edit the tenant admin redrives; with `edit` granted it edits too
    status, reply = secured.admin("POST", REDRIVE, {"maxMessages": 1}, role="ed-admin")
    assert status == 200 and reply["moved"] == 1, reply
    assert secured.admin("POST", "/admin/v2/namespaces/ed/ns/permissions/ed-admin", ["edit"])[0] == 204
    status, reply = secured.admin("POST", REDRIVE, {**EDIT, "maxMessages": 1}, role="ed-admin")
    assert status == 200 and reply["moved"] == 1, reply
    status, reply = secured.admin("POST", REDRIVE, EDIT)  # the super user
    assert status == 200 and reply["moved"] == 1, reply
    assert _live(secured) == 0
