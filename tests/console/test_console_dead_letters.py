"""The dead-letter console in headless Chromium against a real broker: browse tenants ->
namespace -> dead letter topic (made by nacking with the official pulsar-client and by
RetryConsumer.terminate), filter by reason, open a message, redrive with a confirmation and see
the source backlog come back, redrive a selected message, purge with a confirmation, the
subscription view. Every test fails on a JS error on the page (conftest.page)."""
from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pulsar
import pytest

from tests.conftest import BrokerProcess, wait_until
from tests.console.browser import Browser
from tests.console.dead_letters import backlog, live_dead_letters, make_dead_letters, rest_path
from tests.security.http import call

DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
SUB = "billing"


def images_dir(tmp_path: Path) -> Path:
    """docs/images when LETTERBOX_UPDATE_SCREENSHOTS=1 (regenerating the docs' pictures), else tmp."""
    return DOCS_IMAGES if os.environ.get("LETTERBOX_UPDATE_SCREENSHOTS") == "1" else tmp_path


def new_topic(stem: str) -> str:
    return f"persistent://public/default/{stem}-{uuid.uuid4().hex[:6]}"


def dlq_hash(dlq: str) -> str:
    return "#/dlq/public/default/" + dlq.rsplit("/", 1)[1]


def open_page(page: Browser, broker: BrokerProcess, fragment: str = "#/") -> None:
    """Load the console afresh (not just a new fragment of the open page) at `fragment`."""
    page.driver.get("about:blank")
    page.driver.get(f"{broker.admin_url}/{fragment}")


def confirm(page: Browser, expect: str, ok: bool = True) -> None:
    dialog = page.one("dialog#confirm[open]")
    page.wait(lambda: expect in dialog.text, what=f"{expect!r} in the confirmation dialog")
    page.one("#confirm-ok" if ok else "#confirm-cancel").click()
    page.wait(lambda: not page.css("dialog#confirm[open]"), what="the dialog to close")


def clear(page: Browser, selector: str) -> None:
    """Empty an input as a user does (select all, delete), so its input event fires."""
    from selenium.webdriver.common.keys import Keys

    page.one(selector).send_keys(Keys.CONTROL, "a")
    page.one(selector).send_keys(Keys.DELETE)


def check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, f"{path} is not a real screenshot"


def test_browse_to_dead_letter_topic_and_its_charts(page: Browser, broker: BrokerProcess, client: pulsar.Client,
                                                     tmp_path: Path) -> None:
    topic = new_topic("orders")
    dlq = make_dead_letters(client, broker.admin_url, topic, SUB, nacked=12, terminated=3)
    open_page(page, broker, "#/tenants")
    page.one("a[href='#/t/public']").click()
    page.one("a[href='#/ns/public/default']").click()
    short = dlq.rsplit("/", 1)[1]
    page.one(f"tr[data-topic='{dlq}'] a.dlq-link").click()
    page.wait_text("#live-count", "15")
    reason_chart = page.text_of("#chart-reason")
    assert "max-redeliveries" in reason_chart and "terminated" in reason_chart
    assert "12" in reason_chart and "3" in reason_chart
    assert "public/default/" + topic.rsplit("/", 1)[1] in page.text_of("#chart-source")
    # all 15 were dead-lettered within the last minutes: per-minute buckets summing to 15
    assert "per minute" in page.text_of("#chart-hour")
    counts = [int(b.get_attribute("data-count")) for b in page.css("#chart-hour rect.bar")]
    assert sum(counts) == 15 and len(counts) >= 12, counts
    rows = page.css("#dead-letters tbody tr.dl")
    assert len(rows) == 15, len(rows)
    assert page.text_of("#list-count").startswith("1 to 15 of 15")
    assert short in page.driver.current_url
    check_png(page.screenshot(images_dir(tmp_path) / "console-dead-letters.png"))


