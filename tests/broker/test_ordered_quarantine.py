"""Ordered quarantine (issue 14 item 3): `letterbox.dlq.on_key_failure = park` on Failover and
Key_Shared. Keys A, B, C, 100 messages each, A10 always fails: B and C flow on in order, A10..A100
end in the dead letter topic (A10 for max redeliveries, the 90 others parked behind it), and a
redrive of key A delivers A10..A100 in order, each once -- also across a kill -9 in the middle of
the redrive, and with the poisoned key surviving a kill -9 of its own."""
from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.broker.test_broker_dlq import read_topic
from tests.broker.test_consumer_property_errors import _broker_logged
from tests.cli.helpers import dlq, ok
from tests.conftest import BrokerProcess, _quiet_logger, wait_until

KINDS = {"failover": pulsar.ConsumerType.Failover, "key_shared": pulsar.ConsumerType.KeyShared}
TYPES = {**KINDS, "exclusive": pulsar.ConsumerType.Exclusive}
PARK = {"letterbox.dlq.max_redeliveries": "3", "letterbox.dlq.on_key_failure": "park"}
P = "/admin/v2/persistent/public/default/"


def _subscribe(client: pulsar.Client, topic: str, kind: str) -> pulsar.Consumer:
    return client.subscribe(topic, "s", consumer_type=TYPES[kind], properties=PARK,
                            initial_position=pulsar.InitialPosition.Earliest,
                            negative_ack_redelivery_delay_ms=20)


def _produce(client: pulsar.Client, topic: str, first: int = 1, last: int = 100, keys: str = "ABC") -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(first, last + 1):
        for k in keys:
            producer.send(f"{k}{i}".encode(), partition_key=k)
    producer.close()


def _work(consumer: pulsar.Consumer, poison: set[str], idle_ms: int = 3000,
          counted: list[str] | None = None) -> list[str]:
    """The handler: nacks the poison messages, acknowledges the others; the acked bodies in order.
    `counted` collects the other messages that arrived with a redelivery count."""
    acked: list[str] = []
    while True:
        try:
            msg = consumer.receive(idle_ms)
        except pulsar.Timeout:
            return acked
        body = msg.data().decode()
        if counted is not None and body not in poison and msg.redelivery_count():
            counted.append(body)
        if body in poison:
            consumer.negative_acknowledge(msg)
        else:
            consumer.acknowledge(msg)
            acked.append(body)


def _of(key: str, bodies: list[str]) -> list[str]:
    return [b for b in bodies if b.startswith(key)]


def _in_order(bodies: list[str]) -> list[str]:
    """At least once: a message handled again right after itself (the official clients ask
    for every unacknowledged message again on a nack on Failover, and one whose ack was on
    its way comes back) is kept once; any other repeat or overtaking shows."""
    return [b for i, b in enumerate(bodies) if i == 0 or bodies[i - 1] != b]


def _a(first: int, last: int) -> list[str]:
    return [f"A{i}" for i in range(first, last + 1)]


def _check_quarantined(client: pulsar.Client, topic: str, acked: list[str], last_a: int = 100) -> str:
    """B and C whole and in order, A1..A9 only; the DLQ holds A10 (poisoned) then the parked
    rest in order, each naming A10's id. Returns A10's ORIGIN_MESSAGE_ID."""
    for k in "BC":
        assert _in_order(_of(k, acked)) == [f"{k}{i}" for i in range(1, 101)], f"key {k} not whole and in order"
    assert _of("A", acked) == _a(1, 9)
    dead = read_topic(client, f"{topic}-s-DLQ")
    assert [m.data().decode() for m in dead] == _a(10, last_a)
    poisoned = dead[0].properties()
    assert poisoned["DEAD_LETTER_REASON"] == "max-redeliveries"
    assert "PARKED_BEHIND" not in poisoned
    for m in dead[1:]:
        props = m.properties()
        assert props["DEAD_LETTER_REASON"] == "parked-behind"
        assert props["PARKED_BEHIND"] == poisoned["ORIGIN_MESSAGE_ID"]
        assert props["REAL_TOPIC"] == topic and m.partition_key() == "A"
    return poisoned["ORIGIN_MESSAGE_ID"]


def _live_dead_letters(base: str, topic: str) -> int:
    status, body = call(base, "GET", P + f"{topic.rsplit('/', 1)[1]}-s-DLQ/letterbox/deadLetters?limit=1000")
    assert status == 200, body
    return len(body["messages"]) if isinstance(body, dict) else len(body)


