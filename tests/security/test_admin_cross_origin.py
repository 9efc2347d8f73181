"""The console put a browser on the admin origin: a page on ANOTHER origin must not make a
visitor's browser change the broker. A cross-site "simple" POST (text/plain body, or none)
needs no CORS preflight, so before, any web page could purge a DLQ, redrive it or advance
the clock of a broker on the visitor's machine (authentication off, or ambient credentials:
a Basic login the browser cached after the 401 challenge, a client certificate). Writes
that a browser marks as cross-origin (Origin of another host, or Sec-Fetch-Site:
cross-site) are now refused with 403; the console's own calls (same origin) and clients
that send no Origin (CLI, pulsar-admin, curl, the official clients) are not affected."""
from __future__ import annotations

import uuid
from typing import Any

import pulsar

from tests.admin.helpers import call
from tests.conftest import BrokerProcess, _quiet_logger

P = "/admin/v2/persistent/public/default"


def post(base: str, path: str, body: str, headers: dict[str, str]) -> tuple[int, Any]:
    """A POST with exactly these headers (what a browser would send)."""
    return call(base, "POST", path, body, timeout=30, headers=headers)


def test_cross_site_writes_are_refused(broker: BrokerProcess) -> None:
    base = broker.admin_url
    dlq = f"xsite-{uuid.uuid4().hex[:6]}-DLQ"
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    producer = client.create_producer(f"persistent://public/default/{dlq}")
    for i in range(3):
        producer.send(f"m{i}".encode(), properties={"DEAD_LETTER_REASON": "expired"})
    client.close()
    purge = f"{P}/{dlq}/letterbox/purge"
    plain = {"Content-Type": "text/plain"}  # what a cross-site form or no-cors fetch sends
    for headers in ({**plain, "Origin": "http://evil.example"},
                    {**plain, "Origin": "null"},
                    {**plain, "Sec-Fetch-Site": "cross-site"},
                    {"Origin": "https://evil.example:8443", "Content-Type": "application/json"}):
        status, reply = post(base, purge, "{}", headers)
        assert status == 403, (headers, status, reply)
        assert "cross-origin" in reply["reason"], reply
    status, reply = post(base, purge, '{"dryRun": true}', {"Content-Type": "application/json"})
    assert (status, reply["purged"]) == (200, 3), reply  # nothing was purged by the refused calls
    # the console's own calls (same origin) and clients without an Origin keep working
    host = base.split("://", 1)[1]
    status, reply = post(base, purge, '{"dryRun": true}',
                         {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin",
                          "Content-Type": "application/json"})
    assert (status, reply["purged"]) == (200, 3), reply
    status, reply = post(base, purge, "{}", {"Content-Type": "application/json"})
    assert (status, reply["purged"]) == (200, 3), reply
