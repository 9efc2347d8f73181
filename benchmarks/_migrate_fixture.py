# The letterbox broker that `letterbox migrate` is measured and accepted on (migrate_rate.py,
# migrate_acceptance.py), and the timed run of a migrate child process.
# The fixture, in one tenant's namespace `app`: `topics` topics t0..t<n-1> (t0 and t1
# partitioned, 3 partitions), `messages` messages in all (100 B, keys k0..k96, each topic's i-th
# message "t<n>:<i>:" padded), the even topics sent in batch entries of up to 50; three
# subscriptions per topic acknowledging about 30 % (billing), 50 % (audit) and 70 % (search) of
# their messages out of order, audit and search with batch-index acknowledgements; two dead
# letter topics filled by letterbox with reasons and attempt logs: t3's billing through the
# RetryConsumer (terminate, and nack twice with a reason) and t5's billing through the broker's
# own policy (nack twice), each with an initial subscription `triage`; and t3's retry topic,
# holding the messages billing retried an hour later, unacknowledged by billing there.
# Invariant: `Fixture.owed` is what each subscription has not acknowledged, as the broker keeps
# it: without batch-index acknowledgements a batch entry stays whole until all of it is acked.
from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulsar

from letterbox.client import DeadLetterPolicy, RetryConsumer

SUBSCRIPTIONS = {"billing": 0.3, "audit": 0.5, "search": 0.7}
BATCH_INDEX_ACKS = frozenset({"audit", "search"})
PARTITIONED = 2
PARTITIONS = 3
RETRIED = "t3"  # billing: terminate, nack with reasons, retry
POLICED = "t5"  # billing: the broker's dead-letter policy, plain nacks
TRIAGE = "triage"
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
DEAD_LETTER_WAIT_S = 120.0


@dataclass
class Fixture:
    tenant: str
    # topic (a partitioned topic's parent) -> subscription -> ids ("t<n>:<i>") not acknowledged
    owed: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    # dead letter topic -> id -> the dead letter's properties on letterbox
    dead_letters: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    # dead letter and retry topic -> id -> its position there (elsewhere a message's i is its rank)
    ranks: dict[str, dict[str, int]] = field(default_factory=dict)
    messages: int = 0  # every message on the source, dead letters and retries included
    topics: int = 0  # topics on the source (a partitioned one counted once), dead letter and retry topics included

    @property
    def physical_topics(self) -> int:
        """Topics with their partitions counted one by one, as `--verify` counts them."""
        return self.topics + PARTITIONED * (PARTITIONS - 1)

    def rank(self, topic: str, ident: str) -> int:
        """Where a message stands in its topic's order on the source."""
        ranks = self.ranks.get(topic)
        return ranks[ident] if ranks is not None else int(ident.split(":")[1])

    def topic(self, name: str) -> str:
        return f"persistent://{self.tenant}/app/{name}"


def message_id(msg: Any) -> str:
    """The fixture's id of a message: "t<n>:<i>" from its payload."""
    topic, i, _ = msg.data().split(b":", 2)
    return f"{topic.decode()}:{int(i)}"


def admin_call(url: str, method: str, path: str, body: object = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def fill(url: str, admin: str, tenant: str, topics: int, messages: int) -> Fixture:
    admin_call(admin, "PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
    admin_call(admin, "PUT", f"/admin/v2/namespaces/{tenant}/app")
    fx = Fixture(tenant, topics=topics)
    rng = random.Random(5)
    per = messages // topics
    client = pulsar.Client(url, operation_timeout_seconds=60, logger=LOGGER)
    try:
        for t in range(topics):
            name = f"t{t}"
            topic = fx.topic(name)
            if t < PARTITIONED:
                admin_call(admin, "PUT", f"/admin/v2/persistent/{tenant}/app/{name}/partitions", PARTITIONS)
            for sub in SUBSCRIPTIONS:  # the subscriptions exist before the first message
                client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared).close()
            _produce(client, topic, name, per, batched=t % 2 == 0)
            fx.messages += per
            fx.owed[topic] = {}
            for sub, share in SUBSCRIPTIONS.items():
                if sub == "billing" and name == RETRIED:
                    fx.owed[topic][sub] = _retry_consumer(client, admin, fx, topic, per, share, rng)
                elif sub == "billing" and name == POLICED:
                    fx.owed[topic][sub] = _policed_consumer(client, admin, fx, topic, per, share, rng)
                else:
                    cons = client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared,
                                            receiver_queue_size=2000, batch_index_ack_enabled=sub in BATCH_INDEX_ACKS)
                    fx.owed[topic][sub] = _settle(cons, per, share, rng, sub in BATCH_INDEX_ACKS)
        for dlq in fx.dead_letters:
            fx.dead_letters[dlq] = _read(client, dlq)
            fx.owed[dlq] = {TRIAGE: set(fx.dead_letters[dlq])}
            fx.messages += len(fx.dead_letters[dlq])
            fx.ranks[dlq] = {ident: n for n, ident in enumerate(fx.dead_letters[dlq])}
        for retry in [t for t in fx.owed if t.endswith("-RETRY")]:
            fx.ranks[retry] = {ident: n for n, ident in enumerate(_read(client, retry))}
    finally:
        client.close()
    return fx


