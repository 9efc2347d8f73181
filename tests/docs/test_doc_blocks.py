"""Every runnable block of README.md and docs/*.md is run by a test (doc_blocks.py says what
runnable means). The docs in RUN_HERE are run here, block by block in the order printed, in
an empty directory against a fresh broker (letterbox.testing.Broker): python blocks in one
interpreter that keeps its names from block to block (as a reader's session would), sh blocks
with bash -e, keeping the shell variables earlier blocks set. Only the ports change: 6650 and 8080 become the broker's; the shell has what a
reader's shell would (LETTERBOX_SERVICE_URL, LETTERBOX_ADMIN_URL and the docs' A=admin URL, all
pointing at that broker)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from letterbox.testing import Broker
from tests.docs.doc_blocks import Block, blocks, docs

RUN_HERE = ("README.md", "docs/retry-and-terminate.md", "docs/failure-handling.md", "docs/admin.md")
# docs whose runnable blocks other tests run: all of them (region None), or those between the
# `<!-- NAME:start -->` and `<!-- NAME:end -->` markers of each region named
RUN_ELSEWHERE = {
    "docs/testing.md": [("tests/docs/test_testing_doc.py", None)],
    "docs/security.md": [("tests/security/test_docs_walkthrough.py", "walkthrough")],
    "docs/spark.md": [("tests/spark/test_cluster_docs.py", "cluster"), ("tests/docs/test_spark_doc.py", "api"),
                      ("tests/docs/test_spark_doc.py", "example")],
}

ANSWER = "@@doc-block@@ "
# An sh block in a shell that keeps the variables earlier blocks set (as a reader's terminal
# would): they are saved to .doc-shell-vars after each block and read back before the next.
SHELL = """__before=" $(compgen -v | tr '\\n' ' ') "
[ -f .doc-shell-vars ] && . ./.doc-shell-vars
BODY
for __v in $(compgen -v); do
  case "$__v" in __*|BASH*|_) continue;; esac
  case "$__before" in *" $__v "*) ;; *) declare -p "$__v";; esac
done > .doc-shell-vars
"""
# Runs python blocks sent as JSON lines on stdin in one namespace; answers one JSON line each.
SESSION = r'''
import contextlib, io, json, sys, traceback
names = {"__name__": "__main__"}
for line in sys.stdin:
    code = json.loads(line)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<doc block>", "exec"), names)
        answer = {"ok": True, "stdout": out.getvalue()}
    except BaseException:
        answer = {"ok": False, "stdout": out.getvalue(), "error": traceback.format_exc()}
    sys.__stdout__.write("@@doc-block@@ " + json.dumps(answer) + "\n")
    sys.__stdout__.flush()
'''


def _covered_elsewhere(block: Block) -> bool:
    text = (Path(__file__).resolve().parents[2] / block.doc).read_text()
    for _, region in RUN_ELSEWHERE.get(block.doc, []):
        if region is None:
            return True
        start, end = text.index(f"<!-- {region}:start -->"), text.index(f"<!-- {region}:end -->")
        if text[:start].count("\n") < block.line < text[:end].count("\n") + 1:
            return True
    return False


def region_blocks(doc: str, region: str) -> list[Block]:
    """The runnable blocks between the region's markers, in the order printed."""
    text = (Path(__file__).resolve().parents[2] / doc).read_text()
    start, end = text.index(f"<!-- {region}:start -->"), text.index(f"<!-- {region}:end -->")
    first, last = text[:start].count("\n"), text[:end].count("\n") + 1
    return [b for b in blocks(doc) if b.runnable and first < b.line < last]


def test_every_runnable_block_is_run_by_a_test() -> None:
    orphans = [f"{b.where} ({b.lang})" for doc in docs() for b in blocks(doc)
               if b.runnable and doc not in RUN_HERE and not _covered_elsewhere(b)]
    assert not orphans, ("runnable blocks no test runs: add the doc to RUN_HERE or mark the block "
                         "<!-- not run: why --> on the line before its fence:\n" + "\n".join(orphans))
    unexplained = [b.where for doc in docs() for b in blocks(doc) if b.not_run == ""]
    assert not unexplained, f"<!-- not run: --> needs a reason: {unexplained}"


def test_the_convention_is_seen(tmp_path: Path) -> None:
    """A marked block is not runnable, a setup block is, a transcript is not."""
    found = {b.lang: b for b in blocks("README.md")}
    assert found["python"].runnable
    assert any(b.not_run for b in blocks("README.md"))


class DocSession:
    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd, self.env = cwd, env
        self.proc = subprocess.Popen([sys.executable, "-c", SESSION], cwd=cwd, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def run_python(self, code: str) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(code) + "\n")
        self.proc.stdin.flush()
        while True:  # the client library's own log lines go to the same stdout
            line = self.proc.stdout.readline()
            assert line, "the doc's python session died"
            if line.startswith(ANSWER):
                answer: dict[str, object] = json.loads(line[len(ANSWER):])
                return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.parametrize("doc", RUN_HERE)
def test_doc_runs_as_written(doc: str, tmp_path: Path) -> None:
    todo = [b for b in blocks(doc) if b.runnable]
    assert todo, f"{doc} has no runnable block"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERBOX_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    with Broker() as broker:
        ports = {"6650": str(broker.port), "8080": str(broker.admin_port)}
        env.update(LETTERBOX_SERVICE_URL=broker.url, LETTERBOX_ADMIN_URL=broker.admin_url, A=broker.admin_url)
        (tmp_path / ".curlrc").write_text("fail-with-body\n")  # an HTTP error status fails the block
        env["CURL_HOME"] = str(tmp_path)
        session = DocSession(tmp_path, env)
        try:
            for block in todo:
                body = block.body
                for old, new in ports.items():
                    body = body.replace(old, new)
                if block.lang == "python":
                    answer = session.run_python(body)
                    assert answer["ok"], f"{block.where}:\n{block.body}\n{answer['error']}"
                else:
                    out = subprocess.run(["bash", "-e", "-c", SHELL.replace("BODY", body)], cwd=tmp_path, env=env,
                                         capture_output=True, text=True, timeout=120)
                    assert out.returncode == 0, (f"{block.where}:\n{block.body}\n--- stdout\n{out.stdout}"
                                                 f"\n--- stderr\n{out.stderr}")
        finally:
            session.close()
        assert "Traceback" not in broker.log(), broker.log()
