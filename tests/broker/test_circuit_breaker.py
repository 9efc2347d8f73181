"""Outage detection (the circuit breaker, failure/circuit.py and
broker/redelivery/circuit_breaker.py) through the official client over TCP, on the
broker's manual clock: a handler that fails everything for 2 minutes of broker time
opens the circuit, no message is dead-lettered, probes go out after each cool-down and
the circuit closes once the handler recovers; a real poison message among them is
still dead-lettered, alone."""
from __future__ import annotations

import uuid
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.broker.test_manual_clock import MANUAL, clock_now, sub_stats
from tests.conftest import BrokerProcess

N = 10_000  # the acceptance scenario as written (about 3 s per run)
OUTAGE_MS = 120_000


def circuit(b: BrokerProcess, topic: str, sub: str) -> dict[str, Any]:
    status, body = call(b.admin_url, "GET", "/admin/v2/" + topic.replace("://", "/")
                        + f"/subscription/{sub}/letterbox/circuit")
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def advance(b: BrokerProcess, ms: int) -> int:
    status, body = call(b.admin_url, "POST", f"/admin/v2/letterbox/clock/advance?ms={ms}")
    assert status == 200, body
    return int(body["nowMs"])


def run_outage(b: BrokerProcess, n: int, poison: bool) -> tuple[dict[str, Any], list[bytes], int]:
    client = pulsar.Client(b.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/outage-{uuid.uuid4().hex[:8]}"
        dlq = client.subscribe(topic + "-work-DLQ", "look", initial_position=pulsar.InitialPosition.Earliest)
        consumer = client.subscribe(
            topic, "work", consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=10,
            properties={"letterbox.dlq.max_redeliveries": "3", "letterbox.circuit.enabled": "true"})
        producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        failed_sends: list[object] = []
        for i in range(n):
            producer.send_async(b"poison" if poison and i == n // 2 else b"m%d" % i,
                                lambda res, _mid: failed_sends.append(res) if res != pulsar.Result.Ok else None)
        producer.flush()
        assert not failed_sends
        now = clock_now(b)
        recover_at = now + OUTAGE_MS
        acked: set[bytes] = set()
        healthy = n - (1 if poison else 0)
        idle = 0
        first: str | None = None
        logs_seen = False
        dead: list[bytes] = []
        while len(acked) < healthy or (poison and not dead):
            if len(acked) == healthy:  # only the poison message is left: it must reach the DLQ
                try:
                    dead.append(dlq.receive(10).data())
                    continue
                except pulsar.Timeout:
                    pass
            try:
                msg = consumer.receive(300)
            except pulsar.Timeout:
                idle += 1
                assert idle < 40, (f"stuck: {len(acked)} of {healthy} acked, {circuit(b, topic, 'work')}, "
                                   f"dlq backlog {sub_stats(b, topic + '-work-DLQ', 'look')['msgBacklog']}")
                state = circuit(b, topic, "work")
                if state["state"] == "open":
                    if not logs_seen:  # the trip's row in the attempt log of a message it gave counts back
                        status, log = call(b.admin_url, "GET", "/admin/v2/" + topic.replace("://", "/")
                                           + f"/subscription/work/letterbox/attempts/{first}")
                        assert status == 200 and "circuit-open" in [a["ending"] for a in log["attempts"]], log
                        assert log["redeliveryCount"] == 0  # its pre-outage count
                        logs_seen = True
                    now = advance(b, max(state["probeAt"] - now, 0))
                continue
            idle = 0
            if first is None:
                mid = msg.message_id()
                first = f"{mid.ledger_id()}:{mid.entry_id()}"
            if msg.data() == b"poison" or now < recover_at:
                consumer.negative_acknowledge(msg)
            else:
                consumer.acknowledge(msg)
                acked.add(msg.data())
        while True:
            try:
                dead.append(dlq.receive(300).data())
            except pulsar.Timeout:
                break
        assert logs_seen
        assert sub_stats(b, topic, "work")["msgBacklog"] == 0  # every message acked (or dead-lettered)
        return circuit(b, topic, "work"), dead, recover_at
    finally:
        client.close()


@pytest.fixture(scope="module")
def manual_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = BrokerProcess(tmp_path_factory.mktemp("outage") / "data", args=MANUAL).start()
    yield b
    b.stop()


def test_outage_opens_probes_and_closes_with_nothing_dead_lettered(manual_broker: BrokerProcess) -> None:
    state, dead, recover_at = run_outage(manual_broker, N, poison=False)
    assert dead == []
    assert state["state"] == "closed"
    causes = [h["cause"] for h in state["history"]]
    assert causes[0] == "trip" and causes[-1] == "close", causes
    assert "probe" in causes and "reopen" in causes, causes
    trip = state["history"][0]
    assert trip["at"] < recover_at - OUTAGE_MS + 30_000  # opened within the window
    assert state["history"][-1]["at"] >= recover_at


def test_outage_with_one_poison_message_dead_letters_exactly_it(manual_broker: BrokerProcess) -> None:
    state, dead, _ = run_outage(manual_broker, N, poison=True)
    assert dead == [b"poison"]
    assert state["state"] == "closed"


def test_cli_circuit_get_open_close_and_refusals(manual_broker: BrokerProcess) -> None:
    from tests.cli.helpers import admin, ok

    b = manual_broker
    client = pulsar.Client(b.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/cli-circuit-{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                    properties={"letterbox.circuit.enabled": "true"})
        client.subscribe(topic, "plain", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic)
        assert "state" in ok(admin(b, "circuit", "get", topic, "work"))
        assert "open" in ok(admin(b, "circuit", "open", topic, "work"))
        producer.send(b"held")
        with pytest.raises(pulsar.Timeout):  # open: nothing is dispatched
            consumer.receive(300)
        out = ok(admin(b, "circuit", "close", topic, "work"))
        assert "admin-close" in out
        assert consumer.receive(5000).data() == b"held"
        refused = admin(b, "circuit", "open", topic, "plain")  # no circuit policy: 409, one line
        assert refused.exit_code != 0 and "letterbox.circuit.enabled" in refused.output
        status, body = call(b.admin_url, "POST", "/admin/v2/" + topic.replace("://", "/")
                            + "/subscription/work/letterbox/circuit", '{"state": "half-open"}')
        assert status == 400 and "half-open" in str(body)
        status, text = call(b.admin_url, "GET", "/metrics")
        assert 'letterbox_subscription_circuit_state{' in str(text)
    finally:
        client.close()


def test_namespace_policy_turns_it_on_for_plain_consumers(manual_broker: BrokerProcess) -> None:
    from tests.cli.helpers import admin, ok

    b = manual_broker
    ns = f"public/cb-{uuid.uuid4().hex[:6]}"
    status, body = call(b.admin_url, "PUT", f"/admin/v2/namespaces/{ns}")
    assert status in (200, 204), body
    ok(admin(b, "namespaces", "set-circuit-breaker", ns, "--min-deliveries", "5", "--cooldown-ms", "1000"))
    status, body = call(b.admin_url, "POST", f"/admin/v2/namespaces/{ns}/letterbox/circuitBreaker",
                        '{"failurePercent": 101}')
    assert status in (400, 412) and "failurePercent" in str(body)
    status, body = call(b.admin_url, "POST", f"/admin/v2/namespaces/{ns}/letterbox/circuitBreaker", '{"windo": 5}')
    assert status == 400 and "windo" in str(body)
    client = pulsar.Client(b.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://{ns}/t"
        client.subscribe(topic, "plain", consumer_type=pulsar.ConsumerType.Shared)
        state = circuit(b, topic, "plain")
        assert state["enabled"] and state["policy"]["minDeliveries"] == 5 and state["policy"]["cooldownMs"] == 1000
        ok(admin(b, "namespaces", "remove-policy", ns, "circuit-breaker"))
        assert not circuit(b, topic, "plain")["enabled"]
    finally:
        client.close()


def test_circuit_changes_reach_the_failure_events_topic(manual_broker: BrokerProcess) -> None:
    import json

    b = manual_broker
    ns = f"public/cbev-{uuid.uuid4().hex[:6]}"
    status, body = call(b.admin_url, "PUT", f"/admin/v2/namespaces/{ns}")
    assert status in (200, 204), body
    status, body = call(b.admin_url, "POST", f"/admin/v2/namespaces/{ns}/letterbox/failureEvents", '{"enabled": true}')
    assert status in (200, 204), body
    client = pulsar.Client(b.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://{ns}/t"
        client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                         properties={"letterbox.circuit.enabled": "true"})
        path = "/admin/v2/" + topic.replace("://", "/") + "/subscription/work/letterbox/circuit"
        for state in ("open", "closed"):
            status, body = call(b.admin_url, "POST", path, json.dumps({"state": state}))
            assert status == 200, body
        reader = client.create_reader(f"persistent://{ns}/__letterbox_failure_events", pulsar.MessageId.earliest)
        events = [json.loads(reader.read_next(5000).data()) for _ in range(2)]
        assert [(e["type"], e["state"], e["cause"], e["subscription"]) for e in events] == [
            ("circuit", "open", "admin-open", "work"), ("circuit", "closed", "admin-close", "work")]
    finally:
        client.close()
