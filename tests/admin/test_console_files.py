"""The console's static files on the admin port: / is the HTML shell, /console/{file} the modules
and stylesheet, all with a self-only Content-Security-Policy; nothing outside static/ is served
(unknown names, dot files, traversal: 404 with a reason)."""
from __future__ import annotations

import re

from letterbox.admin.console.routes import STATIC_DIR
from tests.conftest import BrokerProcess
from tests.security.http import call


def test_shell_and_modules_are_served_with_a_strict_policy(broker: BrokerProcess) -> None:
    status, headers, body = call(broker.admin_url, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"] and headers["X-Content-Type-Options"] == "nosniff"
    assert '<script type="module" src="/console/app.js">' in body
    # every module the page imports, and every file shipped, answers with its type
    imported = set(re.findall(r'from "\./([\w.]+)"', "".join(p.read_text() for p in STATIC_DIR.glob("*.js"))))
    assert imported and imported <= {p.name for p in STATIC_DIR.iterdir()}
    for path in sorted(STATIC_DIR.iterdir()):
        if path.name == "index.html":
            continue
        status, headers, text = call(broker.admin_url, "GET", f"/console/{path.name}")
        assert status == 200 and text == path.read_text(), path.name
        kind = {"js": "text/javascript", "css": "text/css"}[path.suffix[1:]]
        assert headers["Content-Type"].startswith(kind), (path.name, headers["Content-Type"])
    status, headers, _ = call(broker.admin_url, "GET", "/console/index.html")
    assert status == 200  # redirected to /


def test_nothing_outside_the_static_files_is_served(broker: BrokerProcess) -> None:
    for path in ("/console/nope.js", "/console/routes.py", "/console/__init__.py", "/console/.hidden",
                 "/console/..%2Froutes.py", "/console/%2e%2e/routes.py", "/console/"):
        status, _, body = call(broker.admin_url, "GET", path)
        assert status == 404, (path, status, body)
        assert isinstance(body, dict) and body.get("reason"), (path, body)
