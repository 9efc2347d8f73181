"""One full failure-handling scenario with TLS and token authentication and
authorization on, TLS listeners only: the super user sets up a tenant over
https with the CLI; a worker role (produce + consume on acme/orders) produces
and nacks over pulsar+ssl:// until the broker dead-letters the messages; the
tenant's admin role redrives them with `letterbox dlq redrive` over https; the
worker receives them again with their keys and acknowledges them. The worker
itself may not redrive (403)."""
from __future__ import annotations

import json
import uuid
from typing import Any

import pulsar
from click.testing import CliRunner

from letterbox.cli import main
from tests.conftest import wait_until
from tests.security.conftest import secured_tls_args
from tests.security.pki import Pki, TokenKeys


def test_produce_nack_dlq_redrive_over_tls_with_tokens(
    secure_broker: Any, broker_cert: Any, pki: Pki, token_keys: TokenKeys
) -> None:
    broker = secure_broker(secured_tls_args(broker_cert, pki, token_keys, "root"))
    admin_url = broker.admin_tls_url
    ca = str(pki.ca)

    def cli(role: str, *args: str) -> Any:
        return CliRunner().invoke(main, [args[0], "--admin-url", admin_url, "--auth-token",
                                         token_keys.hs256(role), "--tls-trust-certs", ca, *args[1:]])

    for args in (("admin", "tenants", "create", "acme", "--admin-roles", "ops"),
                 ("admin", "namespaces", "create", "acme/orders"),
                 ("admin", "namespaces", "grant-permission", "acme/orders", "--role", "worker",
                  "--actions", "produce,consume")):
        r = cli("root", *args)
        assert r.exit_code == 0, r.output

    topic = f"persistent://acme/orders/e2e-{uuid.uuid4().hex[:6]}"
    client = pulsar.Client(broker.tls_url, tls_trust_certs_file_path=ca,
                           authentication=pulsar.AuthenticationToken(token_keys.hs256("worker")),
                           operation_timeout_seconds=10)
    try:
        consumer = client.subscribe(topic, "billing", consumer_type=pulsar.ConsumerType.Shared,
                                    negative_ack_redelivery_delay_ms=100,
                                    properties={"letterbox.dlq.max_redeliveries": "1"})
        producer = client.create_producer(topic)
        sent = {f"k{i}": f"order {i}".encode() for i in range(3)}
        for key, data in sent.items():
            producer.send(data, partition_key=key)
        deliveries = 0
        while deliveries < 2 * len(sent):  # first delivery + one redelivery each, all nacked
            consumer.negative_acknowledge(consumer.receive(15_000))
            deliveries += 1
        dlq = f"{topic}-billing-DLQ"

        def dead_letters() -> int:
            r = cli("ops", "dlq", "--output", "json", "redrive", dlq, "--dry-run")
            if r.exit_code == 1 and "HTTP 404" in r.output:  # the DLQ is made by the first move
                return 0
            assert r.exit_code == 0, r.output
            return int(json.loads(r.output)["matched"])

        assert wait_until(lambda: dead_letters() == len(sent), timeout=30)
        r = cli("worker", "dlq", "redrive", dlq)
        assert r.exit_code == 1 and "HTTP 403" in r.output and "tenant acme" in r.output
        r = cli("ops", "dlq", "redrive", dlq)
        assert r.exit_code == 0, r.output
        back = {}
        for _ in sent:
            msg = consumer.receive(15_000)
            back[msg.partition_key()] = msg.data()
            consumer.acknowledge(msg)
        assert back == sent
        assert dead_letters() == 0
    finally:
        client.close()
