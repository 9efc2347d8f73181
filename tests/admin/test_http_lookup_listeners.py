"""The HTTP topic lookup (`GET /lookup/v2/topic/...`) with advertised listeners (issue 15
item 5), as Pulsar's TopicLookup answers it: the listener named by the `listenerName` query
parameter, else by the `X-Pulsar-ListenerName` header (the parameter wins), the internal
listener without a name, and a 500 naming the listeners for an unknown name. The official
(C++-based) client sends no listener name over HTTP lookup, so through an http:// service
URL it is answered the internal listener."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.cli.helpers import closed_port
from tests.conftest import BrokerProcess, _quiet_logger

LOOKUP = "/lookup/v2/topic/persistent/public/default/listened"


@pytest.fixture(scope="module")
def listened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int, int]]:
    port, nowhere = closed_port(), closed_port()
    listeners = (f"internal:pulsar://127.0.0.1:{port},"
                 f"external:pulsar://localhost:{nowhere},external:pulsar+ssl://broker.example.com:6651")
    b = BrokerProcess(tmp_path_factory.mktemp("listeners") / "d",
                      env={"LETTERBOX_ADVERTISED_LISTENERS": listeners,
                           "LETTERBOX_INTERNAL_LISTENER_NAME": "internal"},
                      args=["--port", str(port), "--admin-port", "0", "--bind", "127.0.0.1"],
                      default_listeners=False).start()
    yield b, port, nowhere
    b.stop()


def lookup(b: BrokerProcess, query: str = "", header: str | None = None) -> tuple[int, Any]:
    return call(b.admin_url, "GET", LOOKUP + query,
                headers=None if header is None else {"X-Pulsar-ListenerName": header})


def test_http_lookup_answers_the_named_listener(listened: tuple[BrokerProcess, int, int]) -> None:
    b, port, nowhere = listened
    internal = {"brokerUrl": f"pulsar://127.0.0.1:{port}", "brokerUrlTls": "",
                "nativeUrl": f"pulsar://127.0.0.1:{port}"}
    external = {"brokerUrl": f"pulsar://localhost:{nowhere}", "brokerUrlTls": "pulsar+ssl://broker.example.com:6651",
                "nativeUrl": f"pulsar://localhost:{nowhere}"}

    def urls(answer: tuple[int, Any]) -> dict[str, str]:
        status, body = answer
        assert status == 200, body
        assert body["httpUrl"] == b.admin_url
        return {k: body[k] for k in ("brokerUrl", "brokerUrlTls", "nativeUrl")}

    assert urls(lookup(b)) == internal  # no name: the internal listener, as the binary LOOKUP
    assert urls(lookup(b, "?listenerName=external")) == external
    assert urls(lookup(b, header="external")) == external
    assert urls(lookup(b, "?listenerName=internal", header="external")) == internal  # the parameter wins
    assert urls(lookup(b, "?listenerName=", header="external")) == external  # an empty one does not
    assert urls(lookup(b, "?authoritative=false&listenerName=external")) == external


def test_http_lookup_of_an_unknown_listener_is_refused(listened: tuple[BrokerProcess, int, int]) -> None:
    b, _port, _nowhere = listened
    for answer in (lookup(b, "?listenerName=nope"), lookup(b, header="nope")):
        status, body = answer
        assert status == 500, body  # Pulsar: the lookup's PulsarServerException as a 500
        assert body["reason"] == "the broker do not have nope listener; its listeners: external, internal"


def test_official_clients_through_the_http_lookup(listened: tuple[BrokerProcess, int, int]) -> None:
    """pulsar-client's HTTP lookup names no listener: it gets (and reaches) the internal one,
    even with listener_name set, which it only sends in the binary LOOKUP."""
    b, _port, _nowhere = listened
    topic = "persistent://public/default/http-looked-up"
    for listener in (None, "external"):
        kwargs = {"listener_name": listener} if listener else {}
        c = pulsar.Client(b.admin_url, operation_timeout_seconds=10, logger=_quiet_logger(), **kwargs)
        try:
            consumer = c.subscribe(f"{topic}-{listener}", "s", initial_position=pulsar.InitialPosition.Earliest)
            c.create_producer(f"{topic}-{listener}").send(f"via {listener}".encode())
            assert consumer.receive(10_000).data() == f"via {listener}".encode()
        finally:
            c.close()

    import pulsar.asyncio as pulsar_asyncio

    async def run() -> None:
        client = pulsar_asyncio.Client(b.admin_url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            producer = await client.create_producer(topic)
            msg_id = await producer.send(b"async via http lookup")
            assert msg_id.entry_id() >= 0
        finally:
            await client.close()

    asyncio.run(run())


def test_http_lookup_without_advertised_listeners_refuses_a_name(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "plain").start()
    try:
        status, body = lookup(b, "?listenerName=anything")
        assert status == 500 and "the broker do not have anything listener" in body["reason"], body
        status, body = lookup(b)
        assert status == 200 and body["brokerUrl"] == b.url, body
    finally:
        b.stop()


def test_binary_lookup_listener_with_pulsar_asyncio(listened: tuple[BrokerProcess, int, int]) -> None:
    """pulsar.asyncio's listener_name goes into the binary LOOKUP: `internal` is answered (and
    reached), `external` is answered with its unreachable address, and an unknown name is
    refused with ServiceNotReady, which the client retries until its operation timeout."""
    import pulsar.asyncio as pulsar_asyncio

    _b, port, _nowhere = listened

    async def produce(listener: str) -> pulsar.Result:
        client = pulsar_asyncio.Client(f"pulsar://127.0.0.1:{port}", listener_name=listener,
                                       operation_timeout_seconds=5, logger=_quiet_logger())
        try:
            producer = await client.create_producer("persistent://public/default/async-listened")
            await producer.send(listener.encode())
            return pulsar.Result.Ok
        except pulsar_asyncio.PulsarException as exc:
            return exc.error()
        finally:
            await client.close()

    assert asyncio.run(produce("internal")) == pulsar.Result.Ok
    assert asyncio.run(produce("external")) == pulsar.Result.Timeout  # nothing listens there
    assert asyncio.run(produce("nope")) == pulsar.Result.Timeout
