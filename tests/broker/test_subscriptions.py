"""Exclusive, Shared, Failover and Key_Shared subscriptions through the official client."""
from __future__ import annotations

import collections
import threading
import uuid

import pulsar
import pytest

EARLIEST = pulsar.InitialPosition.Earliest


def topic_name(prefix: str = "sub") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def drain(consumer: pulsar.Consumer, timeout_ms: int = 500, ack: bool = True) -> list[pulsar.Message]:
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_millis=timeout_ms)
        except pulsar.Timeout:
            return out
        out.append(msg)
        if ack:
            consumer.acknowledge(msg)


def test_exclusive_second_consumer_is_refused(client: pulsar.Client) -> None:
    topic = topic_name()
    c1 = client.subscribe(topic, "ex", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "ex", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "ex", consumer_type=pulsar.ConsumerType.Shared)
    c1.close()
    c2 = client.subscribe(topic, "ex", consumer_type=pulsar.ConsumerType.Exclusive)
    c2.close()


def test_cumulative_ack_on_exclusive(client: pulsar.Client) -> None:
    topic = topic_name()
    consumer = client.subscribe(topic, "cum", initial_position=EARLIEST)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(str(i).encode())
    msgs = [consumer.receive(10_000) for _ in range(10)]
    consumer.acknowledge_cumulative(msgs[6])
    consumer.close()
    # the first seven are gone for good; the rest come back to a new consumer
    consumer = client.subscribe(topic, "cum", initial_position=EARLIEST)
    assert [m.data() for m in drain(consumer)] == [b"7", b"8", b"9"]
    consumer.close()
    producer.close()


def test_cumulative_ack_refused_on_shared(client: pulsar.Client) -> None:
    topic = topic_name()
    consumer = client.subscribe(topic, "sh", consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST)
    producer = client.create_producer(topic)
    producer.send(b"x")
    msg = consumer.receive(10_000)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(msg)
    consumer.acknowledge(msg)
    consumer.close()
    producer.close()


def test_shared_round_robin_spreads_messages(client: pulsar.Client) -> None:
    topic = topic_name()
    consumers = [
        client.subscribe(topic, "rr", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10,
                         consumer_name=f"c{i}", initial_position=EARLIEST)
        for i in range(3)
    ]
    producer = client.create_producer(topic, batching_enabled=False)
    n = 90
    for i in range(n):
        producer.send(str(i).encode())
    counts: dict[int, int] = collections.Counter()
    seen: set[bytes] = set()
    lock = threading.Lock()

    def run(idx: int) -> None:
        for m in drain(consumers[idx], timeout_ms=1000):
            with lock:
                counts[idx] += 1
                seen.add(m.data())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == n
    assert sum(counts.values()) == n
    assert all(counts[i] > 0 for i in range(3)), counts
    for c in consumers:
        c.close()
    producer.close()


def test_shared_unacked_messages_of_closed_consumer_go_to_others(client: pulsar.Client) -> None:
    topic = topic_name()
    producer = client.create_producer(topic, batching_enabled=False)
    c1 = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST)
    for i in range(5):
        producer.send(str(i).encode())
    got = [c1.receive(10_000) for _ in range(5)]
    c1.acknowledge(got[0])
    c1.close()
    c2 = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    assert sorted(m.data() for m in drain(c2, 1000)) == [b"1", b"2", b"3", b"4"]
    c2.close()
    producer.close()


def test_failover_active_consumer_and_handover(client: pulsar.Client) -> None:
    topic = topic_name()
    # consumer names decide who is active: "a-..." sorts first
    a = client.subscribe(topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a-first",
                         initial_position=EARLIEST)
    b = client.subscribe(topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b-second",
                         initial_position=EARLIEST)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m{i}".encode())
    got_a = drain(a, 1000)
    assert [m.data() for m in got_a] == [f"m{i}".encode() for i in range(5)]
    with pytest.raises(pulsar.Timeout):
        b.receive(timeout_millis=300)
    for i in range(5, 8):
        producer.send(f"m{i}".encode())
    # a takes the next messages but acks none of them, then dies
    unacked = [a.receive(10_000) for _ in range(3)]
    assert [m.data() for m in unacked] == [b"m5", b"m6", b"m7"]
    a.close()
    got_b = drain(b, 1000)
    assert [m.data() for m in got_b] == [b"m5", b"m6", b"m7"]
    producer.send(b"m8")
    assert b.receive(10_000).data() == b"m8"
    b.close()
    producer.close()


