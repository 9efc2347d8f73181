# `letterbox perf produce|consume`: throughput and latency with the official
# pulsar-client, in the spirit of pulsar-perf. Produce latency is send ->
# receipt; consume latency is publish time -> receive (millisecond clock, so
# meaningful for end-to-end runs on one machine). Latencies are sampled
# (every `sample`-th message) so measuring does not cost the rate it measures.
# The broker URL comes from -u/--service-url or LETTERBOX_SERVICE_URL like
# `produce`/`consume`; a short-timeout probe turns "no broker there" into one
# line; the client's own log goes to /dev/null unless --verbose, so --json
# output is nothing but JSON. While it runs, a live rate goes to stderr on a
# terminal (or with --live): the loops publish their count every `sample`-th
# message into a LiveRate, which a thread prints once per interval.
from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import click

from letterbox.auth_flags import auth_options, current_auth
from letterbox.auth_options import AuthOptions
from letterbox.cli.client import _connect_failure
from letterbox.default_urls import DEFAULT_SERVICE_URL, SERVICE_URL_ENV


@dataclass
class PerfResult:
    role: str
    messages: int
    seconds: float
    msgs_per_sec: float
    mb_per_sec: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    # Wall-clock (time.time()) bounds of the timed run, so a driver can compute
    # end-to-end time across processes: first send .. last receive.
    started_at: float = 0.0
    finished_at: float = 0.0

    def line(self) -> str:
        return (
            f"{self.role}: {self.messages} msgs in {self.seconds:.2f}s = {self.msgs_per_sec:,.0f} msg/s "
            f"({self.mb_per_sec:.1f} MB/s), latency p50 {self.p50_ms:.1f} ms p99 {self.p99_ms:.1f} ms "
            f"max {self.max_ms:.1f} ms"
        )


class LiveRate:
    """`role: N msgs, R msg/s` on stderr every `interval` seconds while a run goes on."""

    def __init__(self, role: str, interval: float = 1.0) -> None:
        self.role, self.interval = role, interval
        self.done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"perf-{role}-live", daemon=True)

    def __enter__(self) -> LiveRate:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last, last_t = 0, time.perf_counter()
        while not self._stop.wait(self.interval):
            now, done = time.perf_counter(), self.done
            rate = (done - last) / max(now - last_t, 1e-9)
            last, last_t = done, now
            click.echo(f"{self.role}: {done:,} msgs, {rate:,.0f} msg/s", err=True)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _result(role: str, n: int, size: int, seconds: float, lat: list[float],
            started_at: float = 0.0, finished_at: float = 0.0) -> PerfResult:
    return PerfResult(
        role, n, seconds, n / seconds if seconds else 0.0, n * size / seconds / 1e6 if seconds else 0.0,
        _percentile(lat, 0.50), _percentile(lat, 0.99), max(lat) if lat else 0.0, started_at, finished_at,
    )


# The client's I/O thread and the sending thread share the GIL; a short switch
# interval keeps the sender from stalling behind callbacks.
GIL_SWITCH_INTERVAL = 0.0005


def _perf_client(url: str, topic: str, auth: AuthOptions | None, connect_timeout: float, verbose: bool) -> Any:
    """A client for the run, after a lookup with a short timeout has shown a broker answers at `url`
    (the run's own client keeps a long operation timeout, which would make a dead URL hang 30 s)."""
    import pulsar

    if not url.startswith(("pulsar://", "pulsar+ssl://", "http://", "https://")):
        raise click.BadParameter(f"{url!r}: use pulsar://HOST:PORT or http://HOST:PORT",
                                 param_hint="'--service-url'")
    logger = (pulsar.ConsoleLogger(pulsar.LoggerLevel.Info) if verbose
              else pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull))
    kwargs = (auth or AuthOptions()).client_kwargs()
    probe = pulsar.Client(url, operation_timeout_seconds=max(1, round(connect_timeout)),
                          connection_timeout_ms=int(connect_timeout * 1000), logger=logger, **kwargs)
    try:
        probe.get_topic_partitions(topic)
    except Exception as exc:
        raise _connect_failure(exc, url, "looking up the topic") from None
    finally:
        probe.close()
    return pulsar.Client(url, operation_timeout_seconds=30, io_threads=1, logger=logger, **kwargs)


