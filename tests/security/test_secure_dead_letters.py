"""One full failure-handling run with TLS + token authentication + authorization on:
produce -> nack -> broker-side dead letter -> redrive -> consumed. The worker role
has `consume` only on the namespace: the broker's own DLQ append is done as the
broker, not as the consumer, so it needs no `produce` grant."""
from __future__ import annotations

import ssl
import time
from typing import Any

import pulsar
import pytest

from tests.conftest import _quiet_logger
from tests.security.clients import trusting
from tests.security.conftest import secured_tls_args
from tests.security.http import call
from tests.security.pki import Pki, TokenKeys

DLQ_PROPS = {"letterbox.dlq.max_redeliveries": "2"}


def _admin(base: str, ctx: ssl.SSLContext, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    status, _, reply = call(base, method, path, body, token=token, context=ctx)
    return status, reply


@pytest.mark.slow
def test_nack_dead_letter_redrive_with_tls_and_tokens(
    secure_broker: Any, pki: Pki, broker_cert: Any, token_keys: TokenKeys
) -> None:
    b = secure_broker([*secured_tls_args(broker_cert, pki, token_keys, "admin"), "--advertised-address", "localhost"])
    base = b.admin_tls_url
    ctx = trusting(pki)
    admin_token = token_keys.hs256("admin")
    assert _admin(base, ctx, admin_token, "PUT", "/admin/v2/tenants/acme",
                  {"adminRoles": [], "allowedClusters": ["standalone"]})[0] == 204
    grants = {"auth_policies": {"namespace_auth": {"worker": ["consume"], "app": ["produce"]}}}
    assert _admin(base, ctx, admin_token, "PUT", "/admin/v2/namespaces/acme/orders", grants)[0] == 204

    def client(role: str) -> pulsar.Client:
        return pulsar.Client(b.tls_url, tls_trust_certs_file_path=str(pki.ca),
                             authentication=pulsar.AuthenticationToken(token_keys.hs256(role)),
                             operation_timeout_seconds=10, logger=_quiet_logger())

    topic = "persistent://acme/orders/payments"
    dlq = f"{topic}-work-DLQ"
    dlq_admin = "/admin/v2/persistent/acme/orders/payments-work-DLQ/letterbox"
    app, worker = client("app"), client("worker")
    try:
        consumer = worker.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    properties=DLQ_PROPS, negative_ack_redelivery_delay_ms=50)
        with pytest.raises(pulsar.AuthorizationError):
            worker.create_producer(dlq)  # the worker itself may not write the DLQ
        producer = app.create_producer(topic, batching_enabled=False)
        for body in (b"ok-1", b"poison", b"ok-2"):
            producer.send(body)
        acked: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, listing = _admin(base, ctx, admin_token, "GET", f"{dlq_admin}/deadLetters")
            if status == 200 and listing:
                break
            try:
                msg = consumer.receive(500)
            except pulsar.Timeout:
                continue
            if msg.data() == b"poison":
                consumer.negative_acknowledge(msg)
            else:
                consumer.acknowledge(msg)
                acked.append(msg.data())
        assert status == 200 and [m["payloadText"] for m in listing] == ["poison"], listing
        assert sorted(acked) == [b"ok-1", b"ok-2"]

        status, result = _admin(base, ctx, admin_token, "POST", f"{dlq_admin}/redrive", {})
        assert status == 200 and result["moved"] == 1, result
        msg = consumer.receive(15_000)
        assert msg.data() == b"poison"
        consumer.acknowledge(msg)
    finally:
        app.close()
        worker.close()
    assert "refused connection" not in b.log()