def test_filter_by_reason_search_and_message_detail(page: Browser, broker: BrokerProcess, client: pulsar.Client,
                                                    tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import Select

    dlq = make_dead_letters(client, broker.admin_url, new_topic("filter"), SUB, nacked=30, terminated=2)
    open_page(page, broker, dlq_hash(dlq))
    page.wait_text("#list-count", "of 32")
    # paginated: 25 a page
    assert len(page.css("#dead-letters tbody tr.dl")) == 25
    page.one("#page-next").click()
    page.wait(lambda: len(page.css("#dead-letters tbody tr.dl")) == 7, what="the second page")
    Select(page.one("#reason-filter")).select_by_value("terminated")
    page.wait_text("#list-count", "1 to 2 of 2")
    assert {r.get_attribute("data-reason") for r in page.css("#dead-letters tbody tr.dl")} == {"terminated"}
    Select(page.one("#reason-filter")).select_by_value("max-redeliveries")
    page.wait_text("#list-count", "of 30")
    page.one("#key-filter").send_keys("order-17")
    page.wait_text("#list-count", "1 to 1 of 1")
    clear(page, "#key-filter")
    page.one("#text-filter").send_keys("nacked 2")  # payload text: nacked 2, nacked 20..29
    page.wait_text("#list-count", "of 11")
    clear(page, "#text-filter")
    page.one("#key-filter").send_keys("order-7")
    page.wait_text("#list-count", "1 to 1 of 1")
    page.one("#dead-letters tbody tr.dl a.msg-link").click()

    fields = page.text_of("#message-fields")
    assert "order-7" in fields and "max-redeliveries" in fields and SUB in fields
    assert page.one("#payload").get_attribute("data-view") == "json"
    assert '"note": "nacked 7"' in page.text_of("#payload")
    # its two deliveries, each ended by a nack, from the attempt log (.../letterbox/attempts/...)
    attempts = page.wait(lambda: page.css("#attempts tr.attempt"), what="the attempt log")
    assert len(attempts) == 2 and all("nack" in a.text for a in attempts), [a.text for a in attempts]
    check_png(page.screenshot(images_dir(tmp_path) / "console-message.png"))
    page.one("#raw-properties summary").click()  # the raw properties come last, collapsed
    props = page.text_of("#message-properties")
    assert "DEAD_LETTER_REASON" in props and "shop north" in props
    page.one("#payload-hex").click()
    page.wait_text("#payload", "00000000  7b 22")  # {"
    # a terminated, non-JSON message opens as text, its description shown
    page.driver.back()  # the list keeps its filters
    assert page.one("#key-filter").get_attribute("value") == "order-7"
    page.wait_text("#list-count", "1 to 1 of 1")
    Select(page.one("#reason-filter")).select_by_value("terminated")
    clear(page, "#key-filter")
    page.wait_text("#list-count", "of 2")
    page.one("#key-filter").send_keys("bad-1")
    page.wait_text("#list-count", "1 to 1 of 1")
    page.one("#dead-letters tbody tr.dl a.msg-link").click()
    page.wait_text("#message-fields", "schema check failed")
    assert page.one("#payload").get_attribute("data-view") == "text"
    assert "bad record 1" in page.text_of("#payload")


def test_redrive_filtered_with_confirmation_brings_the_backlog_back(page: Browser, broker: BrokerProcess,
                                                                    client: pulsar.Client) -> None:
    from selenium.webdriver.support.ui import Select

    topic = new_topic("redrive")
    dlq = make_dead_letters(client, broker.admin_url, topic, SUB, nacked=8, terminated=2)
    assert backlog(broker.admin_url, topic, SUB) == 0
    open_page(page, broker, dlq_hash(dlq))
    Select(page.one("#reason-filter")).select_by_value("max-redeliveries")
    page.wait_text("#list-count", "of 8")
    page.one("#redrive-filtered").click()
    confirm(page, "Redrive 8 message(s)", ok=False)  # cancelled: nothing moves
    assert len(live_dead_letters(broker.admin_url, dlq)) == 10
    page.one("#redrive-filtered").click()
    confirm(page, "Redrive 8 message(s)")
    page.wait_text("#redrive-status", "Redrive finished: 8 moved")
    assert wait_until(lambda: backlog(broker.admin_url, topic, SUB) == 8), backlog(broker.admin_url, topic, SUB)
    page.wait_text("#live-count", "2")
    left = live_dead_letters(broker.admin_url, dlq)
    assert {m["properties"]["DEAD_LETTER_REASON"] for m in left} == {"terminated"} and len(left) == 2
    # the source topic's backlog, as the console's topic list and subscription view show it
    open_page(page, broker, "#/ns/public/default")
    row = page.one(f"tr[data-topic='{topic}']")
    page.wait(lambda: row.find_element("css selector", "td.backlog").text == "8", what="backlog 8 in the topic list")
    row.find_element("css selector", "a.sub-link").click()
    page.wait_text("#sub-backlog", "8")
    page.wait(lambda: page.css("#chart-backlog path.line"), what="the backlog line")
    # the redriven messages come back to a consumer of the source subscription
    consumer = client.subscribe(topic, SUB, consumer_type=pulsar.ConsumerType.Shared)
    got = {consumer.receive(10_000).partition_key() for _ in range(8)}
    consumer.close()
    assert got == {f"order-{i}" for i in range(8)}


def test_redrive_selected_message_and_from_its_detail(page: Browser, broker: BrokerProcess,
                                                      client: pulsar.Client) -> None:
    topic = new_topic("selected")
    dlq = make_dead_letters(client, broker.admin_url, topic, SUB, nacked=5, terminated=0)
    open_page(page, broker, dlq_hash(dlq))
    page.wait_text("#list-count", "of 5")
    rows = page.css("#dead-letters tbody tr.dl")
    chosen = {rows[1].get_attribute("data-id"), rows[3].get_attribute("data-id")}
    rows[1].find_element("css selector", "input.select").click()
    page.css("#dead-letters tbody tr.dl")[3].find_element("css selector", "input.select").click()
    page.wait_text("#redrive-selected", "(2)")
    page.one("#redrive-selected").click()
    confirm(page, "Redrive 2 message(s)")
    page.wait_text("#redrive-status", "finished: 2 moved")
    page.wait_text("#list-count", "of 3")
    left = {m["messageId"] for m in live_dead_letters(broker.admin_url, dlq)}
    assert len(left) == 3 and not (left & chosen)
    assert wait_until(lambda: backlog(broker.admin_url, topic, SUB) == 2)
    # one more from the message's own page
    page.one("#dead-letters tbody tr.dl a.msg-link").click()
    page.one("#redrive-one").click()
    confirm(page, "Redrive 1 message(s)")
    page.wait_text("#redrive-status", "finished: 1 moved")
    assert len(live_dead_letters(broker.admin_url, dlq)) == 2
    assert wait_until(lambda: backlog(broker.admin_url, topic, SUB) == 3)


def test_live_progress_of_a_running_redrive_and_cancel(page: Browser, broker: BrokerProcess,
                                                        client: pulsar.Client) -> None:
    """A slow redrive started elsewhere (the API, as the CLI does) shows on the page with its
    progress moving; Cancel stops it and what moved stays moved."""
    topic = new_topic("slow")
    dlq = make_dead_letters(client, broker.admin_url, topic, SUB, nacked=40, terminated=0)
    status, _, task = call(broker.admin_url, "POST", rest_path(dlq) + "/letterbox/redrive",
                           {"background": True, "ratePerSecond": 4})
    assert status == 202 and task["state"] == "running", task
    open_page(page, broker, dlq_hash(dlq))
    page.one(f"#redrive-progress[data-task='{task['taskId']}']")
    first = page.wait_text("#redrive-status", "Redrive running")
    page.wait(lambda: page.text_of("#redrive-status") != first, timeout=20, what="the progress to move")
    page.one("#redrive-cancel").click()
    done = page.wait_text("#redrive-status", "Redrive cancelled")
    _, _, ended = call(broker.admin_url, "GET", f"{rest_path(dlq)}/letterbox/redrive/{task['taskId']}")
    assert ended["state"] == "cancelled" and 0 < ended["moved"] < 40, ended
    assert f"{ended['moved']} moved" in done
    assert wait_until(lambda: backlog(broker.admin_url, topic, SUB) == ended["moved"])
    assert len(live_dead_letters(broker.admin_url, dlq)) == 40 - ended["moved"]
    page.wait_text("#list-count", f"of {40 - ended['moved']}")


def test_purge_with_confirmation(page: Browser, broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = new_topic("purge")
    dlq = make_dead_letters(client, broker.admin_url, topic, SUB, nacked=4, terminated=2)
    open_page(page, broker, dlq_hash(dlq))
    page.wait_text("#list-count", "of 6")
    page.one("#purge-filtered").click()
    confirm(page, "Purge 6 message(s)", ok=False)
    assert len(live_dead_letters(broker.admin_url, dlq)) == 6
    # purge one message from its page, then the rest of one reason
    page.one("#dead-letters tbody tr.dl a.msg-link").click()
    page.one("#purge-one").click()
    confirm(page, "Purge 1 message(s)")
    page.wait_text("#list-count", "of 5")
    from selenium.webdriver.support.ui import Select

    Select(page.one("#reason-filter")).select_by_value("terminated")
    page.wait_text("#list-count", "of 2")
    page.one("#purge-filtered").click()
    confirm(page, "Purge 2 message(s)")
    page.wait_text("#list-count", "No live dead letters match")
    page.wait_text("#live-count", "3")
    Select(page.one("#reason-filter")).select_by_value("")
    page.wait_text("#list-count", "1 to 3 of 3")
    reasons = [m["properties"]["DEAD_LETTER_REASON"] for m in live_dead_letters(broker.admin_url, dlq)]
    assert reasons == ["max-redeliveries"] * 3
    assert backlog(broker.admin_url, topic, SUB) == 0  # a purge sends nothing back


def test_subscription_view_samples_backlog_and_redelivery_rate(page: Browser, broker: BrokerProcess,
                                                               client: pulsar.Client) -> None:
    topic = new_topic("busy")
    consumer = client.subscribe(topic, SUB, consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode())
    producer.close()
    stop = threading.Event()

    def nack_forever() -> None:  # a consumer that fails everything: redeliveries all the time
        while not stop.is_set():
            try:
                consumer.negative_acknowledge(consumer.receive(200))
            except pulsar.Timeout:
                continue

    worker = threading.Thread(target=nack_forever, daemon=True)
    worker.start()
    try:
        open_page(page, broker, f"#/sub/public/default/{topic.rsplit('/', 1)[1]}/{SUB}")
        page.wait_text("#sub-backlog", "20")
        page.wait(lambda: float(page.text_of("#sub-redeliver").replace(",", "")) > 0, timeout=20,
                  what="a redelivery rate above 0")
        assert "Shared" in page.text_of("#sub-type")
        assert page.css("#sub-consumers tbody tr"), "the nacking consumer is listed"
        # several samples drawn: the backlog line has more than one point
        page.wait(lambda: page.one("#chart-backlog path.line").get_attribute("d").count("L") >= 2, timeout=20,
                  what="three backlog samples")
        assert page.css("#chart-redeliver path.line")
    finally:
        stop.set()
        worker.join(5)
        consumer.close()


def test_payloads_keys_and_properties_are_shown_as_text_never_markup(page: Browser, broker: BrokerProcess,
                                                                     client: pulsar.Client) -> None:
    topic = new_topic("markup")
    evil = '<img src=x onerror="window.__pwned = 1"><b>bold</b>'
    consumer = client.subscribe(topic, SUB, properties={"letterbox.dlq.max_redeliveries": "1"},
                                consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=20)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(evil.encode(), partition_key=evil, properties={"note": evil})
    producer.close()
    for _ in range(2):
        consumer.negative_acknowledge(consumer.receive(10_000))
    consumer.close()
    dlq = f"{topic}-{SUB}-DLQ"
    assert wait_until(lambda: len(live_dead_letters(broker.admin_url, dlq)) == 1)
    open_page(page, broker, dlq_hash(dlq))
    row = page.one("#dead-letters tbody tr.dl")
    assert evil in row.text
    row.find_element("css selector", "a.msg-link").click()
    page.wait_text("#payload", evil)
    page.one("#raw-properties summary").click()
    assert evil in page.text_of("#message-fields") and evil in page.text_of("#message-properties")
    assert not page.css("#view img, #view b")
    assert page.driver.execute_script("return window.__pwned === undefined")


def test_unknown_page_and_missing_topic_show_readable_errors(page: Browser, broker: BrokerProcess) -> None:
    page.allowed_errors = ("status of 404",)  # type: ignore[attr-defined]
    open_page(page, broker, "#/nowhere")
    page.wait_text(".page, main", "No such page")
    open_page(page, broker, "#/dlq/public/default/no-such-topic-DLQ")
    text = page.wait_text(".error", "404")
    assert "no-such-topic-DLQ" in text or "does not exist" in text.lower()


@pytest.mark.parametrize("name", ["console-dead-letters.png", "console-message.png", "console-landing.png"])
def test_docs_screenshots_are_committed_and_linked(name: str) -> None:
    check_png(DOCS_IMAGES / name)
    assert f"images/{name}" in (DOCS_IMAGES.parent / "console.md").read_text()


def test_the_console_log_check_sees_javascript_errors(browser: Browser, broker: BrokerProcess) -> None:
    """The check every test ends with (conftest.page) is not blind: an uncaught error in the page
    shows up in what it reads."""
    open_page(browser, broker)
    browser.one("#failing-summary, #view .error")
    browser.errors()
    browser.driver.execute_script("setTimeout(() => { throw new Error('planted console failure'); }, 0)")
    found = browser.wait(lambda: [e for e in browser.errors() if "planted console failure" in e],
                         what="the planted error in the browser log")
    assert found[0].startswith("[javascript]"), found