def _produce(client: pulsar.Client, topic: str, name: str, n: int, batched: bool) -> None:
    producer = client.create_producer(topic, batching_enabled=batched, batching_max_messages=50,
                                      batching_max_publish_delay_ms=10, block_if_queue_full=True,
                                      max_pending_messages=2000)
    failed: list[object] = []
    for i in range(n):
        head = f"{name}:{i}:".encode()
        producer.send_async(head + os.urandom(50).hex().encode()[:100 - len(head)],
                            lambda res, _mid: failed.append(res) if res != pulsar.Result.Ok else None,
                            partition_key=f"k{i % 97}", properties={"i": str(i)})
    producer.flush()
    producer.close()
    if failed:
        raise RuntimeError(f"{topic}: {len(failed)} sends failed ({failed[0]})")


def _settle(cons: Any, n: int, share: float, rng: random.Random, batch_index_acks: bool) -> set[str]:
    """Receive `n` messages, acknowledge about `share` of them at random; what stays owed."""
    kept: set[str] = set()
    entries: dict[tuple[int, int, int], list[str]] = {}
    for _ in range(n):
        m = cons.receive(30_000)
        mid = m.message_id()
        entries.setdefault((mid.partition(), mid.ledger_id(), mid.entry_id()), []).append(message_id(m))
        if rng.random() < share:
            cons.acknowledge(m)
        else:
            kept.add(message_id(m))
    cons.close()  # a clean close: its acknowledgements are durable
    if not batch_index_acks:  # the client acknowledges a batch entry once all of it is
        for ids in entries.values():
            if kept.intersection(ids):
                kept.update(ids)
    return kept


def _retry_consumer(client: pulsar.Client, admin: str, fx: Fixture, topic: str, n: int, share: float,
                    rng: random.Random) -> set[str]:
    """billing of t3 through the RetryConsumer: every 100th message terminated, the next retried in
    an hour, the next nacked twice with a reason (dead-lettered: max-redeliveries)."""
    dlq, retry = f"{topic}-billing-DLQ", f"{topic}-billing-RETRY"
    cons = RetryConsumer(client, topic, "billing", admin_url=admin, negative_ack_redelivery_delay_ms=100,
                         dead_letter_policy=DeadLetterPolicy(max_redeliver_count=1, initial_subscription_name=TRIAGE))
    kept: set[str] = set()
    retried: set[str] = set()
    dead = 0

    def first(m: Any, i: int) -> None:
        nonlocal dead
        if i % 100 == 0:
            cons.terminate(m, "unrecoverable: unknown schema version")
            dead += 1
        elif i % 100 == 1:
            cons.reconsume_later(m, 3600)
            retried.add(message_id(m))
        elif i % 100 == 2:
            cons.negative_acknowledge(m, reason="inventory service timed out")
            dead += 1
        elif rng.random() < share:
            cons.acknowledge(m)
        else:
            kept.add(message_id(m))

    _deliveries(cons, n, first, lambda m: cons.negative_acknowledge(m, reason="inventory service timed out again"),
                lambda: dead, admin, dlq)
    cons.close()
    fx.dead_letters[dlq] = {}
    fx.owed[retry] = {"billing": retried}
    fx.messages += len(retried)
    fx.topics += 2
    return kept


