"""The failure core stays pure: no asyncio, no I/O, no imports of the layers that call it."""
from __future__ import annotations

import ast
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
