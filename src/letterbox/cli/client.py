# `letterbox produce` and `letterbox consume`: send and receive messages from a
# terminal with the official `pulsar` client, like Pulsar's `pulsar-client`
# tool. Both use a short operation/connection timeout so a broker that is not
# running gives a clear message instead of a hang, and keep the client's own
# log quiet unless --verbose. consume acknowledges each message after printing
# it; with `--output json` it prints one JSON object per message (JSON Lines).
from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from letterbox.auth_flags import auth_options, current_auth
from letterbox.cli.output import (
    OUTPUT_CHOICE,
    echo_json,
    format_epoch_ms,
    payload_json,
    payload_text,
    properties_text,
)
from letterbox.cli.params import KEY_VALUE, TOPIC
from letterbox.default_urls import DEFAULT_SERVICE_URL, SERVICE_URL_ENV

CONSUMER_TYPES = {"exclusive": "Exclusive", "shared": "Shared", "failover": "Failover", "key_shared": "KeyShared"}
RECEIVE_POLL_MS = 500


def _service_url_option(f: Any) -> Any:
    f = auth_options(f)
    f = click.option("--verbose", "-v", is_flag=True, help="Show the pulsar client's own log.")(f)
    f = click.option("--timeout-connect", "connect_timeout", type=click.FloatRange(min=0.1), default=5.0,
                     show_default=True, help="Seconds to wait for the broker before giving up.")(f)
    f = click.option("--output", "-o", type=OUTPUT_CHOICE, default="human", show_default=True,
                     help="human or json.")(f)
    f = click.option("--service-url", "-u", envvar=SERVICE_URL_ENV, default=DEFAULT_SERVICE_URL,
                     show_default=True,
                     help="Broker URL, pulsar://HOST:PORT or http://HOST:ADMINPORT (env LETTERBOX_SERVICE_URL).")(f)
    return f


def _unreachable(url: str, what: str, exc: BaseException) -> click.ClickException:
    return click.ClickException(
        f"cannot reach the letterbox broker at {url} ({what} failed: {type(exc).__name__}: {exc}): "
        "is the broker running? (start it with `letterbox standalone`, or point --service-url / "
        "LETTERBOX_SERVICE_URL at its binary port)"
    )


@contextmanager
def _pulsar_client(url: str, connect_timeout: float, verbose: bool) -> Iterator[Any]:
    import pulsar

    if not url.startswith(("pulsar://", "pulsar+ssl://", "http://", "https://")):
        raise click.BadParameter(f"{url!r}: use pulsar://HOST:PORT or http://HOST:PORT",
                                 param_hint="'--service-url'")
    logger = (pulsar.ConsoleLogger(pulsar.LoggerLevel.Info) if verbose
              else pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull))
    client = pulsar.Client(url, operation_timeout_seconds=max(1, round(connect_timeout)),
                           connection_timeout_ms=int(connect_timeout * 1000), logger=logger,
                           **current_auth().client_kwargs())
    try:
        yield client
    finally:
        client.close()


def _connect_failure(exc: Exception, url: str, what: str) -> click.ClickException:
    import pulsar

    if isinstance(exc, pulsar.exceptions.ConnectError | pulsar.exceptions.Timeout
                  | pulsar.exceptions.LookupError | pulsar.exceptions.NotConnected):
        return _unreachable(url, what, exc)
    return click.ClickException(f"{what} failed: {type(exc).__name__}: {exc}")


# --- produce ---------------------------------------------------------------------------
@click.command()
@click.argument("topic", type=TOPIC)
@click.option("--messages", "-m", "messages", multiple=True, help="A message payload (UTF-8); repeat for more.")
@click.option("--files", "-f", "files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A file whose bytes are one message; repeat for more.")
@click.option("--num-produce", "-n", "repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Send every message this many times.")
@click.option("--key", "-k", help="Partition key of every message.")
@click.option("--property", "-p", "properties", type=KEY_VALUE, multiple=True,
              help="A message property key=value; repeat for more.")
@click.option("--deliver-after", type=click.FloatRange(min=0), help="Delayed delivery: seconds from now.")
@_service_url_option
def produce(topic: Any, messages: tuple[str, ...], files: tuple[Path, ...], repeat: int, key: str | None,
            properties: tuple[tuple[str, str], ...], deliver_after: float | None, service_url: str,
            output: str, connect_timeout: float, verbose: bool) -> None:
    """Send messages to TOPIC (like `pulsar-client produce`)."""
    payloads = [m.encode() for m in messages] + [p.read_bytes() for p in files]
    if not payloads:
        raise click.UsageError("nothing to send: give at least one -m MESSAGE or -f FILE")
    send_kwargs: dict[str, Any] = {"properties": dict(properties)}
    if key is not None:
        send_kwargs["partition_key"] = key
    if deliver_after is not None:
        send_kwargs["deliver_after"] = datetime.timedelta(seconds=deliver_after)
    ids: list[str] = []
    with _pulsar_client(service_url, connect_timeout, verbose) as client:
        try:
            producer = client.create_producer(str(topic))
        except Exception as exc:
            raise _connect_failure(exc, service_url, "creating the producer") from None
        try:
            for _ in range(repeat):
                for payload in payloads:
                    ids.append(_message_id(producer.send(payload, **send_kwargs)))
        except Exception as exc:
            raise click.ClickException(
                f"send failed after {len(ids)} messages: {type(exc).__name__}: {exc}") from None
        finally:
            producer.close()
    if output == "json":
        echo_json({"topic": str(topic), "produced": len(ids), "messageIds": ids})
    else:
        click.echo(f"{len(ids)} messages successfully produced to {topic}")


