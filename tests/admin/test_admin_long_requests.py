"""A request the HTTP parser refuses (a URL or header over 8 KB) answers a JSON 4xx with
a reason, and the broker logs one warning line, not a traceback."""
from __future__ import annotations

import http.client
import json

from tests.conftest import BrokerProcess


def raw_get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type", ""), resp.read()
    finally:
        conn.close()


def test_urls_and_headers_over_8kb_get_a_json_reason(broker: BrokerProcess) -> None:
    for path, headers in (("/admin/v2/tenants/" + "a" * 9000, {}),
                          ("/admin/v2/persistent/public/default/t/stats?x=" + "%41" * 3000, {}),
                          ("/admin/v2/tenants", {"X-Big": "b" * 9000})):
        status, ctype, body = raw_get(broker.admin_port, path, headers)
        assert 400 <= status < 500 and "json" in ctype, (status, ctype, body[:200])
        reason = json.loads(body)["reason"]
        assert "8190 bytes" in reason and len(reason) < 600
    assert raw_get(broker.admin_port, "/admin/v2/tenants")[0] == 200  # and it goes on serving
    log = broker.log()
    assert "Traceback" not in log, log
    assert log.count("could not be parsed") == 3, log
