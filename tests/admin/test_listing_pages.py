"""Dead-letter listings are paged by size (admin/listing_budget.py): a page holds at most
4 MiB of JSON, or one message when that message alone is larger; the Link rel="next" header
(and X-Letterbox-Next-After) leads to the next page, and following it lists every message
once, in order. Keys and properties longer than 1,024 characters are cut with a flag, and
one message, its key, a property or its payload are answered whole (byte-exact) by the
dead letter's own routes."""
from __future__ import annotations

import json
import os
import re
import urllib.parse
import uuid

import pulsar

from tests.admin.helpers import call, call_raw
from tests.conftest import BrokerProcess, _quiet_logger

PAGE_BYTES = 4 * 1024 * 1024


def _dlq() -> str:
    return f"persistent://public/default/pages-{uuid.uuid4().hex[:8]}-s-DLQ"


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://") + "/letterbox/deadLetters"


def _fill(broker: BrokerProcess, topic: str, payloads: list[bytes], **props: str) -> None:
    client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i, payload in enumerate(payloads):
            producer.send(payload, partition_key=f"k{i}", properties={"DEAD_LETTER_REASON": "terminated", **props})
    finally:
        client.close()


def _pages(broker: BrokerProcess, path: str) -> list[tuple[list[dict[str, object]], dict[str, str], int]]:
    out = []
    url: str | None = path
    while url is not None:
        status, headers, body = call_raw(broker.admin_url, "GET", url)
        assert status == 200, body[:200]
        out.append((json.loads(body), headers, len(body)))
        m = re.search(r'<([^>]+)>; rel="next"', headers.get("Link", ""))
        url = urllib.parse.urljoin(path, m.group(1)) if m else None
        assert len(out) < 20, "the pages never end"
    return out


def test_a_listing_is_paged_by_size_and_the_pages_list_every_message_once(broker: BrokerProcess) -> None:
    dlq = _dlq()
    big = os.urandom(4_200_000)  # alone larger than a page once in base64
    rest = [os.urandom(600_000) for _ in range(10)]  # ~800 KB of JSON each: five to a page
    _fill(broker, dlq, [big, *rest])
    pages = _pages(broker, _path(dlq) + "?limit=1000")
    assert [len(items) for items, _, _ in pages] == [1, 5, 5]
    assert all(size <= PAGE_BYTES for _, _, size in pages[1:]) and pages[0][2] > PAGE_BYTES
    listed = [item for items, _, _ in pages for item in items]
    assert [item["key"] for item in listed] == [f"k{i}" for i in range(11)]
    assert len({item["messageId"] for item in listed}) == 11
    for items, headers, _ in pages[:-1]:
        assert headers["X-Letterbox-Next-After"] == items[-1]["messageId"]
    assert "Link" not in pages[-1][1] and "X-Letterbox-Next-After" not in pages[-1][1]


def test_limit_and_after_page_by_count_and_a_wrong_after_is_refused(broker: BrokerProcess) -> None:
    dlq = _dlq()
    _fill(broker, dlq, [b"m%d" % i for i in range(5)])
    pages = _pages(broker, _path(dlq) + "?limit=2")
    assert [[item["payloadText"] for item in items] for items, _, _ in pages] == [["m0", "m1"], ["m2", "m3"], ["m4"]]
    status, body = call(broker.admin_url, "GET", _path(dlq) + "?after=12:x")
    assert status == 400 and "X-Letterbox-Next-After" in body["reason"], body


def test_long_values_are_cut_in_listings_and_answered_whole_by_their_routes(broker: BrokerProcess) -> None:
    dlq = _dlq()
    long_value = "v" * 50_000 + "é"
    payload = os.urandom(1000)
    _fill(broker, dlq, [payload], note=long_value)
    [item] = _pages(broker, _path(dlq))[0][0]
    assert item["truncated"] is True and item["truncatedFields"] == ["property:note"]
    assert item["properties"]["note"] == "v" * 1024 + "…"
    one = _path(dlq) + "/" + str(item["messageId"])
    status, single = call(broker.admin_url, "GET", one)
    assert status == 200 and single == item
    for suffix, whole in (("/property?name=note", long_value.encode()), ("/payload", payload), ("/key", b"k0"),
                          ("/property?name=DEAD_LETTER_REASON", b"terminated")):
        status, headers, body = call_raw(broker.admin_url, "GET", one + suffix)
        assert status == 200 and body == whole, suffix
        assert headers["Content-Type"] == "application/octet-stream"
    for suffix, code, words in (("/property", 400, "name is required"), ("/property?name=nope", 404, "nope")):
        status, _, body = call_raw(broker.admin_url, "GET", one + suffix)
        assert status == code and words in body.decode(), (suffix, status, body[:200])
    ledger = str(item["messageId"]).split(":")[0]
    status, _, body = call_raw(broker.admin_url, "GET", f"{_path(dlq)}/{ledger}:999:-1:-1/payload")
    assert status == 404 and b"No live dead letter" in body
    status, _, body = call_raw(broker.admin_url, "GET", _path(dlq) + "/12:x/key")
    assert status == 400 and b"ledger:entry:partition:batchIndex" in body
