"""The console's failure groups section in headless Chromium against a real broker: a DLQ of two
failure causes shows two groups (counts, normalised text, stacked bars over time), and a group's
Redrive button moves exactly that group. Fails on any JS error on the page (conftest.page)."""
from __future__ import annotations

import json
import uuid
from typing import Any

from letterbox.message_properties import (
    DEAD_LETTER_REASON,
    DEAD_LETTER_TIME,
    FAILURE_DESCRIPTION,
    REAL_TOPIC,
)
from tests.conftest import BrokerProcess
from tests.console.browser import Browser
from tests.console.dead_letters import live_dead_letters
from tests.console.test_console_dead_letters import confirm, dlq_hash, open_page

T0 = 1_790_000_000_000


def test_groups_first_with_bars_and_a_group_redrive(page: Browser, broker: BrokerProcess, client: Any) -> None:
    dlq = f"persistent://public/default/cg-{uuid.uuid4().hex[:6]}-sub-DLQ"
    producer = client.create_producer(dlq, batching_enabled=False)
    for i in range(9):
        props = ({DEAD_LETTER_REASON: "max-redeliveries", FAILURE_DESCRIPTION: f"timeout after {i}s"} if i < 6
                 else {DEAD_LETTER_REASON: "terminated", FAILURE_DESCRIPTION: f"bad field 'f{i}'"})
        props |= {REAL_TOPIC: dlq.replace("-sub-DLQ", ""), DEAD_LETTER_TIME: str(T0 + i * 600_000)}
        producer.send(json.dumps({"i": i}).encode(), properties=props)
    producer.close()

    open_page(page, broker, dlq_hash(dlq))
    page.wait(lambda: len(page.css("#groups-table tbody tr")) == 2, what="two failure groups")
    counts = [c.text for c in page.css("#groups-table .group-count")]
    assert counts == ["6", "3"]
    text = page.text_of("#dlq-groups")
    assert "timeout after <n>s" in text and "bad field <q>" in text
    # the sections come groups first
    assert page.driver.execute_script(
        "return document.getElementById('dlq-groups').compareDocumentPosition("
        "document.getElementById('dlq-charts')) & Node.DOCUMENT_POSITION_FOLLOWING") != 0
    bars = page.css("#groups-chart rect.group-bar")
    assert sum(int(b.get_attribute("data-count")) for b in bars) == 9
    assert len({b.get_attribute("data-group") for b in bars}) == 2

    page.css("#groups-table .group-redrive")[1].click()
    confirm(page, "Redrive 3 message(s)")
    page.wait(lambda: len(page.css("#groups-table tbody tr")) == 1, what="one group left")
    left = live_dead_letters(broker.admin_url, dlq)
    assert sorted(json.loads(m["payloadText"])["i"] for m in left) == [0, 1, 2, 3, 4, 5]


def test_detail_view_shows_the_edits_of_a_message(page: Browser, broker: BrokerProcess, client: Any) -> None:
    """A message redriven with an edit and dead-lettered again: its detail view lists the edit."""
    import hashlib

    from letterbox.failure.edits import MessageEdit, edit_log
    from letterbox.message_properties import EDIT_LOG

    dlq = f"persistent://public/default/ce-{uuid.uuid4().hex[:6]}-sub-DLQ"
    log = edit_log(None, by="ops-team", at_ms=T0, old=b'{"amount":"x"}', new=b'{"amount":1}',
                   original="7:3:-1:-1", edit=MessageEdit(payload=b'{"amount":1}'))
    producer = client.create_producer(dlq, batching_enabled=False)
    mid = producer.send(b'{"amount":1}', properties={DEAD_LETTER_REASON: "terminated", EDIT_LOG: log})
    producer.close()
    open_page(page, broker, dlq_hash(dlq).replace("#/dlq/", "#/msg/") + f"/{mid.ledger_id()}:{mid.entry_id()}:-1:-1")
    row = page.wait_text("#edits tr.edit", "ops-team")
    assert hashlib.sha256(b'{"amount":"x"}').hexdigest() in row and "7:3:-1:-1" in row and "payload" in row
