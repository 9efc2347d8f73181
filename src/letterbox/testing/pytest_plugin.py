# The pytest plugin (entry point `letterbox` in the pytest11 group): fixtures
# over one session-wide letterbox.testing.Broker.
#   letterbox_broker  the broker (started on first use, stopped at session end)
#   letterbox_clock   its manual clock: advance(timedelta), now()
#   letterbox_topic   a topic name no other test uses
#   letterbox_client  a pulsar.Client for the broker, closed after the test
# Options (command line, or the ini key in brackets): --letterbox-clock
# manual|real [letterbox_clock], --letterbox-auth none|token [letterbox_auth],
# --letterbox-pulsar-compatible-only [letterbox_pulsar_compatible_only],
# --letterbox-mode embedded|process [letterbox_mode]. A failing test that used
# the broker gets the broker's log lines from its run as a report section.
# pytest imports this module in every run of a project that has letterbox
# installed, so it imports no broker code: Broker is imported by the first
# fixture that starts one. Once the session's broker is up, what exists is
# frozen out of the garbage collector (it lives until the process ends anyway),
# so pytest's closing collections and the interpreter's exit do not walk it.
# pytest marks every top-level package of a plugin's distribution for assertion
# rewriting, here all of letterbox; this module narrows the mark to the plugin's
# own package (letterbox.testing) as it is imported, so the broker's modules load
# from their ordinary bytecode. Rewritten modules are cached only where pytest
# may write (not with PYTHONDONTWRITEBYTECODE=1 or a read-only site-packages),
# and rewriting the broker cost 0.6 s of CPU in each such run.
from __future__ import annotations

import gc
import itertools
import re
import sys
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from letterbox.testing.choices import AUTH_MODES, CLOCKS, MODES

if TYPE_CHECKING:
    from letterbox.testing.broker import Broker
    from letterbox.testing.clock import BrokerClock

LOG_START = pytest.StashKey[int]()
_topics = itertools.count(1)


def _rewrite_only_the_plugin() -> None:
    """Narrow pytest's assertion-rewrite mark from `letterbox` to `letterbox.testing` (the
    mark is a set on pytest's import hook: where it is not, nothing changes)."""
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and "letterbox" in marked:
            marked.discard("letterbox")
            marked.add("letterbox.testing")
            cache = getattr(finder, "_marked_for_rewrite_cache", None)
            if isinstance(cache, dict):
                cache.clear()


_rewrite_only_the_plugin()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("letterbox", "letterbox broker (letterbox.testing)")
    choices = {"clock": (CLOCKS, "manual", "the broker's clock: manual (moves only through "
                         "letterbox_clock.advance; real with --letterbox-pulsar-compatible-only) or real"),
               "auth": (AUTH_MODES, "none", "token: the broker requires a token; the fixtures "
                        "use a super-user one"),
               "mode": (MODES, "embedded", "embedded: the broker runs on a thread of the test "
                        "process; process: a child process")}
    for name, (values, default, text) in choices.items():
        group.addoption(f"--letterbox-{name}", choices=values, default=None,
                        help=f"{text} [default {default}; ini letterbox_{name}]")
        parser.addini(f"letterbox_{name}", f"{text} ({'|'.join(values)})",
                      default=None if name == "clock" else default)
    group.addoption("--letterbox-pulsar-compatible-only", action="store_true", default=None,
                    help="start the broker --pulsar-compatible-only (letterbox extensions off, as "
                         "Apache Pulsar) [ini letterbox_pulsar_compatible_only]")
    parser.addini("letterbox_pulsar_compatible_only", "start the broker --pulsar-compatible-only",
                  type="bool", default=False)


def _setting(config: pytest.Config, name: str) -> Any:
    value = config.getoption(f"--letterbox-{name.replace('_', '-')}")
    return config.getini(f"letterbox_{name}") if value is None else value


def _check(config: pytest.Config, name: str, values: tuple[str, ...]) -> str:
    value = str(_setting(config, name))
    if value not in values:
        raise pytest.UsageError(f"letterbox_{name} = {value!r}: use one of {', '.join(values)}")
    return value


@pytest.fixture(scope="session")
def letterbox_broker(pytestconfig: pytest.Config) -> Iterator[Broker]:
    """A letterbox broker on free ports of 127.0.0.1 with a temporary data directory, shared
    by the session (letterbox.testing.Broker: url, admin_url, clock, client(), admin())."""
    compatible = bool(_setting(pytestconfig, "pulsar_compatible_only"))
    if _setting(pytestconfig, "clock") is None:  # the test clock is an extension: off as Pulsar
        clock = "real" if compatible else "manual"
    else:
        clock = _check(pytestconfig, "clock", CLOCKS)
    if clock == "manual" and compatible:
        raise pytest.UsageError("the manual clock is a letterbox extension, off with "
                                "--letterbox-pulsar-compatible-only: leave out --letterbox-clock manual")
    from letterbox.testing.broker import Broker

    broker = Broker(
        embedded=_check(pytestconfig, "mode", MODES) == "embedded",
        clock=clock,
        auth=_check(pytestconfig, "auth", AUTH_MODES),
        pulsar_compatible_only=compatible,
    )
    with broker:
        gc.freeze()
        yield broker


@pytest.fixture
def letterbox_clock(letterbox_broker: Broker) -> BrokerClock:
    """The broker's manual clock: advance(timedelta(minutes=10)), now() (UTC datetimes)."""
    if letterbox_broker.clock_kind != "manual":
        pytest.fail("letterbox_clock needs the manual clock: run pytest with --letterbox-clock "
                    "manual (or letterbox_clock = manual in the ini file), without "
                    "--letterbox-pulsar-compatible-only", pytrace=False)
    return letterbox_broker.clock


@pytest.fixture
def letterbox_topic(request: pytest.FixtureRequest) -> str:
    """A topic name of its own for this test: persistent://public/default/<test>-<n>."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")[:80] or "test"
    return f"persistent://public/default/{name}-{next(_topics)}"


@pytest.fixture
def letterbox_client(letterbox_broker: Broker) -> Iterator[Any]:
    """A pulsar.Client connected to the broker, closed after the test."""
    client = letterbox_broker.client()
    yield client
    client.close()


def _broker_of(item: pytest.Item) -> Broker | None:
    module = sys.modules.get("letterbox.testing.broker")  # not imported: no broker ran
    broker = getattr(item, "funcargs", {}).get("letterbox_broker")
    return broker if module is not None and isinstance(broker, module.Broker) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    try:
        return (yield)
    finally:
        broker = _broker_of(item)
        if broker is not None and LOG_START not in item.stash:
            item.stash[LOG_START] = max(len(broker.log_lines()) - 1, 0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    broker = _broker_of(item)
    if report.failed and broker is not None:
        lines = broker.log_lines()[item.stash.get(LOG_START, 0):]
        report.sections.append(("letterbox broker log", "".join(lines[-500:]) or "(nothing logged)"))
    return report