def _poisoned_keys(base: str, topic: str) -> Any:
    status, stats = call(base, "GET", P + f"{topic.rsplit('/', 1)[1]}/stats")
    assert status == 200, stats
    return stats["subscriptions"]["s"]["letterboxPoisonedKeys"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_poisoned_key_is_parked_and_redriven_in_order(broker: BrokerProcess, client: pulsar.Client,
                                                      kind: str) -> None:
    topic = f"persistent://public/default/oq-{kind}-{uuid.uuid4().hex[:6]}"
    consumer = _subscribe(client, topic, kind)
    _produce(client, topic)
    counted: list[str] = []
    acked = _work(consumer, {"A10"}, counted=counted)
    poisoned_id = _check_quarantined(client, topic, acked)
    # the official clients answer a nack on Failover with "redeliver all": the other keys'
    # messages given back with it are not counted (or they could be dead-lettered too)
    assert counted == []
    assert poisoned_id.count(":") == 3
    assert _poisoned_keys(broker.admin_url, topic) == {"A": poisoned_id}

    # the handler is fixed; the operator redrives key A (admin API on Failover, CLI on Key_Shared)
    if kind == "failover":
        status, result = call(broker.admin_url, "POST", P + f"{topic.rsplit('/', 1)[1]}-s-DLQ/letterbox/redrive",
                              json.dumps({"key": "A"}))
        assert status == 200 and result["moved"] == 91 and result["remaining"] == 0, result
    else:
        out = ok(dlq(broker, "redrive", f"{topic}-s-DLQ", "--key", "A"))
        assert "Moved 91 messages matching key A" in out and "0 matching messages remain" in out, out
    assert _live_dead_letters(broker.admin_url, topic) == 0
    again = _work(consumer, set())
    assert again == _a(10, 100), "A10..A100 in order, each once, and nothing else"
    # the key is released: a new message of A flows
    _produce(client, topic, 101, 101, "A")
    assert _work(consumer, set(), 2000) == ["A101"]
    assert _poisoned_keys(broker.admin_url, topic) == {}
    consumer.close()


def test_messages_arriving_during_a_redrive_wait_behind_it(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/oq-drain-{uuid.uuid4().hex[:6]}"
    consumer = _subscribe(client, topic, "failover")
    _produce(client, topic)
    _check_quarantined(client, topic, _work(consumer, {"A10"}))
    dlq = P + f"{topic.rsplit('/', 1)[1]}-s-DLQ/letterbox/redrive"
    outcome: list[Any] = []
    runner = threading.Thread(target=lambda: outcome.append(
        call(broker.admin_url, "POST", dlq, json.dumps({"key": "A", "ratePerSecond": 20}))), daemon=True)
    runner.start()
    got: list[str] = []

    def receive_some() -> bool:
        try:
            msg = consumer.receive(200)
        except pulsar.Timeout:
            return len(got) >= 20
        got.append(msg.data().decode())
        consumer.acknowledge(msg)
        return len(got) >= 20

    assert wait_until(receive_some, 30), got
    assert not outcome, "the redrive ended before the new messages were sent; the test proves nothing"
    _produce(client, topic, 101, 102, "A")  # new messages of A while the redrive runs
    runner.join(30)
    assert outcome and outcome[0][0] == 200, outcome
    got += _work(consumer, set())
    assert got == _a(10, 102), "the new messages came after the redriven ones"
    consumer.close()


@pytest.mark.parametrize("kind", list(KINDS))
def test_quarantine_and_redrive_survive_kill_9(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    topic = f"persistent://public/default/oq-kill-{kind}-{uuid.uuid4().hex[:6]}"
    dlq_redrive = P + f"{topic.rsplit('/', 1)[1]}-s-DLQ/letterbox/redrive"
    broker = BrokerProcess(data).start()
    try:
        client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        consumer = _subscribe(client, topic, kind)
        _produce(client, topic)
        acked = _work(consumer, {"A10"})
        try:
            poisoned_id = _check_quarantined(client, topic, acked)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nbroker log:\n{broker.log()[-6000:]}") from None
        client.close()
        broker.kill()  # kill -9: the poisoned key must survive it

        broker = BrokerProcess(data).start()
        client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        consumer = _subscribe(client, topic, kind)
        _produce(client, topic, 101, 101, "AB")
        assert _work(consumer, {"A10"}, 2000) == ["B101"]
        dead = read_topic(client, f"{topic}-s-DLQ")
        assert [m.data().decode() for m in dead] == _a(10, 101)
        assert dead[-1].properties()["DEAD_LETTER_REASON"] == "parked-behind"
        assert dead[-1].properties()["PARKED_BEHIND"] == poisoned_id
        consumer.close()
        client.close()

        # a slow redrive of A (chunks of 20), killed -9 after its first chunks: on Failover a
        # call that is run again after the restart, on Key_Shared a redrive task (background)
        # that the broker resumes by itself
        outcome: list[Any] = []
        task = kind == "key_shared"
        body = {"key": "A", "ratePerSecond": 20, **({"background": True} if task else {})}

        def run(base: str = broker.admin_url) -> None:
            try:
                outcome.append(call(base, "POST", dlq_redrive, json.dumps(body)))
            except OSError as exc:  # the broker dies under the request
                outcome.append((0, str(exc)))

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        assert wait_until(lambda: _live_dead_letters(broker.admin_url, topic) <= 92 - 40, 30)
        broker.kill()
        runner.join(15)
        if task:
            assert outcome and outcome[0][0] in (200, 201, 202), outcome
            task_id = outcome[0][1]["taskId"]
        else:
            assert not (outcome and outcome[0][0] == 200), "the redrive finished before the kill"

        broker = BrokerProcess(data).start()
        left = _live_dead_letters(broker.admin_url, topic)
        assert left <= 52 and (task or left > 0), "the kill did not interrupt the redrive"
        if task:
            def finished(base: str = broker.admin_url) -> bool:
                return bool(call(base, "GET", f"{dlq_redrive}/{task_id}")[1].get("state") == "finished")
            assert wait_until(finished, 30), call(broker.admin_url, "GET", f"{dlq_redrive}/{task_id}")
            assert _live_dead_letters(broker.admin_url, topic) == 0
        else:
            status, result = call(broker.admin_url, "POST", dlq_redrive, json.dumps({"key": "A"}))
            assert status == 200 and result["moved"] == left and result["remaining"] == 0, result
        client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        consumer = _subscribe(client, topic, kind)
        assert _work(consumer, set()) == _a(10, 101), "A10..A101 in order, each once"
        client.close()
    finally:
        broker.stop()


def test_bad_policy_refuses_the_subscribe(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"oq-bad-{uuid.uuid4().hex[:8]}"
    with pytest.raises(pulsar.exceptions.NotAllowedError):
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Failover,
                         properties={"letterbox.dlq.max_redeliveries": "3", "letterbox.dlq.on_key_failure": "hold"})
    _broker_logged(broker, "letterbox.dlq.on_key_failure must be one of continue, park, got 'hold'")
    with pytest.raises(pulsar.exceptions.NotAllowedError):
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                         properties={"letterbox.dlq.max_redeliveries": "3", "letterbox.dlq.on_key_failure": "park"})
    _broker_logged(broker, "on_key_failure=park needs an ordered subscription (Exclusive, Failover or Key_Shared)")
    for t in (pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Failover, pulsar.ConsumerType.KeyShared):
        client.subscribe(topic, f"ok-{t}", consumer_type=t,
                         properties={"letterbox.dlq.max_redeliveries": "3", "letterbox.dlq.on_key_failure": "park"}).close()


def test_namespace_policy_parks_on_ordered_subscriptions_only(broker: BrokerProcess, client: pulsar.Client) -> None:
    ns = f"oqns{uuid.uuid4().hex[:6]}"
    base = broker.admin_url
    policy_path = f"/admin/v2/namespaces/public/{ns}/letterbox/deadLetterPolicy"
    assert call(base, "PUT", f"/admin/v2/namespaces/public/{ns}")[0] == 204
    status, body = call(base, "POST", policy_path, json.dumps({"maxRedeliverCount": 2, "onKeyFailure": "hold"}))
    assert status == 400 and "onKeyFailure must be one of continue, park, got 'hold'" in json.dumps(body)
    assert call(base, "POST", policy_path, json.dumps({"maxRedeliverCount": 2, "onKeyFailure": "park"}))[0] == 204
    assert call(base, "GET", policy_path)[1]["onKeyFailure"] == "park"
    topic = f"persistent://public/{ns}/t"
    failover = client.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover,
                                initial_position=pulsar.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=20)
    shared = client.subscribe(topic, "sh", consumer_type=pulsar.ConsumerType.Shared,
                              initial_position=pulsar.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=20)
    _produce(client, topic, 1, 10, "AB")
    assert _of("A", _work(failover, {"A3"}, 2000)) == _a(1, 2)
    assert sorted(_of("A", _work(shared, {"A3"}, 2000))) == sorted(_a(1, 10)[:2] + _a(4, 10))  # Shared: not parked
    dead_f = [(m.data().decode(), m.properties()["DEAD_LETTER_REASON"]) for m in read_topic(client, f"{topic}-f-DLQ")]
    assert dead_f == [("A3", "max-redeliveries")] + [(a, "parked-behind") for a in _a(4, 10)]
    assert [m.data().decode() for m in read_topic(client, f"{topic}-sh-DLQ")] == ["A3"]



def test_terminate_poisons_its_key_and_a_purge_releases_it(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/oq-term-{uuid.uuid4().hex[:6]}"
    short = topic.rsplit("/", 1)[1]
    base = broker.admin_url
    consumer = _subscribe(client, topic, "exclusive")
    _produce(client, topic, 1, 10, "AB")
    acked: list[str] = []
    while True:
        try:
            msg = consumer.receive(2000)
        except pulsar.Timeout:
            break
        body = msg.data().decode()
        if body == "A3":  # PIP-372 terminate through the broker's move (what letterbox.client does)
            mid = msg.message_id()
            move = {"messageId": f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}",
                    "target": f"{topic}-s-DLQ", "deadLetterReason": "terminated"}
            status, result = call(base, "POST", P + f"{short}/subscription/s/letterbox/move", json.dumps(move))
            assert status == 200 and result["moved"], result
        else:
            consumer.acknowledge(msg)
            acked.append(body)
    assert _of("B", acked) == [f"B{i}" for i in range(1, 11)] and _of("A", acked) == _a(1, 2)
    dead = read_topic(client, f"{topic}-s-DLQ")
    assert [(m.data().decode(), m.properties()["DEAD_LETTER_REASON"]) for m in dead] == \
        [("A3", "terminated")] + [(a, "parked-behind") for a in _a(4, 10)]
    poisoned_id = dead[0].properties()["ORIGIN_MESSAGE_ID"]
    assert _poisoned_keys(base, topic) == {"A": poisoned_id}

    # purging the poisoned message releases the key; its parked messages stay dead letters
    status, result = call(base, "POST", P + f"{short}-s-DLQ/letterbox/purge",
                          json.dumps({"key": "A", "reason": "terminated"}))
    assert status == 200 and result["purged"] == 1, result
    _produce(client, topic, 11, 11, "A")
    assert _work(consumer, set(), 2000) == ["A11"]
    assert _poisoned_keys(base, topic) == {}
    assert _live_dead_letters(base, topic) == 7
    consumer.close()


def test_a_key_does_not_stay_held_after_a_clear_backlog(broker: BrokerProcess, client: pulsar.Client) -> None:
    """Messages waiting behind their key's outstanding one and acknowledged by an admin
    clear-backlog do not hold the key: the next message of the key is delivered."""
    topic = f"persistent://public/default/oq-skip-{uuid.uuid4().hex[:6]}"
    consumer = _subscribe(client, topic, "failover")
    _produce(client, topic, 1, 5, "A")
    first = consumer.receive(5000)  # A1 is out, A2..A5 wait behind it
    assert first.data() == b"A1"
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
    status, _ = call(broker.admin_url, "POST", P + f"{topic.rsplit('/', 1)[1]}/subscription/s/skip_all")
    assert status == 204
    _produce(client, topic, 6, 6, "A")
    assert consumer.receive(5000).data() == b"A6"
    consumer.close()


def test_subscription_only_redrive_of_a_poisoned_key(broker: BrokerProcess, client: pulsar.Client) -> None:
    """A redrive into the quarantined subscription only brings the key back to it, in order;
    another subscription of the topic does not see the messages again."""
    topic = f"persistent://public/default/oq-subonly-{uuid.uuid4().hex[:6]}"
    other = client.subscribe(topic, "other", consumer_type=pulsar.ConsumerType.Failover,
                             initial_position=pulsar.InitialPosition.Earliest)
    consumer = _subscribe(client, topic, "failover")
    _produce(client, topic, 1, 10, "AB")
    assert _of("A", _work(consumer, {"A3"}, 2000)) == _a(1, 2)
    assert len(_work(other, set(), 1000)) == 20
    status, result = call(broker.admin_url, "POST", P + f"{topic.rsplit('/', 1)[1]}-s-DLQ/letterbox/redrive",
                          json.dumps({"key": "A", "subscriptionOnly": True}))
    assert status == 200 and result["moved"] == 8, result
    assert _work(consumer, set(), 2000) == _a(3, 10)
    assert _work(other, set(), 1000) == []
    consumer.close()
    other.close()