def _message_id(mid: Any) -> str:
    """`ledger:entry:partition:batchIndex`, as in ORIGIN_MESSAGE_ID."""
    return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}"


# --- consume ---------------------------------------------------------------------------
# what is shown for a key or properties that are not UTF-8: the official Python client
# raises on them and cannot give their bytes (the admin API's views show them escaped)
NOT_TEXT = "<not UTF-8 text: see it escaped with `letterbox admin topics examine-message`>"


def _readable(get: Callable[[], Any], instead: Any) -> Any:
    try:
        return get()
    except UnicodeDecodeError:
        return instead


def message_record(msg: Any) -> dict[str, Any]:
    return {
        "messageId": _message_id(msg.message_id()),
        "topic": msg.topic_name(),
        "key": _readable(msg.partition_key, NOT_TEXT) or None,
        "properties": _readable(lambda: dict(msg.properties()), {"": NOT_TEXT}),
        "publishTime": msg.publish_timestamp(),
        "eventTime": msg.event_timestamp(),
        "redeliveryCount": msg.redelivery_count(),
        **payload_json(msg.data()),
    }


def _echo_human(rec: dict[str, Any], data: bytes) -> None:
    click.echo("----- got message -----")
    click.echo(f"Message ID: {rec['messageId']}")
    click.echo(f"Topic: {rec['topic']}")
    click.echo(f"Key: {rec['key'] or '-'}")
    click.echo(f"Properties: {properties_text(rec['properties'])}")
    click.echo(f"Publish time: {format_epoch_ms(rec['publishTime'])}")
    if rec["eventTime"]:
        click.echo(f"Event time: {format_epoch_ms(rec['eventTime'])}")
    click.echo(f"Redelivery count: {rec['redeliveryCount']}")
    click.echo(f"Payload: {payload_text(data)}")


@click.command()
@click.argument("topic", type=TOPIC)
@click.option("--subscription-name", "-s", "subscription", required=True, help="Subscription name.")
@click.option("--num-messages", "-n", "count", type=click.IntRange(min=0), default=1, show_default=True,
              help="Messages to receive; 0 = until interrupted.")
@click.option("--subscription-type", "-t", "sub_type", type=click.Choice(list(CONSUMER_TYPES), case_sensitive=False),
              default="exclusive", show_default=True)
@click.option("--subscription-position", "-p", "position", type=click.Choice(["earliest", "latest"],
              case_sensitive=False), default="latest", show_default=True,
              help="Where a new subscription starts.")
@click.option("--wait", "-w", "wait", type=click.FloatRange(min=0), default=None,
              help="Give up when no message arrives for this many seconds [wait forever].")
@_service_url_option
def consume(topic: Any, subscription: str, count: int, sub_type: str, position: str, wait: float | None,
            service_url: str, output: str, connect_timeout: float, verbose: bool) -> None:
    """Receive, print and acknowledge messages of TOPIC (like `pulsar-client consume`).

    Each message is printed with its id (ledger:entry:partition:batch), key,
    properties and payload; `--output json` prints one JSON object a line.
    """
    import pulsar

    received = 0
    with _pulsar_client(service_url, connect_timeout, verbose) as client:
        try:
            consumer = client.subscribe(
                str(topic), subscription,
                consumer_type=getattr(pulsar.ConsumerType, CONSUMER_TYPES[sub_type.lower()]),
                initial_position=getattr(pulsar.InitialPosition, position.capitalize()),
                receiver_queue_size=min(count, 1000) if count else 1000,
            )
        except Exception as exc:
            raise _connect_failure(exc, service_url, "subscribing") from None
        try:
            idle_since = time.monotonic()
            while count == 0 or received < count:
                try:
                    msg = consumer.receive(timeout_millis=RECEIVE_POLL_MS)
                except pulsar.exceptions.Timeout:
                    if wait is not None and time.monotonic() - idle_since >= wait:
                        if count and received < count:
                            raise click.ClickException(
                                f"received {received} of {count} messages: none arrived in {wait:g}s"
                            ) from None
                        break
                    continue
                rec = message_record(msg)
                if output == "json":
                    click.echo(json.dumps(rec))
                else:
                    _echo_human(rec, msg.data())
                consumer.acknowledge(msg)
                received += 1
                idle_since = time.monotonic()
        except KeyboardInterrupt:
            pass
        finally:
            consumer.close()
    if output != "json":
        click.echo(f"{received} messages successfully consumed", err=True)
