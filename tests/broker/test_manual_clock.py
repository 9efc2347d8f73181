"""The broker's manual clock (letterbox/clock.py, `--clock manual --allow-test-clock`):
backoff, delayed delivery, dead-letter stamps and the namespace TTL follow it, so hours
of broker time pass in a test by POST /admin/v2/letterbox/clock/advance."""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, wait_until

MIN = 60_000
HOUR = 60 * MIN
MULTIPLIER = 2.8  # 1 min, 2.8 min, 7.8 min, 22 min, then the 1 h cap
MANUAL = ["--clock", "manual", "--allow-test-clock"]


def clock_state(b: BrokerProcess) -> dict[str, Any]:
    status, body = call(b.admin_url, "GET", "/admin/v2/letterbox/clock")
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def clock_now(b: BrokerProcess) -> int:
    return int(clock_state(b)["nowMs"])


def advance_to(b: BrokerProcess, target_ms: int) -> dict[str, Any]:
    ms = target_ms - clock_now(b)
    assert ms >= 0
    status, body = call(b.admin_url, "POST", f"/admin/v2/letterbox/clock/advance?ms={ms}")
    assert status == 200, body
    assert body["nowMs"] == target_ms
    return body  # type: ignore[no-any-return]


def sub_stats(b: BrokerProcess, topic: str, sub: str) -> dict[str, Any]:
    status, body = call(b.admin_url, "GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")
    assert status == 200, body
    return body["subscriptions"][sub]  # type: ignore[no-any-return]


def nothing_within(consumer: pulsar.Consumer, ms: int = 150) -> bool:
    try:
        msg = consumer.receive(ms)
    except pulsar.Timeout:
        return True
    raise AssertionError(f"received {msg.data()!r} (redelivery {msg.redelivery_count()}) too early")