def run_produce(url: str, topic: str, n: int, size: int, batching: bool, sample: int = 50,
                binding: bool = False, auth: AuthOptions | None = None,
                connect_timeout: float = 5.0, verbose: bool = False, live: LiveRate | None = None) -> PerfResult:
    import _pulsar
    import pulsar

    sys.setswitchinterval(GIL_SWITCH_INTERVAL)

    client = _perf_client(url, topic, auth, connect_timeout, verbose)
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_messages=1000,
        batching_max_allowed_size_in_bytes=256 * 1024,
        batching_max_publish_delay_ms=5,
        max_pending_messages=10_000 if batching else 2_000,
        block_if_queue_full=True,
        send_timeout_millis=60_000,
    )
    payload = b"x" * size
    lat: list[float] = []
    errors: list[object] = []

    def timed(t0: float) -> object:
        def cb(res: object, _mid: object) -> None:
            if res != pulsar.Result.Ok:
                errors.append(res)
            lat.append((time.perf_counter() - t0) * 1000)
        return cb

    started_at = time.time()
    start = time.perf_counter()
    send = producer.send_async
    if binding:
        # Skip the pure-Python wrapper (schema encode, nine type checks per call) and
        # call the pybind11 binding the wrapper itself ends in, with a prebuilt
        # Message per send. Same client library, same wire traffic.
        raw_send = producer._producer.send_async
        builder = _pulsar.MessageBuilder

        def send(data: bytes, cb: object) -> None:
            raw_send(builder().content(data).build(), cb)

    for i in range(n):
        # Only sampled messages carry a Python callback: each callback makes the
        # client's I/O thread take the GIL, and at one per message that GIL traffic,
        # not the broker, caps the rate at ~30k msg/s. flush() still waits for every
        # receipt; the consumer side counts that all n arrived.
        if i % sample == 0:
            send(payload, timed(time.perf_counter()))
            if live is not None:
                live.done = i
        else:
            send(payload, None)
    producer.flush()
    seconds = time.perf_counter() - start
    finished_at = time.time()
    producer.close()
    client.close()
    if errors:
        raise click.ClickException(f"{len(errors)} sampled sends failed, first: {errors[0]}")
    return _result("produce", n, size, seconds, lat, started_at, finished_at)