def _policed_consumer(client: pulsar.Client, admin: str, fx: Fixture, topic: str, n: int, share: float,
                      rng: random.Random) -> set[str]:
    """billing of t5 under the broker's dead-letter policy: messages 0-2 of every 100 nacked twice."""
    dlq = f"{topic}-billing-DLQ"
    cons = client.subscribe(topic, "billing", consumer_type=pulsar.ConsumerType.Shared,
                            negative_ack_redelivery_delay_ms=100, receiver_queue_size=2000,
                            properties={"letterbox.dlq.max_redeliveries": "1",
                                        "letterbox.dlq.initial_subscription": TRIAGE})
    kept: set[str] = set()
    dead = 0

    def first(m: Any, i: int) -> None:
        nonlocal dead
        if i % 100 < 3:
            cons.negative_acknowledge(m)
            dead += 1
        elif rng.random() < share:
            cons.acknowledge(m)
        else:
            kept.add(message_id(m))

    _deliveries(cons, n, first, cons.negative_acknowledge, lambda: dead, admin, dlq)
    cons.close()
    fx.dead_letters[dlq] = {}
    fx.topics += 1
    return kept


def _deliveries(cons: Any, n: int, first: Any, again: Any, dead: Any, admin: str, dlq: str) -> None:
    """Hand each message's first delivery to `first(msg, i)` and every redelivery to `again(msg)`,
    until `n` first deliveries are done and the dead letter topic holds `dead()` messages."""
    seen = 0
    deadline = None
    while True:
        try:
            m = cons.receive(500)
        except pulsar.Timeout:
            m = None
        if m is not None and m.redelivery_count() > 0:
            again(m)
        elif m is not None:
            seen += 1
            first(m, int(m.properties()["i"]))
        if seen < n:
            continue
        deadline = deadline or time.monotonic() + DEAD_LETTER_WAIT_S
        if m is None and _stored(admin, dlq) >= dead():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{dlq}: {_stored(admin, dlq)} dead letters, {dead()} expected")


def _stored(admin: str, topic: str) -> int:
    try:
        stats = admin_call(admin, "GET", topic.replace("persistent://", "/admin/v2/persistent/", 1) + "/stats")
    except urllib.error.HTTPError:
        return 0
    return int(stats["msgInCounter"])


def _read(client: pulsar.Client, topic: str) -> dict[str, dict[str, str]]:
    """Every message of `topic` by its fixture id, with its properties."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    out = {}
    while reader.has_message_available():
        m = reader.read_next(10_000)
        out[message_id(m)] = dict(m.properties())
    reader.close()
    return out


def timed(cmd: list[str], must_pass: bool = True) -> tuple[float, float, str, int]:
    """Run `cmd` (a letterbox command, without LETTERBOX_* settings): wall seconds, peak RSS (MB)
    of the child, its output and exit status; exits naming the command when it fails and
    `must_pass`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                          env={k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")})
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode != 0 and must_pass:
        sys.exit(f"{' '.join(cmd[2:5])} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return seconds, max(peak, before) / 1024, done.stdout + done.stderr, done.returncode


@dataclass
class Filled:
    """A letterbox broker holding a filled fixture tenant, and the Apache Pulsar to migrate it to."""
    fixture: Fixture
    fill_s: float
    migrate: list[str]  # `letterbox migrate` from the broker's tenant onto the target
    target_url: str


@contextlib.contextmanager
def filled(prefix: str, topics: int, messages: int) -> Iterator[Filled]:
    """A fresh letterbox (`--sync full`) with fill()'s tenant, and the reference Apache Pulsar:
    the one LETTERBOX_REFERENCE_URLS names ("pulsar://... http://...") or one started here.
    Both started brokers are stopped on the way out."""
    from _broker import Broker
    from _systems import Pulsar

    tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    given = os.environ.get("LETTERBOX_REFERENCE_URLS", "").split()
    ref = None if given else Pulsar(tmp)
    lb = Broker(tmp / "data", sync="full", log=tmp / "broker.log").start()
    try:
        if ref is not None:
            ref.start()
        target_url, target_admin = (given[0], given[1]) if ref is None else (ref.service_url, ref.admin_url)
        tenant = f"{prefix.split('-')[-1]}{uuid.uuid4().hex[:6]}"
        t0 = time.perf_counter()
        fx = fill(lb.url, lb.admin_url(), tenant, topics, messages)
        yield Filled(fx, time.perf_counter() - t0, [
            sys.executable, "-m", "letterbox", "migrate", "--service-url", lb.url, "--admin-url", lb.admin_url(),
            "--target-url", target_url, "--target-admin-url", target_admin, "--tenant", tenant], target_url)
    finally:
        lb.stop()
        if ref is not None:
            ref.stop()
