"""docs/testing.md's examples, run as the doc prints them: every runnable block names its file
on its first line (`# name.py -- ...`); the test_*.py files are run by pytest in a child process
in a fresh directory, with the plugin coming from the installed package's entry point (nothing
copied, no conftest), and script.py by python."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.docs.doc_blocks import blocks

DOC = "docs/testing.md"


def doc_files() -> dict[str, str]:
    """The doc's runnable blocks by the file name their first line gives."""
    files = {}
    for block in blocks(DOC):
        if not block.runnable:
            continue
        first = block.body.splitlines()[0]
        match = re.match(r"# (\w+\.py) --", first)
        assert match, f"{block.where}: a runnable block of {DOC} does not name its file: {first!r}"
        files[match[1]] = block.body
    return files


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}


def test_the_documented_tests_pass_with_the_plugin(tmp_path: Path) -> None:
    files = doc_files()
    tests = {name for name in files if name.startswith("test_")}
    assert tests == {"test_retries.py", "test_not_early.py"}
    for name in tests:
        (tmp_path / name).write_text(files[name])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    assert "2 passed" in result.stdout, result.stdout[-3000:]


def test_the_documented_script_runs_its_broker_in_process(tmp_path: Path) -> None:
    files = doc_files()
    assert set(files) - {"test_retries.py", "test_not_early.py"} == {"script.py"}
    (tmp_path / "script.py").write_text(files["script.py"])
    result = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "b'order #1'" in result.stdout
