"""GET .../namespaces/{t}/{ns}/letterbox/failing, the console's landing summary, on the broker's
manual clock: the live dead letters of a DLQ counted for the last hour and day and in the last
hour's 5-minute trend buckets, each at the broker time it was dead-lettered; its failure texts;
an unknown namespace is 404."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from letterbox.testing import Broker, BrokerClock
from letterbox.testing.broker import AdminCallError
from tests.conftest import wait_until

NS = "/admin/v2/namespaces/public/default"
P = "/admin/v2/persistent/public/default"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(clock="manual") as b:
        yield b


def live(broker: Broker) -> int:
    try:
        return len(broker.admin("GET", P + "/src-s-DLQ/letterbox/deadLetters?limit=100"))
    except AdminCallError as exc:  # no dead letter topic yet
        assert exc.status == 404, exc
        return 0


def dead_letter(broker: Broker, n: int) -> None:
    """n messages on `src`, expired into src-s-DLQ one minute (of the broker's clock) later;
    returns once the broker lists them (the expiry moves them in the background)."""
    before = live(broker)
    client = broker.client()
    producer = client.create_producer("persistent://public/default/src", batching_enabled=False)
    for i in range(n):
        producer.send(f"m{i}".encode())
    producer.close()
    # older than 0 s: the producer stamped its wall time, the manual clock stood still meanwhile
    BrokerClock(broker).advance(timedelta(minutes=1))
    broker.admin("POST", P + "/src/subscription/s/expireMessages/0")
    assert wait_until(lambda: live(broker) == before + n), live(broker)


def dlq_of(answer: dict[str, object]) -> dict[str, object]:
    found = [d for d in answer["deadLetterTopics"] if d["topic"].endswith("/src-s-DLQ")]  # type: ignore[attr-defined,index]
    assert len(found) == 1, answer
    return found[0]  # type: ignore[no-any-return]


def test_counts_and_trend_follow_the_broker_clock(broker: Broker) -> None:
    clock = BrokerClock(broker)
    broker.admin("POST", NS + "/letterbox/deadLetterPolicy", {"maxRedeliverCount": 5})
    broker.admin("PUT", P + "/src")
    broker.admin("PUT", P + "/src/subscription/s", {"ledgerId": -1, "entryId": -1})
    dead_letter(broker, 2)
    clock.advance(timedelta(minutes=29))
    dead_letter(broker, 3)

    answer = broker.admin("GET", NS + "/letterbox/failing")
    assert answer["now"] == clock.now_ms() and answer["namespace"] == "public/default"
    dlq = dlq_of(answer)
    assert (dlq["messages"], dlq["lastHour"], dlq["lastDay"], dlq["byReason"]) == (5, 5, 5, {"expired": 5})
    trend = dlq["trend"]
    assert trend["bucketMs"] == 300_000 and trend["endsAt"] == answer["now"]
    # 30 minutes ago is the 6th of 12 five-minute buckets, now the last
    assert trend["counts"] == [0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 3], (trend, answer)
    assert dlq["newestDeadLetterTime"] == answer["now"]
    assert answer["poisonSuspects"] == [] and answer["parkedKeys"] == [] and answer["redriveTasks"] == []

    clock.advance(timedelta(hours=2))
    dlq = dlq_of(broker.admin("GET", NS + "/letterbox/failing"))
    assert (dlq["messages"], dlq["lastHour"], dlq["lastDay"], sum(dlq["trend"]["counts"])) == (5, 0, 5, 0)


def test_an_unknown_namespace_is_404(broker: Broker) -> None:
    with pytest.raises(AdminCallError) as caught:
        broker.admin("GET", "/admin/v2/namespaces/public/nowhere/letterbox/failing")
    assert caught.value.status == 404 and "nowhere" in str(caught.value)