def test_backoff_1min_to_1h_over_5_retries_and_2h_ttl_by_advancing_the_clock(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=MANUAL).start()
    client = pulsar.Client(b.url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/clock-{uuid.uuid4().hex[:8]}"
        status, body = call(b.admin_url, "POST", "/admin/v2/namespaces/public/default/messageTTL", "7200")
        assert status == 204, body
        # "idle" never consumes: the 2 h TTL is what empties it (no dead-letter policy: acked)
        client.subscribe(topic, "idle", consumer_type=pulsar.ConsumerType.Shared,
                         initial_position=pulsar.InitialPosition.Earliest).close()
        consumer = client.subscribe(
            topic, "work", consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=50,
            properties={"letterbox.backoff.min_ms": str(MIN), "letterbox.backoff.max_ms": str(HOUR),
                        "letterbox.backoff.multiplier": repr(MULTIPLIER), "letterbox.dlq.max_redeliveries": "5"})
        t0 = clock_now(b)
        producer = client.create_producer(topic)
        producer.send(b"good")
        producer.send(b"poison")
        producer.send(b"delayed", deliver_at=t0 + 2 * MIN)  # delayed delivery on the broker's clock
        wall_start = time.monotonic()

        got = {}
        for _ in range(2):
            msg = consumer.receive(10_000)
            got[msg.data()] = msg
        assert set(got) == {b"good", b"poison"}
        assert got[b"poison"].redelivery_count() == 0
        consumer.acknowledge(got[b"good"])
        published = max(m.publish_timestamp() for m in got.values())
        consumer.negative_acknowledge(got[b"poison"])

        delays = [int(min(MIN * MULTIPLIER ** n, HOUR)) for n in range(5)]
        assert delays[0] == MIN and delays[-1] == HOUR
        delivered_at = t0  # the poison's last delivery, on the broker's clock
        delayed_seen = False
        for retry, delay in enumerate(delays, start=1):
            # the nack has reached the broker: the poison is held (with "delayed" until it is due)
            held = 1 if delayed_seen else 2
            assert wait_until(lambda: sub_stats(b, topic, "work")["msgDelayed"] == held)  # noqa: B023
            due = delivered_at + delay
            if not delayed_seen and t0 + 2 * MIN <= due:
                # an advance answers after the timers due on the way fired: one millisecond
                # early, both messages are still held
                advance_to(b, t0 + 2 * MIN - 1)
                assert sub_stats(b, topic, "work")["msgDelayed"] == 2
                advance_to(b, t0 + 2 * MIN)
                msg = consumer.receive(10_000)
                assert msg.data() == b"delayed" and msg.redelivery_count() == 0
                consumer.acknowledge(msg)
                delayed_seen = True
                held = 1
            advance_to(b, due - 1)
            assert sub_stats(b, topic, "work")["msgDelayed"] == held, \
                f"retry {retry} was released before its {delay} ms backoff"
            advance_to(b, due)
            msg = consumer.receive(10_000)
            assert msg.data() == b"poison"
            assert msg.redelivery_count() == retry
            delivered_at = due
            consumer.negative_acknowledge(msg)
        assert delayed_seen

        # the 6th failure is one more than 5 redeliveries: dead-lettered, stamped on the clock
        dlq = client.subscribe(topic + "-work-DLQ", "check", initial_position=pulsar.InitialPosition.Earliest)
        dead = dlq.receive(10_000)
        props = dead.properties()
        assert dead.data() == b"poison"
        assert props["DEAD_LETTER_REASON"] == "max-redeliveries"
        assert props["DELIVERY_COUNT"] == "6"
        assert int(props["FIRST_DELIVERY_TIME"]) == t0
        assert int(props["LAST_DELIVERY_TIME"]) == delivered_at
        assert int(props["DEAD_LETTER_TIME"]) == delivered_at == clock_now(b)
        assert delivered_at - t0 == sum(delays)  # 1 min -> 1 h over 5 retries: ~93 min of broker time
        assert wait_until(lambda: sub_stats(b, topic, "work")["msgBacklog"] == 0)
        assert nothing_within(consumer)

        # TTL: nothing expires before 2 h after publication, everything right after
        assert sub_stats(b, topic, "idle")["msgBacklog"] == 3
        advance_to(b, published + 2 * HOUR - 1000)
        assert wait_until(lambda: clock_state(b)["ttlCheckedAtMs"] == published + 2 * HOUR - 1000)
        assert sub_stats(b, topic, "idle")["msgBacklog"] == 3
        advance_to(b, published + 2 * HOUR + 1000)
        assert wait_until(lambda: sub_stats(b, topic, "idle")["msgBacklog"] == 0)
        wall = time.monotonic() - wall_start
        # hours of broker time; the wall clock only shows it did not really wait
        assert wall < 60, f"took {wall:.1f} s of wall time"
        print(f"manual clock: {(clock_now(b) - t0) / HOUR:.2f} h of broker time in {wall:.2f} s of wall time")
        dlq.close()
        consumer.close()
        producer.close()
    finally:
        client.close()
        code = b.stop()
    assert code == 0, b.log()


def test_manual_clock_is_refused_without_allow_test_clock(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=["--clock", "manual"]).start(expect_ready=False)
    assert b.exited.wait(30)
    assert b.proc is not None and b.proc.wait(10) == 2
    assert "--allow-test-clock" in b.log()
    assert "for tests only" in b.log()
    assert not b.ports


@pytest.mark.parametrize("env", [{"LETTERBOX_CLOCK": "manual"}, {"LETTERBOX_CLOCK": "sundial"}])
def test_clock_settings_from_the_environment_are_validated(tmp_path: Path, env: dict[str, str]) -> None:
    b = BrokerProcess(tmp_path / "data", env=env).start(expect_ready=False)
    assert b.exited.wait(30)
    assert b.proc is not None and b.proc.wait(10) == 2
    assert ("--allow-test-clock" if env["LETTERBOX_CLOCK"] == "manual" else "clock must be one of real, manual") \
        in b.log()


def test_advance_errors(tmp_path: Path, broker_factory: Any) -> None:
    real = broker_factory(tmp_path / "real")
    status, body = call(real.admin_url, "POST", "/admin/v2/letterbox/clock/advance?ms=1000")
    assert status == 409 and "--clock manual --allow-test-clock" in body["reason"]
    status, body = call(real.admin_url, "GET", "/admin/v2/letterbox/clock")
    assert status == 200 and body["clock"] == "real"
    assert abs(body["nowMs"] - time.time() * 1000) < 60_000

    manual = broker_factory(tmp_path / "manual", env={"LETTERBOX_CLOCK": "manual",
                                                        "LETTERBOX_ALLOW_TEST_CLOCK": "true"})
    assert "manual clock" in manual.startup_line
    before = clock_now(manual)
    for query, needle in [("", "is required"), ("?ms=abc", "whole number"), ("?ms=1.5", "whole number"),
                          ("?ms=-5", "only moves"), ("?ms=99999999999999999", "at most ten years")]:
        status, body = call(manual.admin_url, "POST", "/admin/v2/letterbox/clock/advance" + query)
        assert status == 400 and needle in body["reason"], (query, body)
    assert clock_now(manual) == before, "a refused advance must not move the clock"
    status, body = call(manual.admin_url, "POST", "/admin/v2/letterbox/clock/advance?ms=2500")
    assert status == 200 and body["nowMs"] == before + 2500 and body["advancedMs"] == 2500
    time.sleep(0.2)
    assert clock_now(manual) == before + 2500, "a manual clock does not move on its own"

    # the same through the CLI
    from tests.cli.helpers import admin, ok, ok_json

    state = ok_json(admin(manual, "-o", "json", "clock", "advance", "90s"))
    assert state["nowMs"] == before + 2500 + 90_000 and state["advancedMs"] == 90_000
    assert ok_json(admin(manual, "-o", "json", "clock", "get"))["nowMs"] == before + 92_500
    assert "clock:" in ok(admin(manual, "clock", "get")) and "manual" in ok(admin(manual, "clock", "get"))
    bad = admin(manual, "clock", "advance", "soon")
    assert bad.exit_code == 2 and "not a duration" in bad.output + bad.stderr
    refused = admin(real, "clock", "advance", "1m")
    assert refused.exit_code != 0 and "--clock manual --allow-test-clock" in refused.output + refused.stderr


def test_a_rate_limited_redrive_pauses_on_the_broker_clock(tmp_path: Path) -> None:
    import threading

    b = BrokerProcess(tmp_path / "data", args=MANUAL).start()
    client = pulsar.Client(b.url, operation_timeout_seconds=10)
    try:
        name = uuid.uuid4().hex[:8]
        dlq_local, target = f"rr-{name}-s-DLQ", f"persistent://public/default/rr-{name}-restored"
        producer = client.create_producer(f"persistent://public/default/{dlq_local}", batching_enabled=False)
        for i in range(3):
            producer.send(f"dead {i}".encode())
        outcome: list[tuple[int, Any]] = []
        body = json.dumps({"target": target, "ratePerSecond": 1})
        runner = threading.Thread(target=lambda: outcome.append(call(
            b.admin_url, "POST", f"/admin/v2/persistent/public/default/{dlq_local}/letterbox/redrive", body)))
        runner.start()

        def moved() -> int:
            status, stats = call(b.admin_url, "GET", "/admin/v2/" + target.replace("://", "/") + "/internalStats")
            return int(stats["numberOfEntries"]) if status == 200 else 0

        assert wait_until(lambda: moved() == 1)
        for expected in (2, 3):
            time.sleep(0.3)  # a redrive pacing itself on the wall clock would move on now
            assert moved() == expected - 1, "the redrive did not wait for the broker's clock"
            call(b.admin_url, "POST", "/admin/v2/letterbox/clock/advance?ms=1000")
            assert wait_until(lambda: moved() == expected)  # noqa: B023
        # paced at 1/s, the redrive looks for a 4th message after one more second of clock
        call(b.admin_url, "POST", "/admin/v2/letterbox/clock/advance?ms=1000")
        runner.join(20)
        assert outcome and outcome[0][0] == 200 and outcome[0][1]["moved"] == 3, outcome
        producer.close()
    finally:
        client.close()
        code = b.stop()
    assert code == 0, b.log()