def test_key_shared_three_consumers_keep_per_key_order(client: pulsar.Client) -> None:
    topic = topic_name()
    consumers = [
        client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"k{i}",
                         initial_position=EARLIEST, receiver_queue_size=50)
        for i in range(3)
    ]
    producer = client.create_producer(topic, batching_enabled=True, batching_type=pulsar.BatchingType.KeyBased,
                                      block_if_queue_full=True)
    keys = [f"key-{k}" for k in range(30)]
    n_per_key = 40
    for i in range(n_per_key):
        for k in keys:
            producer.send_async(f"{k}:{i}".encode(), lambda r, m: None, partition_key=k)
    producer.flush()
    received: dict[int, list[tuple[str, int]]] = {i: [] for i in range(3)}

    def run(idx: int) -> None:
        for m in drain(consumers[idx], timeout_ms=1500):
            k, i = m.data().decode().split(":")
            assert m.partition_key() == k
            received[idx].append((k, int(i)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(len(v) for v in received.values())
    assert total == len(keys) * n_per_key
    owner: dict[str, int] = {}
    for idx, items in received.items():
        per_key: dict[str, list[int]] = collections.defaultdict(list)
        for k, i in items:
            assert owner.setdefault(k, idx) == idx, f"key {k} went to two consumers"
            per_key[k].append(i)
        for k, seq in per_key.items():
            assert seq == sorted(seq), f"key {k} out of order on consumer {idx}"
    assert len({owner[k] for k in keys}) == 3, "keys should spread over all three consumers"
    for c in consumers:
        c.close()
    producer.close()


def test_key_shared_sticky_ranges(client: pulsar.Client) -> None:
    topic = topic_name()
    low = client.subscribe(topic, "sticky", consumer_type=pulsar.ConsumerType.KeyShared,
                           key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                               pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 32767)]),
                           initial_position=EARLIEST)
    high = client.subscribe(topic, "sticky", consumer_type=pulsar.ConsumerType.KeyShared,
                            key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                                pulsar.KeySharedMode.Sticky, sticky_ranges=[(32768, 65535)]),
                            initial_position=EARLIEST)
    with pytest.raises(pulsar.PulsarException):
        client.subscribe(topic, "sticky", consumer_type=pulsar.ConsumerType.KeyShared,
                         key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                             pulsar.KeySharedMode.Sticky, sticky_ranges=[(100, 200)]))
    from letterbox.broker.topics.key_shared import sticky_key_hash

    producer = client.create_producer(topic, batching_enabled=False)
    keys = [f"k{i}" for i in range(40)]
    for k in keys:
        producer.send(k.encode(), partition_key=k)
    got_low = {m.data().decode() for m in drain(low, 1000)}
    got_high = {m.data().decode() for m in drain(high, 1000)}
    assert got_low | got_high == set(keys)
    assert got_low == {k for k in keys if sticky_key_hash(k.encode()) <= 32767}
    for c in (low, high):
        c.close()
    producer.close()


def test_unsubscribe_removes_subscription(client: pulsar.Client) -> None:
    topic = topic_name()
    producer = client.create_producer(topic, batching_enabled=False)
    c = client.subscribe(topic, "gone", initial_position=EARLIEST)
    producer.send(b"1")
    c.unsubscribe()
    producer.send(b"2")
    c = client.subscribe(topic, "gone", initial_position=pulsar.InitialPosition.Latest)
    producer.send(b"3")
    assert [m.data() for m in drain(c)] == [b"3"]
    c.close()
    producer.close()


def test_redeliver_unacknowledged_messages(client: pulsar.Client) -> None:
    topic = topic_name()
    c = client.subscribe(topic, "redeliver", initial_position=EARLIEST, consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(str(i).encode())
    first = [c.receive(10_000) for _ in range(3)]
    c.acknowledge(first[1])
    c.redeliver_unacknowledged_messages()
    again = drain(c, 1000)
    assert sorted(m.data() for m in again) == [b"0", b"2"]
    c.close()
    producer.close()


def test_key_shared_new_consumer_waits_for_older_messages(client: pulsar.Client) -> None:
    topic = topic_name()
    producer = client.create_producer(topic, batching_enabled=False)
    a = client.subscribe(topic, "ksj", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="a",
                         initial_position=EARLIEST)
    keys = [f"k{i}" for i in range(10)]
    for k in keys:
        producer.send(f"{k}:0".encode(), partition_key=k)
    held = [a.receive(10_000) for _ in keys]  # a holds every key's first message, unacked
    b = client.subscribe(topic, "ksj", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="b")
    for k in keys:
        producer.send(f"{k}:1".encode(), partition_key=k)
    # b owns some keys now, but their second messages must wait behind a's unacked firsts
    with pytest.raises(pulsar.Timeout):
        b.receive(timeout_millis=500)
    assert len(held) == len(keys)
    a.close()  # a dies without acking: everything is b's, oldest first
    order: dict[str, list[int]] = collections.defaultdict(list)
    for m in drain(b, 1000):
        k, i = m.data().decode().split(":")
        order[k].append(int(i))
    assert set(order) == set(keys)
    for k in keys:
        assert order[k][:1] == [0], f"{k}: {order[k]}"
        assert order[k] == sorted(order[k])
        assert order[k][-1] == 1
    b.close()
    producer.close()
