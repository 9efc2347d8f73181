"""Writes the broker makes on a client's behalf are authorized as that client:
a dead letter topic named by consumer properties or by a namespace's
dead-letter policy, and the topics a redrive appends to (its target, or each
message's REAL_TOPIC, a property any producer on the DLQ may set). Tenant
create/update/delete are super-user calls, as in Pulsar. Each test was seen
failing before its fix (the write went through)."""
from __future__ import annotations

import threading
import time
from typing import Any

import pulsar
import pytest

from tests.security.conftest import Secured

DLQ = "persistent://acme/orders/t-s-DLQ"
VICTIM = "persistent://bank/pay/victim"


@pytest.fixture(scope="module")
def tenants(secured: Secured) -> Secured:
    for tenant, ns in (("acme", "orders"), ("bank", "pay")):
        assert secured.admin("PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [f"{tenant}-admin"]})[0] == 204
        assert secured.admin("PUT", f"/admin/v2/namespaces/{tenant}/{ns}")[0] == 204
    assert secured.admin("POST", "/admin/v2/namespaces/acme/orders/permissions/app", ["consume"])[0] == 204
    return secured


@pytest.fixture
def client_as(tenants: Secured, role_client: Any) -> Any:
    return role_client


def _dlq_properties(topic: str) -> dict[str, str]:
    return {"letterbox.dlq.max_redeliveries": "1", "letterbox.dlq.topic": topic}


def test_consumer_properties_cannot_name_a_dead_letter_topic_the_role_may_not_write(client_as: Any) -> None:
    app = client_as("app")
    with pytest.raises(pulsar.exceptions.AuthorizationError):
        app.subscribe("persistent://acme/orders/t", "s", properties=_dlq_properties(VICTIM))
    # the subscription's own dead letter topic stays free for a consume-only role
    own = app.subscribe("persistent://acme/orders/t", "s", properties=_dlq_properties(DLQ))
    own.close()


def test_namespace_dead_letter_policy_cannot_point_into_another_tenant(tenants: Secured) -> None:
    path = "/admin/v2/namespaces/acme/orders/letterbox/deadLetterPolicy"
    status, reply = tenants.admin("POST", path, {"maxRedeliverCount": 1, "deadLetterTopic": VICTIM},
                                  role="acme-admin")
    assert status == 403 and VICTIM in reply["reason"], reply
    assert tenants.admin("GET", path)[0] == 204  # nothing stored
    status, _ = tenants.admin("POST", path, {"maxRedeliverCount": 1,
                                             "deadLetterTopic": "persistent://acme/orders/dead"}, role="acme-admin")
    assert status == 204
    assert tenants.admin("DELETE", path)[0] == 204


def test_redrive_needs_produce_on_every_topic_it_writes(tenants: Secured, client_as: Any) -> None:
    producer = client_as("admin").create_producer(DLQ)
    producer.send(b"planted", properties={"REAL_TOPIC": VICTIM, "DEAD_LETTER_REASON": "test"})
    producer.close()
    redrive = "/admin/v2/persistent/acme/orders/t-s-DLQ/letterbox/redrive"
    status, reply = tenants.admin("POST", redrive, {}, role="acme-admin")
    assert status == 403 and VICTIM in reply["reason"], reply
    status, reply = tenants.admin("POST", redrive, {"target": VICTIM}, role="acme-admin")
    assert status == 403 and VICTIM in reply["reason"], reply
    assert tenants.admin("GET", "/admin/v2/persistent/bank/pay/victim/stats")[0] == 404  # nothing written
    # into its own tenant the tenant admin redrives; the super user may redrive anywhere
    status, reply = tenants.admin("POST", redrive, {"target": "persistent://acme/orders/t", "dryRun": True},
                                  role="acme-admin")
    assert status == 200 and reply["matched"] == 1, reply
    status, reply = tenants.admin("POST", redrive, {})
    assert status == 200 and reply["moved"] == 1, reply


def test_tenants_are_created_changed_and_deleted_by_super_users_only(tenants: Secured) -> None:
    status, reply = tenants.admin("POST", "/admin/v2/tenants/acme", {"adminRoles": ["acme-admin", "friend"]},
                                  role="acme-admin")
    assert status == 403 and "super user" in reply["reason"], reply
    status, reply = tenants.admin("DELETE", "/admin/v2/tenants/bank", role="bank-admin")
    assert status == 403 and "super user" in reply["reason"], reply
    assert tenants.admin("GET", "/admin/v2/tenants/acme", role="acme-admin") == (200, {
        "adminRoles": ["acme-admin"], "allowedClusters": tenants.admin("GET", "/admin/v2/tenants/acme")[1][
            "allowedClusters"]})


def test_redrive_rechecks_each_message_it_moves(tenants: Secured, client_as: Any) -> None:
    """A message planted in the DLQ while a slow redrive runs, naming a REAL_TOPIC the
    caller may not write, stays in the DLQ; the allowed ones move."""
    dlq, own = "persistent://acme/orders/r-s-DLQ", "persistent://acme/orders/r"
    victim = "persistent://bank/pay/victim-during-redrive"
    producer = client_as("admin").create_producer(dlq)
    for i in range(3):
        producer.send(b"ok-%d" % i, properties={"REAL_TOPIC": own, "DEAD_LETTER_REASON": "test"})
    path = "/admin/v2/persistent/acme/orders/r-s-DLQ/letterbox/redrive"
    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.update(
        reply=tenants.admin("POST", path, {"ratePerSecond": 1}, role="acme-admin")))
    worker.start()
    deadline = time.monotonic() + 10
    while tenants.admin("POST", path, {"dryRun": True}, role="acme-admin")[0] != 409:  # running
        assert time.monotonic() < deadline and worker.is_alive(), "the redrive never ran"
        time.sleep(0.02)
    producer.send(b"planted", properties={"REAL_TOPIC": victim, "DEAD_LETTER_REASON": "test"})
    producer.close()
    worker.join(30)
    status, reply = result["reply"]
    assert status == 200 and reply["moved"] == 3 and reply["remaining"] == 0, reply
    assert tenants.admin("GET", "/admin/v2/persistent/bank/pay/victim-during-redrive/stats")[0] == 404  # nothing written
    status, reply = tenants.admin("POST", path, {"dryRun": True})  # the super user sees it left behind
    assert status == 200 and reply["matched"] == 1, reply
