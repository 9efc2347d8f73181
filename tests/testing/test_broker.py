"""letterbox.testing.Broker outside pytest's fixtures: the context manager in both modes,
its clock, its clean-up, and the README's example in one process (embedded)."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pulsar
import pytest

from letterbox.testing import Broker, BrokerStartError, ManualClockError


def test_embedded_broker_runs_the_readme_example_in_this_process() -> None:
    with Broker(embedded=True) as broker:
        client = pulsar.Client(broker.url)
        producer = client.create_producer("testing-readme")
        consumer = client.subscribe("testing-readme", "testing-sub",
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer.send(b"order #1")
        msg = consumer.receive(10_000)
        consumer.acknowledge(msg)
        assert msg.data() == b"order #1"
        client.close()
        stats = broker.topic_stats("testing-readme")
        assert stats["subscriptions"]["testing-sub"]["msgBacklog"] == 0
    assert "letterbox (embedded) listening on pulsar://127.0.0.1:" in broker.log()


@pytest.mark.parametrize("embedded", [True, False])
def test_manual_clock_and_clean_up(embedded: bool) -> None:
    broker = Broker(embedded=embedded, clock="manual")
    with broker:
        data_dir = broker.data_dir
        assert data_dir is not None and data_dir.is_dir()
        before = broker.clock.now()
        assert broker.clock.advance(timedelta(hours=2)) - before == timedelta(hours=2)
        assert broker.clock.now() - before == timedelta(hours=2)
        broker.clock.advance_to(before + timedelta(hours=3))
        assert broker.clock.now_ms() - int(before.timestamp() * 1000) == 3 * 3600_000
        with pytest.raises(ValueError, match="only moves forward"):
            broker.clock.advance(timedelta(seconds=-1))
        client = broker.client()
        client.create_producer("testing-clean-up").send(b"x")
    assert not broker.running
    assert not data_dir.exists()  # the temporary data directory went with the broker
    with pytest.raises(pulsar.PulsarException):  # stop() closed the client it made
        client.create_producer("testing-clean-up")


@pytest.mark.parametrize("embedded", [True, False])
def test_the_real_clock_refuses_to_be_read_or_moved_as_manual(embedded: bool) -> None:
    with Broker(embedded=embedded) as broker:
        with pytest.raises(ManualClockError, match="real clock"):
            broker.clock.now()
        with pytest.raises(ManualClockError, match="real clock"):
            broker.clock.advance(timedelta(minutes=1))


def test_an_embedded_broker_starts_its_admin_server_on_first_use() -> None:
    """The clock is moved on the broker's own loop; admin_url starts the admin server, whose
    clock route then answers the same time."""
    with Broker(embedded=True, clock="manual") as broker:
        moved = broker.clock.advance(timedelta(hours=1))
        assert "admin on http" not in broker.log()
        state = broker.admin("GET", "/admin/v2/letterbox/clock")
        assert (state["clock"], state["nowMs"]) == ("manual", int(moved.timestamp() * 1000))
        assert f"admin on http://127.0.0.1:{broker.admin_port} (started on first use)" in broker.log()
        assert broker.clock.advance(1000) - moved == timedelta(seconds=1)


def test_a_given_data_dir_is_kept(tmp_path: Path) -> None:
    with Broker(embedded=True, data_dir=tmp_path / "kept") as broker:
        broker.client().create_producer("testing-kept").send(b"x")
    assert (tmp_path / "kept").is_dir()


def test_a_broker_that_cannot_start_says_why(tmp_path: Path) -> None:
    with Broker(embedded=True, data_dir=tmp_path / "d"), \
            pytest.raises(BrokerStartError, match="did not start"):
        Broker(data_dir=tmp_path / "d").start()  # the directory is in use


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="clock must be one of real, manual"):
        Broker(clock="sundial")
    with pytest.raises(RuntimeError, match="not running"):
        _ = Broker().url