def run_consume(url: str, topic: str, subscription: str, n: int, sample: int = 50,
                ready: threading.Event | None = None, ready_file: str | None = None,
                receiver_queue: int = 10_000, binding: bool = False,
                auth: AuthOptions | None = None, connect_timeout: float = 5.0,
                verbose: bool = False, live: LiveRate | None = None) -> PerfResult:
    import pulsar

    sys.setswitchinterval(GIL_SWITCH_INTERVAL)

    client = _perf_client(url, topic, auth, connect_timeout, verbose)
    consumer = client.subscribe(
        topic, subscription, consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=receiver_queue,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    if ready is not None:
        ready.set()
    if ready_file:
        with open(ready_file, "w") as f:
            f.write("subscribed\n")
    lat: list[float] = []
    receive, ack = consumer.receive, consumer.acknowledge
    if binding:
        # receive()/acknowledge() on the pybind11 consumer: no Message wrapper object
        # and no isinstance dispatch per message; still one acknowledge per message.
        receive, ack = consumer._consumer.receive, consumer._consumer.acknowledge
    first = receive()
    started_at = time.time()
    start = time.perf_counter()
    ack(first)
    size = len(first.data())
    for i in range(1, n):
        msg = receive()
        ack(msg)
        if i % sample == 0:
            lat.append(time.time() * 1000 - msg.publish_timestamp())
            if live is not None:
                live.done = i
    seconds = time.perf_counter() - start
    finished_at = time.time()
    consumer.close()
    client.close()
    return _result("consume", n, size, seconds, lat, started_at, finished_at)


@click.group()
def perf() -> None:
    """Throughput benchmarks with the official pulsar-client."""


def _connection_options(f: Callable[..., None]) -> Callable[..., None]:
    f = click.option("--verbose", "-v", is_flag=True, help="Show the pulsar client's own log.")(f)
    f = click.option("--timeout-connect", "connect_timeout", type=click.FloatRange(min=0.1), default=5.0,
                     show_default=True, help="Seconds to wait for the broker before giving up.")(f)
    f = click.option("--service-url", "-u", "--url", "url", envvar=SERVICE_URL_ENV,
                     default=DEFAULT_SERVICE_URL, show_default=True,
                     help="Broker URL, pulsar://HOST:PORT or http://HOST:ADMINPORT (env LETTERBOX_SERVICE_URL).")(f)
    f = click.option("--live/--no-live", default=None,
                     help="Print the running rate on stderr [default: when stderr is a terminal].")(f)
    f = click.option("--live-interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
                     help="Seconds between live rate lines.")(f)
    return f


def _live(role: str, live: bool | None, interval: float) -> contextlib.AbstractContextManager[LiveRate | None]:
    show = sys.stderr.isatty() if live is None else live
    return LiveRate(role, interval) if show else contextlib.nullcontext()


@perf.command("produce")
@_connection_options
@click.option("--topic", default="perf", show_default=True)
@click.option("-n", "--messages", default=200_000, show_default=True)
@click.option("-s", "--size", default=100, show_default=True, help="payload bytes")
@click.option("--batching/--no-batching", default=True, show_default=True)
@click.option("--binding", is_flag=True, help="call the client's pybind11 layer directly (less Python per message)")
@click.option("--json", "as_json", is_flag=True)
@auth_options
def produce_cmd(url: str, connect_timeout: float, verbose: bool, live: bool | None, live_interval: float,
                topic: str, messages: int, size: int, batching: bool, binding: bool, as_json: bool) -> None:
    """Publish N messages as fast as the client allows."""
    with _live("produce", live, live_interval) as rate:
        r = run_produce(url, topic, messages, size, batching, binding=binding, auth=current_auth(),
                        connect_timeout=connect_timeout, verbose=verbose, live=rate)
    click.echo(json.dumps(asdict(r)) if as_json else r.line())


@perf.command("consume")
@_connection_options
@click.option("--topic", default="perf", show_default=True)
@click.option("--subscription", default="perf-sub", show_default=True)
@click.option("-n", "--messages", default=200_000, show_default=True)
@click.option("--receiver-queue", default=10_000, show_default=True, help="client receiver queue size")
@click.option("--ready-file", type=click.Path(dir_okay=False), help="write this file once subscribed")
@click.option("--binding", is_flag=True, help="call the client's pybind11 layer directly (less Python per message)")
@click.option("--json", "as_json", is_flag=True)
@auth_options
def consume_cmd(url: str, connect_timeout: float, verbose: bool, live: bool | None, live_interval: float,
                topic: str, subscription: str, messages: int, receiver_queue: int, ready_file: str | None,
                binding: bool, as_json: bool) -> None:
    """Receive and acknowledge N messages, one ack per message."""
    with _live("consume", live, live_interval) as rate:
        r = run_consume(url, topic, subscription, messages, ready_file=ready_file, receiver_queue=receiver_queue,
                        binding=binding, auth=current_auth(), connect_timeout=connect_timeout, verbose=verbose,
                        live=rate)
    click.echo(json.dumps(asdict(r)) if as_json else r.line())
