"""docs/testing.md's pytest fixture and example test, run exactly as the doc prints
them: the two python blocks are written to a fresh directory as conftest.py and
test_retries.py and run by pytest in a child process."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def doc_blocks() -> dict[str, str]:
    """The doc's python blocks by the file name their first line gives (`# name.py -- ...`)."""
    blocks = {}
    for code in BLOCK.findall(DOC.read_text()):
        first = code.splitlines()[0]
        match = re.match(r"# (\w+\.py) --", first)
        assert match, f"a python block of {DOC.name} does not name its file: {first!r}"
        blocks[match[1]] = code
    return blocks


def test_the_documented_fixture_and_example_run_as_written(tmp_path: Path) -> None:
    blocks = doc_blocks()
    assert set(blocks) == {"conftest.py", "test_retries.py"}
    for name, code in blocks.items():
        (tmp_path / name).write_text(code)
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout, result.stdout[-3000:]
