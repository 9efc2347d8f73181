"""Issue 11's authorization acceptance, through the official pulsar-client on a
broker with token authentication and authorization on: role A with produce only
on acme/orders produces there and cannot subscribe; role B with consume
subscribes and cannot produce; neither touches acme/other; the super user does
everything; a broker-side dead-letter move and a RetryConsumer retry work for a
role with consume only on the source namespace."""
from __future__ import annotations

import uuid
from typing import Any

import pulsar
import pytest

from letterbox.client import BrokerMoveError, DeadLetterPolicy, RetryConsumer
from tests.conftest import wait_until
from tests.security.conftest import SUPER_USER, Secured

ORDERS = "persistent://acme/orders/"
OTHER = "persistent://acme/other/"


@pytest.fixture(scope="module")
def acme(secured: Secured) -> Secured:
    assert secured.admin("PUT", "/admin/v2/tenants/acme", {"adminRoles": []})[0] == 204
    body = {"auth_policies": {"namespace_auth": {"A": ["produce"], "B": ["consume"]}}}
    assert secured.admin("PUT", "/admin/v2/namespaces/acme/orders", body)[0] == 204
    assert secured.admin("PUT", "/admin/v2/namespaces/acme/other")[0] == 204
    return secured


@pytest.fixture
def clients(acme: Secured, role_client: Any) -> Any:
    return role_client


def _topic(ns: str) -> str:
    return ns + "t-" + uuid.uuid4().hex[:8]


def test_produce_only_role(clients: Any) -> None:
    a = clients("A")
    topic = _topic(ORDERS)
    a.create_producer(topic).send(b"from A")
    with pytest.raises(pulsar.exceptions.AuthorizationError):
        a.subscribe(topic, "sub-a")
    with pytest.raises(pulsar.exceptions.AuthorizationError):
        a.create_producer(_topic(OTHER))


def test_consume_only_role(clients: Any) -> None:
    topic = _topic(ORDERS)
    b = clients("B")
    consumer = b.subscribe(topic, "sub-b")
    clients("A").create_producer(topic).send(b"for B")
    msg = consumer.receive(10_000)
    assert msg.data() == b"for B"
    consumer.acknowledge(msg)
    with pytest.raises(pulsar.exceptions.AuthorizationError):
        b.create_producer(topic)
    with pytest.raises(pulsar.exceptions.AuthorizationError):
        b.subscribe(_topic(OTHER), "sub-b")


def test_super_user_does_everything(clients: Any) -> None:
    admin = clients(SUPER_USER)
    for ns in (ORDERS, OTHER):
        topic = _topic(ns)
        consumer = admin.subscribe(topic, "s")
        admin.create_producer(topic).send(b"root")
        assert consumer.receive(10_000).data() == b"root"


def test_unknown_role_and_missing_token_are_refused(acme: Secured) -> None:
    stranger = pulsar.Client(acme.broker.url, authentication=pulsar.AuthenticationToken(acme.token("C")),
                             operation_timeout_seconds=5)
    anonymous = pulsar.Client(acme.broker.url, operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.exceptions.AuthorizationError):
            stranger.create_producer(_topic(ORDERS))
        with pytest.raises((pulsar.exceptions.AuthenticationError, pulsar.exceptions.ConnectError)):
            anonymous.create_producer(_topic(ORDERS))
    finally:
        stranger.close()
        anonymous.close()


def test_broker_dead_letter_move_for_a_consume_only_role(acme: Secured, clients: Any) -> None:
    topic = _topic(ORDERS)
    b = clients("B")
    consumer = b.subscribe(topic, "dlq-sub", consumer_type=pulsar.ConsumerType.Shared,
                           negative_ack_redelivery_delay_ms=100,
                           properties={"letterbox.dlq.max_redeliveries": "1"})
    clients("A").create_producer(topic).send(b"poison")
    for _ in range(2):  # delivered, nacked, redelivered once, nacked: then the broker dead-letters it
        msg = consumer.receive(10_000)
        consumer.negative_acknowledge(msg)
    dlq = f"{topic}-dlq-sub-DLQ"
    path = "/admin/v2/" + dlq.replace("://", "/") + "/letterbox/deadLetters"

    def dead() -> list[Any]:
        status, body = acme.admin("GET", path)
        return body if status == 200 and isinstance(body, list) else []

    assert wait_until(lambda: len(dead()) == 1, timeout=20), acme.admin("GET", path)
    # and the consume-only role can read the dead letter topic of its namespace
    reader = b.subscribe(dlq, "inspect", initial_position=pulsar.InitialPosition.Earliest)
    assert reader.receive(10_000).data() == b"poison"


def test_retry_consumer_for_a_consume_only_role(acme: Secured, clients: Any) -> None:
    topic = _topic(ORDERS)
    token = acme.token("B")
    b = clients("B")
    consumer = RetryConsumer(b, topic, "retry-sub", admin_url=acme.broker.admin_url, auth_token=token,
                             dead_letter_policy=DeadLetterPolicy(max_redeliver_count=3))
    try:
        clients("A").create_producer(topic).send(b"retry me")
        first = consumer.receive(10_000)
        consumer.reconsume_later(first, 1)
        again = consumer.receive(20_000)
        assert again.data() == b"retry me"
        assert again.properties().get("RECONSUMETIMES") == "1"
        consumer.terminate(again, "bad order")
        dlq = f"{topic}-retry-sub-DLQ"
        reader = b.subscribe(dlq, "inspect", initial_position=pulsar.InitialPosition.Earliest)
        assert reader.receive(10_000).data() == b"retry me"
    finally:
        consumer.close()
    # without the token the move is refused with 401, the message stays
    refused = RetryConsumer(b, topic, "retry-sub-2", admin_url=acme.broker.admin_url,
                            negative_ack_redelivery_delay_ms=100)
    try:
        clients("A").create_producer(topic).send(b"no token")
        msg = refused.receive(10_000)
        with pytest.raises(BrokerMoveError, match="HTTP 401"):
            refused.reconsume_later(msg, 1)
        refused.negative_acknowledge(msg)
        assert refused.receive(10_000).data() == b"no token"  # not moved: still in the subscription
    finally:
        refused.close()
