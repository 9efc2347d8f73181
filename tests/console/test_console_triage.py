"""The console where failures are triaged, in headless Chromium against a real broker: the landing
page's summary of what is failing (three dead letter topics, poison suspects, a parked key, a
running redrive) with links to each, the poison-suspects view, the failure description and
millisecond times in the DLQ list with ids, keys and times on one line, the detail page in triage
order (failure on top, attempts first, raw properties last and collapsed, epochs as times), and
the subscription page's links to its dead letter and retry topics. Each view is saved as a
screenshot (conftest.shot)."""
from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pulsar
import pytest

from tests.conftest import BrokerProcess, _quiet_logger, wait_until
from tests.console.browser import Browser
from tests.console.dead_letters import live_dead_letters, make_dead_letters, rest_path
from tests.console.test_console_dead_letters import DOCS_IMAGES, dlq_hash, open_page
from tests.security.http import call

T = "persistent://public/default/"
SUB = "billing"
TIME_MS = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z")
Shot = Callable[[str], Path]


def unique(stem: str) -> str:
    return f"{T}{stem}-{uuid.uuid4().hex[:6]}"


def park_one_key(client: pulsar.Client, topic: str) -> str:
    """Failover with the ordered quarantine: A1 always fails and dies, A2 is parked behind it, B1
    flows. Returns the DLQ, which then holds A1 (max-redeliveries) and A2 (parked-behind)."""
    consumer = client.subscribe(topic, "ledger", consumer_type=pulsar.ConsumerType.Failover,
                                properties={"letterbox.dlq.max_redeliveries": "1",
                                            "letterbox.dlq.on_key_failure": "park"},
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    for body, key in (("A1", "A"), ("A2", "A"), ("B1", "B")):
        producer.send(body.encode(), partition_key=key)
    producer.close()
    while True:
        try:
            msg = consumer.receive(2000)
        except pulsar.Timeout:
            break
        if msg.data() == b"A1":
            consumer.negative_acknowledge(msg)
        else:
            consumer.acknowledge(msg)
    consumer.close()
    return f"{topic}-ledger-DLQ"


def make_suspects(client: pulsar.Client, topic: str, sub: str, n: int) -> None:
    """n messages nacked until each was redelivered 4 times of the 6 its policy allows (a suspect
    is redelivered more than half of them); then the consumer leaves, the messages stay."""
    consumer = client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared,
                                properties={"letterbox.dlq.max_redeliveries": "6"},
                                initial_position=pulsar.InitialPosition.Earliest,
                                negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        producer.send(f"parcel {i}".encode())
    producer.close()
    done: set[bytes] = set()
    while len(done) < n:
        msg = consumer.receive(10_000)
        if msg.redelivery_count() >= 4:
            done.add(msg.data())
        else:
            consumer.negative_acknowledge(msg)
    consumer.close()


def number(page: Browser, selector: str) -> int:
    return int(page.text_of(selector).replace(",", ""))


def test_landing_page_counts_three_dlqs_suspects_parked_keys_and_redrives(
        page: Browser, broker_factory: Callable[..., BrokerProcess], shot: Shot) -> None:
    b = broker_factory()
    client = pulsar.Client(b.url, operation_timeout_seconds=10, logger=_quiet_logger())
    try:
        orders = make_dead_letters(client, b.admin_url, unique("orders"), SUB, nacked=4, terminated=0)
        payments = make_dead_letters(client, b.admin_url, unique("payments"), SUB, nacked=2, terminated=1)
        ledger = park_one_key(client, unique("ledger"))
        shipping = unique("shipping")
        make_suspects(client, shipping, "ship", 2)
    finally:
        client.close()
    expected = {orders: 4, payments: 3, ledger: 2}
    assert wait_until(lambda: {d: len(live_dead_letters(b.admin_url, d)) for d in expected} == expected)

    open_page(page, b, "#/")
    page.wait_text("#sum-dead-letters", "9")
    assert number(page, "#sum-dlqs") == 3
    assert number(page, "#sum-suspects") == 2
    assert number(page, "#sum-parked") == 1
    assert number(page, "#sum-redrives") == 0
    rows = page.css("#failing-dlqs tr.failing-dlq")
    assert {r.get_attribute("data-topic"): int(r.find_element("css selector", "td.live").text) for r in rows} == expected
    # largest first, each with its reasons, the last hour's count, and the newest time to the ms
    assert rows[0].get_attribute("data-topic") == orders
    payments_row = page.one(f"tr.failing-dlq[data-topic='{payments}']")
    assert "schema check failed (1)" in payments_row.text and "terminated: 1" in payments_row.text
    assert TIME_MS.search(payments_row.find_element("css selector", "td.time").text)
    assert sum(int(x.get_attribute("data-count")) for x in payments_row.find_elements("css selector", "svg.spark rect")) == 3
    ledger_row = page.one(f"tr.failing-dlq[data-topic='{ledger}']")
    assert "parked-behind: 1" in ledger_row.text and "max-redeliveries: 1" in ledger_row.text
    parked = page.one("#failing-parked tr.failing-parked")
    assert "ledger" in parked.text and parked.find_elements("css selector", "td")[3].text == "A"
    suspects = page.one("#failing-suspects tr.failing-suspect")
    assert "ship" in suspects.text and "2" in suspects.text
    landing = shot("landing")
    if os.environ.get("LETTERBOX_UPDATE_SCREENSHOTS") == "1":  # the picture in docs/console.md
        shutil.copyfile(landing, DOCS_IMAGES / "console-landing.png")

    # a redrive running on one of them shows up on a refresh
    status, _, task = call(b.admin_url, "POST", rest_path(orders) + "/letterbox/redrive",
                           {"background": True, "ratePerSecond": 1})
    assert status == 202, task
    try:
        page.one("#failing-refresh").click()
        page.wait_text("#sum-redrives", "1")
        assert page.one(f"tr.failing-redrive[data-task='{task['taskId']}']").text.startswith(
            orders.removeprefix("persistent://"))
    finally:
        call(b.admin_url, "DELETE", f"{rest_path(orders)}/letterbox/redrive/{task['taskId']}")

    # each row links to where it is triaged: the poison suspects of the subscription ...
    suspects = page.one("#failing-suspects tr.failing-suspect")
    suspects.find_element("css selector", "a.poison-link").click()
    page.wait_text("#suspect-count", "2")
    assert page.text_of("#suspect-max") == "6"
    listed = page.css("#suspects tr.suspect")
    status, _, answer = call(b.admin_url, "GET", f"{rest_path(shipping)}/subscription/ship/letterbox/poison-suspects")
    assert status == 200 and len(listed) == len(answer["suspects"]) == 2
    for row, suspect in zip(listed, answer["suspects"], strict=True):
        cells = [c.text for c in row.find_elements("css selector", "td")]
        assert cells[0] == suspect["messageId"] and suspect["redeliveryCount"] >= 4, (cells, suspect)
        assert cells[1] == f"{suspect['deliveryCount']} of 7", cells  # the 7th delivery is its last
        assert TIME_MS.fullmatch(cells[2]) and TIME_MS.fullmatch(cells[3]), cells
    shot("poison-suspects")
    # ... and the dead letter topic
    page.driver.back()
    page.one(f"tr.failing-dlq[data-topic='{payments}'] a.dlq-link").click()
    page.wait_text("#list-count", "of 3")


def test_poison_view_of_a_subscription_without_suspects_says_so(page: Browser, broker: BrokerProcess,
                                                                client: pulsar.Client, shot: Shot) -> None:
    topic = unique("calm")
    client.subscribe(topic, "quiet", properties={"letterbox.dlq.max_redeliveries": "3"}).close()
    open_page(page, broker, f"#/poison/public/default/{topic.rsplit('/', 1)[1]}/quiet")
    page.wait_text("#no-suspects", "No poison suspects right now")
    assert page.text_of("#suspect-count") == "0" and page.text_of("#suspect-max") == "3"


def test_dlq_lists_show_the_failure_and_keep_ids_keys_and_times_on_one_line(
        page: Browser, broker: BrokerProcess, client: pulsar.Client, shot: Shot) -> None:
    dlq = make_dead_letters(client, broker.admin_url, unique("narrow"), SUB, nacked=3, terminated=2)
    # the namespace's list of dead letter topics names the most frequent failure too
    open_page(page, broker, "#/ns/public/default")
    assert "schema check failed (2)" in page.one(f"#namespace-dlqs tr[data-topic='{dlq}']").text
    size = page.driver.get_window_size()
    widths = """const cells = [...arguments[0].querySelectorAll('td')];
                return cells.map((td) => Math.round(td.getBoundingClientRect().width));"""
    overflow = "const t = document.getElementById('dead-letters'); return t.scrollWidth - t.parentElement.clientWidth;"
    try:
        page.driver.set_window_size(1300, 900)  # whatever may wrap at this width, wraps
        open_page(page, broker, dlq_hash(dlq))
        page.wait_text("#list-count", "of 5")
        rows = page.css("#dead-letters tbody tr.dl")
        by_reason = {r.get_attribute("data-reason"): r for r in rows}
        failure = by_reason["terminated"].find_element("css selector", "td.description").text
        assert failure == "schema check failed", failure
        assert by_reason["max-redeliveries"].find_element("css selector", "td.description").text == "\u2013"  # an en dash: none given
        lines = """const td = arguments[0], r = document.createRange(); r.selectNodeContents(td);
                   return new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size;"""
        for row in rows:
            times = row.find_elements("css selector", "td.time")
            assert len(times) == 1 and all(TIME_MS.fullmatch(t.text) for t in times), [t.text for t in times]
            for cell in [*times, *row.find_elements("css selector", "td.id, td.key")]:
                assert page.driver.execute_script(lines, cell) == 1, cell.text
        assert page.driver.execute_script(overflow) <= 0  # the list fits: the payload gave way
        narrow = page.driver.execute_script(widths, rows[0])
        shot("dlq-list")
        page.driver.set_window_size(1700, 900)
        page.wait(lambda: page.driver.execute_script(widths, page.css("#dead-letters tbody tr.dl")[0]) != narrow,
                  what="the list to take the new width")
        wide = page.driver.execute_script(widths, page.css("#dead-letters tbody tr.dl")[0])
        # the 400 px more all went to the payload column; ids, keys and times kept their width
        assert wide[-1] - narrow[-1] >= 300 and wide[1:3] == narrow[1:3] and wide[5] == narrow[5], (narrow, wide)
    finally:
        page.driver.set_window_size(size["width"], size["height"])


def test_detail_page_puts_the_failure_first_and_raw_properties_last(page: Browser, broker: BrokerProcess,
                                                                    client: pulsar.Client, shot: Shot) -> None:
    """A dead letter whose three attempts all fell within one second, its client's description
    (FAILURE_DESCRIPTION) next to the broker's (DEAD_LETTER_DESCRIPTION): the client's is shown."""
    start = 1795876624000  # 2026-11-28 14:37:04.000 UTC
    attempts = [{"deliveredAt": start + ms, "endedAt": start + ms + 50, "consumer": "worker-1",
                 "address": "127.0.0.1:5000", "ending": "nack", "reason": "gateway timeout"}
                for ms in (101, 402, 873)]
    dlq = unique("gateway") + "-billing-DLQ"
    producer = client.create_producer(dlq, batching_enabled=False)
    producer.send(b'{"charge": 42}', partition_key="card-7", properties={
        "DEAD_LETTER_REASON": "max-redeliveries", "DEAD_LETTER_TIME": str(start + 950),
        "FAILURE_DESCRIPTION": "payment gateway timeout after 30s",
        "DEAD_LETTER_DESCRIPTION": "max redeliveries (2) reached", "DELIVERY_COUNT": "3",
        "ORIGIN_PUBLISH_TIME": str(start - 5000), "REAL_TOPIC": dlq.removesuffix("-billing-DLQ"),
        "DELIVERY_ATTEMPTS": json.dumps(attempts)})
    producer.close()
    open_page(page, broker, dlq_hash(dlq))
    row = page.one("#dead-letters tbody tr.dl")
    assert row.find_element("css selector", "td.description").text == "payment gateway timeout after 30s"
    assert "2026-11-28 14:37:04.950Z" in row.text
    row.find_element("css selector", "a.msg-link").click()

    assert page.wait_text("#failure-description", "payment gateway") == "payment gateway timeout after 30s"
    assert page.text_of("#failure-reason") == "max-redeliveries"
    fields = page.text_of("#message-fields")
    assert "failure description payment gateway timeout after 30s" in fields
    assert "first published 2026-11-28 14:36:59.000Z" in fields
    delivered = [r.find_elements("css selector", "td")[1].text
                 for r in page.wait(lambda: page.css("#attempts tr.attempt"), what="the attempts")]
    assert delivered == ["2026-11-28 14:37:04.101Z", "2026-11-28 14:37:04.402Z", "2026-11-28 14:37:04.873Z"]
    order = page.driver.execute_script(
        "return [...document.querySelectorAll('#view table, #view pre, #view details')].map((e) => e.id);")
    assert order == ["message-fields", "attempts", "payload", "raw-properties", "message-properties"], order
    details = page.one("#raw-properties")
    assert details.get_attribute("open") is None and not page.one("#message-properties").is_displayed()
    shot("detail")
    details.find_element("css selector", "summary").click()
    props = page.text_of("#message-properties")
    assert f"ORIGIN_PUBLISH_TIME 2026-11-28 14:36:59.000Z ({start - 5000})" in props
    assert f"DEAD_LETTER_TIME 2026-11-28 14:37:04.950Z ({start + 950})" in props
    assert "DELIVERY_COUNT 3" in props  # a count, not an epoch


def test_subscription_page_links_to_its_dlq_and_retry_topic(page: Browser, broker: BrokerProcess,
                                                             client: pulsar.Client, shot: Shot) -> None:
    topic = unique("linked")
    dlq = make_dead_letters(client, broker.admin_url, topic, SUB, nacked=2, terminated=0)
    client.create_producer(f"{topic}-{SUB}-RETRY").close()  # the retry topic exists
    other = unique("unlinked")
    client.subscribe(other, SUB).close()
    local = topic.rsplit("/", 1)[1]
    open_page(page, broker, f"#/sub/public/default/{local}/{SUB}")
    link = page.one("#link-dlq a.dlq-link")
    assert link.text == f"{local}-{SUB}-DLQ" and "2 live dead letters" in page.text_of("#link-dlq")
    retry = page.one("#link-retry a.retry-link")
    assert retry.get_attribute("href").endswith(f"#/sub/public/default/{local}-{SUB}-RETRY/{SUB}")
    assert page.one("#link-poison a.poison-link").get_attribute("href").endswith(
        f"#/poison/public/default/{local}/{SUB}")
    shot("subscription")
    link.click()
    page.wait_text("#list-count", "of 2")
    assert dlq_hash(dlq) in page.driver.current_url
    # a subscription with neither names them without a link
    open_page(page, broker, f"#/sub/public/default/{other.rsplit('/', 1)[1]}/{SUB}")
    assert "none yet" in page.wait_text("#link-dlq", "DLQ") and not page.css("#link-dlq a")
    assert "none yet" in page.text_of("#link-retry") and not page.css("#link-retry a")


@pytest.mark.parametrize("fragment", ["#/", "#/tenants"])
def test_landing_and_tenant_list_load_without_errors(page: Browser, broker: BrokerProcess, fragment: str) -> None:
    open_page(page, broker, fragment)
    page.one("#failing-summary, #view table")
