"""The failure core stays pure: no asyncio, no I/O, no imports of the layers that call it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import letterbox.failure

PACKAGE = Path(letterbox.failure.__file__).parent
FORBIDDEN = ("letterbox.broker", "letterbox.admin", "letterbox.client", "letterbox.spark", "letterbox.cli",
             "letterbox.storage", "asyncio", "socket", "threading", "subprocess", "pulsar", "pyspark")


def test_failure_package_imports_nothing_it_must_not() -> None:
    found = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [(path.name, n) for n in names if n.split(".")[0] in FORBIDDEN or n.startswith(FORBIDDEN)]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                found.append((path.name, "open()"))
    assert found == []


# The package docstring's grep recipe, as a test: a redelivery / dead-letter / delay decision
# (a comparison with a maximum, a backoff or level delay computed, the 864,000 s limit, a
# deliver-at compared with now, the delayed-delivery subscription types) appears only in
# letterbox/failure/.
DECISION = re.compile(
    r"max_redeliver_count *[<>]|[<>]=? *[A-Za-z_.]*max_(redeliver_count|retries|reconsume_times)\b"
    r"|\.(delay_ms|policy_delay|level_delay|for_attempt)\(|864_?000|deliver_at[A-Za-z_]* *> *now"
    r"|delay\w* *= *.*in \(SHARED, KEY_SHARED\)|count\(\w+\) *> *limit"
)
def _decisions() -> dict[str, list[str]]:
    root = PACKAGE.parent
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("failure/"):
            continue
        hits = [line.strip() for line in path.read_text().splitlines() if DECISION.search(line)]
        if hits:
            found[rel] = hits
    return found


def test_no_decision_outside_the_failure_package() -> None:
    found = _decisions()
    assert found == {}


def test_the_decision_pattern_finds_what_it_names() -> None:
    for line in ("if count > dl.max_redeliver_count:", "d = backoff.delay_ms(n)", "MAX = 864_000",
                 "if deliver_at_ms > now:", "delays = self.sub_type in (SHARED, KEY_SHARED)",
                 "dead = [e for e in ids if count(e) > limit]", "if times > self.max_reconsume_times:"):
        assert DECISION.search(line), line
