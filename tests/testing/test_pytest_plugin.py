"""The pytest plugin as a user meets it: pytest's own pytester writes a user's test file into
an empty directory and runs pytest on it in a child process, where the plugin comes from
the installed package's pytest11 entry point (nothing is copied)."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

DEAD_LETTERED = '''
from datetime import timedelta
import pulsar

def test_dead_lettered_after_3_retries_10_minutes_apart(letterbox_client, letterbox_topic, letterbox_clock):
    consumer = letterbox_client.subscribe(letterbox_topic, "billing", consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=10, properties={"letterbox.backoff.min_ms": "600000",
        "letterbox.backoff.max_ms": "600000", "letterbox.dlq.max_redeliveries": "3"})
    letterbox_client.create_producer(letterbox_topic).send(b"poison")
    for attempt in range(4):
        msg = consumer.receive(5000)
        assert msg.redelivery_count() == attempt
        consumer.negative_acknowledge(msg)
        letterbox_clock.advance(timedelta(minutes=10))
    dlq = letterbox_client.subscribe(letterbox_topic + "-billing-DLQ", "inspect",
                                     initial_position=pulsar.InitialPosition.Earliest)
    dead = dlq.receive(5000).properties()
    assert dead["DEAD_LETTER_REASON"] == "max-redeliveries"
    assert int(dead["LAST_DELIVERY_TIME"]) - int(dead["FIRST_DELIVERY_TIME"]) == 30 * 60_000
'''


def test_fixtures_are_listed(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--fixtures")
    for name in ("letterbox_broker", "letterbox_clock", "letterbox_topic", "letterbox_client"):
        result.stdout.fnmatch_lines([f"{name}*"])


@pytest.mark.parametrize("mode", ["embedded", "process"])
def test_dead_lettered_after_three_retries_on_the_manual_clock(pytester: pytest.Pytester, mode: str) -> None:
    pytester.makepyfile(test_poison=DEAD_LETTERED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--letterbox-mode={mode}")
    result.assert_outcomes(passed=1)


def test_the_plugin_costs_a_run_without_the_broker_no_broker_import(pytester: pytest.Pytester) -> None:
    """pytest loads the plugin in every run of a project that has letterbox installed."""
    pytester.makepyfile(test_plain='''
import sys

def test_plain():
    assert "letterbox.testing.pytest_plugin" in sys.modules
    assert [m for m in ("letterbox.broker", "letterbox.testing.broker", "aiohttp") if m in sys.modules] == []
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_clock_and_a_client_need_no_admin_server(pytester: pytest.Pytester) -> None:
    """The embedded session broker starts without its admin server (and aiohttp) and, with
    no token authentication, without PyJWT: a test of the clock and a client does not pay
    for them; the start-up objects are frozen out of the
    collector. Asking for admin_url starts it. pytest rewrites the asserts of the plugin's
    package only, not of the whole letterbox distribution."""
    pytester.makepyfile(test_lean='''
import gc
import sys
from datetime import timedelta

def test_lean(letterbox_broker, letterbox_client, letterbox_topic, letterbox_clock):
    letterbox_client.create_producer(letterbox_topic).send(b"x")
    before = letterbox_clock.now()
    assert letterbox_clock.advance(timedelta(minutes=10)) - before == timedelta(minutes=10)
    assert [m for m in ("aiohttp", "jwt") if m in sys.modules] == []  # no admin server, no tokens
    assert "admin on http" not in letterbox_broker.log()
    assert gc.get_freeze_count() > 0

def test_admin_on_first_use(letterbox_broker, letterbox_clock):
    assert letterbox_broker.admin("GET", "/admin/v2/letterbox/clock")["nowMs"] == letterbox_clock.now_ms()
    assert f"admin on http://127.0.0.1:{letterbox_broker.admin_port} (started on first use)" in letterbox_broker.log()

def test_only_the_plugin_is_assertion_rewritten(letterbox_broker):
    def loader(module):
        return type(sys.modules[module].__loader__).__name__
    assert loader("letterbox.testing.broker") == "AssertionRewritingHook"
    assert loader("letterbox.broker.service") != "AssertionRewritingHook"
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_the_retries_wait_for_the_clock(pytester: pytest.Pytester) -> None:
    """Without the advances the message is not redelivered: the user's test fails on the
    first receive after the nack, and the report carries the broker's log."""
    pytester.makepyfile(test_poison=DEAD_LETTERED.replace(
        "letterbox_clock.advance(timedelta(minutes=10))", "letterbox_clock.advance(timedelta(minutes=9))"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*- letterbox broker log -*", "*INFO letterbox: letterbox (embedded) listening on*"])


def test_passing_tests_get_no_log_and_each_topic_is_new(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_topics='''
import pytest
seen = []

@pytest.mark.parametrize("n", range(3))
def test_topic(letterbox_topic, letterbox_client, n):
    assert letterbox_topic not in seen
    seen.append(letterbox_topic)
    producer = letterbox_client.create_producer(letterbox_topic)
    producer.send(b"x")
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=3)
    assert "letterbox broker log" not in result.stdout.str()


def test_token_authentication(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_auth='''
import pulsar
import pytest
from letterbox.testing import AdminCallError

def test_only_the_token_gets_in(letterbox_broker, letterbox_client, letterbox_topic):
    letterbox_client.create_producer(letterbox_topic).send(b"x")
    stranger = pulsar.Client(letterbox_broker.url, operation_timeout_seconds=3)
    with pytest.raises(pulsar.PulsarException):
        stranger.create_producer(letterbox_topic)
    stranger.close()
    assert letterbox_broker.admin("GET", "/admin/v2/tenants") == ["public"]
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--letterbox-auth=token")
    result.assert_outcomes(passed=1)


def test_pulsar_compatible_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_compat='''
import pytest
from letterbox.testing import AdminCallError

def test_extensions_are_off(letterbox_broker):
    with pytest.raises(AdminCallError) as info:
        letterbox_broker.admin("GET", "/admin/v2/letterbox/clock")
    assert info.value.status == 404

def test_no_clock(letterbox_clock):
    pass
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--letterbox-pulsar-compatible-only")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*letterbox_clock needs the manual clock*"])


def test_ini_settings_and_bad_values(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nletterbox_clock = sundial\n")
    pytester.makepyfile(test_x="def test_x(letterbox_broker):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*letterbox_clock = 'sundial': use one of real, manual*"])
