"""Topic lookup rules (issue 15 item 5): topics are auto-created only inside namespaces
that exist, as Pulsar: a producer or consumer on a topic whose tenant or namespace does
not exist gets TopicNotFound; public/default exists from the broker's start."""
from __future__ import annotations

from typing import Any

import pulsar
import pytest

from tests.admin.helpers import call
from tests.conftest import BrokerProcess


@pytest.mark.parametrize("topic", [
    "persistent://no-such-tenant/ns/t",
    "persistent://public/no-such-ns/t",
    "non-persistent://public/no-such-ns/t",
])
def test_missing_tenant_or_namespace_is_topic_not_found(client: Any, topic: str) -> None:
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(topic)
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe(topic, "s")


def test_existing_namespace_auto_creates_and_default_works(broker: BrokerProcess, client: Any) -> None:
    client.create_producer("plain-default-topic").send(b"a")  # public/default from the start
    call(broker.admin_url, "PUT", "/admin/v2/tenants/lookup", "{}")
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://lookup/later/t")
    assert call(broker.admin_url, "PUT", "/admin/v2/namespaces/lookup/later")[0] == 204
    producer = client.create_producer("persistent://lookup/later/t")
    consumer = client.subscribe("persistent://lookup/later/t", "s", initial_position=pulsar.InitialPosition.Earliest)
    producer.send(b"b")
    assert consumer.receive(10_000).data() == b"b"


def test_default_namespace_exists_without_the_admin_server(tmp_path: Any) -> None:
    b = BrokerProcess(tmp_path / "noadmin", args=["--port", "0", "--bind", "127.0.0.1", "--admin-port", "off"],
                      default_listeners=False).start()
    try:
        c = pulsar.Client(b.url, operation_timeout_seconds=10)
        try:
            c.create_producer("persistent://public/default/no-admin").send(b"x")
            with pytest.raises(pulsar.TopicNotFound):
                c.create_producer("persistent://public/elsewhere/t")
        finally:
            c.close()
    finally:
        b.stop()


def _lookup(port: int, topic: str, listener: str | None) -> Any:
    from letterbox.protocol import pb
    from letterbox.protocol.framing import encode_command
    from tests.security.wire import Wire

    w = Wire(port)
    try:
        assert w.connect().type == pb.BaseCommand.CONNECTED
        body = pb.CommandLookupTopic(topic=topic, request_id=7, authoritative=False)
        if listener is not None:
            body.advertised_listener_name = listener
        w.send(encode_command(pb.BaseCommand(type=pb.BaseCommand.LOOKUP, lookupTopic=body)))
        return w.next(10).lookupTopicResponse
    finally:
        w.close()


def test_advertised_listeners_select_the_lookup_address(tmp_path: Any) -> None:
    from tests.cli.helpers import closed_port

    port = closed_port()
    listeners = f"internal:pulsar://127.0.0.1:{port},external:pulsar://localhost:{port}"
    b = BrokerProcess(tmp_path / "l", env={"LETTERBOX_ADVERTISED_LISTENERS": listeners,
                                           "LETTERBOX_INTERNAL_LISTENER_NAME": "internal"},
                      args=["--port", str(port), "--admin-port", "0", "--bind", "127.0.0.1"],
                      default_listeners=False).start()
    try:
        topic = "persistent://public/default/listened"
        assert _lookup(port, topic, None).brokerServiceUrl == f"pulsar://127.0.0.1:{port}"
        assert _lookup(port, topic, "external").brokerServiceUrl == f"pulsar://localhost:{port}"
        refused = _lookup(port, topic, "nope")
        assert refused.response == refused.Failed and refused.error == 6  # ServiceNotReady
        assert "the broker do not have nope listener" in refused.message
        c = pulsar.Client(f"pulsar://127.0.0.1:{port}", listener_name="external", operation_timeout_seconds=10)
        try:
            c.create_producer(topic).send(b"through the external listener")
        finally:
            c.close()
    finally:
        b.stop()


def test_a_listener_name_on_a_broker_without_advertised_listeners_is_refused(broker: BrokerProcess) -> None:
    """The Python client's pulsar_test.test_listener_name_client, as Apache Pulsar answers it:
    a broker without advertisedListeners has no named listener, so a LOOKUP naming one is
    refused with ServiceNotReady and Pulsar's message ("the broker do not have test listener",
    which the C++ client recognises and keeps its connection for), and creating a producer
    fails at once with ConnectError (Pulsar 4.0.8 answers the same); without a name the same
    lookup is answered."""
    topic = "persistent://public/default/listener-less"
    refused = _lookup(broker.port, topic, "test")
    assert refused.response == refused.Failed and refused.error == 6  # ServiceNotReady
    assert "the broker do not have test listener" in refused.message
    assert _lookup(broker.port, topic, None).brokerServiceUrl
    c = pulsar.Client(broker.url, listener_name="test", operation_timeout_seconds=3)
    try:
        with pytest.raises(pulsar.ConnectError):
            c.create_producer(topic)
    finally:
        c.close()


def test_bad_listener_configuration_is_refused(tmp_path: Any) -> None:
    b = BrokerProcess(tmp_path / "bad", env={"LETTERBOX_ADVERTISED_LISTENERS": "internal:http://x:1"})
    b.start(expect_ready=False)
    assert b.exited.wait(20)
    assert "NAME:pulsar://HOST:PORT" in b.log()


def test_missing_namespace_with_pulsar_asyncio(broker: BrokerProcess) -> None:
    import asyncio

    import pulsar.asyncio as pulsar_asyncio

    from tests.conftest import _quiet_logger

    async def run() -> None:
        client = pulsar_asyncio.Client(broker.url, operation_timeout_seconds=10, logger=_quiet_logger())
        try:
            with pytest.raises(pulsar_asyncio.PulsarException) as refused:
                await client.create_producer("persistent://ghost/ns/t")
            assert refused.value.error() == pulsar.Result.TopicNotFound
            producer = await client.create_producer("persistent://public/default/async-ok")
            await producer.send(b"fine")
        finally:
            await client.close()

    asyncio.run(run())
