# verify_data_dir: the offline check of a stopped broker's data dir (`letterbox verify`).
# It reads every file and reports what is damaged, by file, topic and entry range:
#   * the WAL's frame checksums (integrity.scan_wal): frames SQLite would drop;
#   * PRAGMA integrity_check of letterbox.db (every page, every index entry);
#   * every entry of every topic: contiguous ids, its CRC32C (strict: a damaged magic counts),
#     the payload file a large entry's row names (present, of the row's size, its CRC32C);
#   * compacted copies (their CRC32C), rows of no known topic, cursor records that do not
#     parse, payload files no row names.
# Invariant: read-only -- the database is opened with mode=ro, and the WAL index (-shm) that
# SQLite rebuilds when it reads the WAL is put back as it was (integrity.shm_kept).
from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .integrity import entry_checksum_ok, scan_wal, shm_kept
from .payload_files import SUFFIX
from .schema import db_path


@dataclass(frozen=True)
class Finding:
    file: str  # relative to the data dir
    what: str
    topic: str = ""
    first: int | None = None  # entry range, when the finding is about entries
    last: int | None = None
    damage: bool = True  # False: a note (e.g. a torn last WAL transaction, an orphan payload file)

    def line(self) -> str:
        where = f" {self.topic}" if self.topic else ""
        if self.first is not None:
            where += f" entries {self.first}" + (f"..{self.last}" if self.last != self.first else "")
        return f"{'DAMAGED' if self.damage else 'note'}: {self.file}{where}: {self.what}"


@dataclass
class VerifyReport:
    findings: list[Finding] = field(default_factory=list)
    topics: int = 0
    entries: int = 0
    payload_files: int = 0
    seconds: float = 0.0

    @property
    def damaged(self) -> bool:
        return any(f.damage for f in self.findings)


def verify_data_dir(data_dir: Path) -> VerifyReport:
    start = time.monotonic()
    report = VerifyReport()
    path = db_path(data_dir)
    wal = scan_wal(Path(f"{path}-wal"))
    if wal is not None:
        what = (f"{wal.reason}: SQLite drops {wal.frames_after} frames from frame {wal.frame} (byte {wal.offset}) "
                f"on ({wal.commits_after} commits)")
        if not wal.certain:
            what += "; only the last transaction, as a crash or power cut during its commit leaves it"
        report.findings.append(Finding(wal.path.name, what, damage=wal.certain))
    try:
        with shm_kept(path):
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            try:
                _check_db(conn, data_dir, report)
            finally:
                conn.close()
    except sqlite3.DatabaseError as exc:
        report.findings.append(Finding(path.name, f"cannot be read: {exc}"))
    report.seconds = time.monotonic() - start
    return report


def _check_db(conn: sqlite3.Connection, data_dir: Path, report: VerifyReport) -> None:
    problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(100)") if r[0] != "ok"]
    report.findings += [Finding("letterbox.db", p) for p in problems]
    ledgers = dict(conn.execute("SELECT ledger_id, name FROM ledgers").fetchall())
    firsts = dict(conn.execute("SELECT ledger_id, first_entry_id FROM ledgers").fetchall())
    report.topics = len(ledgers)
    named: set[str] = set()
    for lid, name in sorted(ledgers.items()):
        try:
            _check_ledger(conn, data_dir, lid, name, int(firsts[lid]), report, named)
        except sqlite3.DatabaseError as exc:
            report.findings.append(Finding("letterbox.db", f"cannot be read: {exc}", name))
    for (lid, n, lo, hi) in conn.execute(
            "SELECT ledger_id, COUNT(*), MIN(entry_id), MAX(entry_id) FROM entries GROUP BY ledger_id"):
        if lid not in ledgers:
            report.findings.append(Finding("letterbox.db", f"{n} entries of ledger {lid}, which no topic has "
                                           "(a damaged ledger id)", f"(ledger {lid})", lo, hi))
    compacted: dict[int, list[tuple[str, str, int]]] = {}
    for lid, eid, data in conn.execute(
            "SELECT ledger_id, entry_id, data FROM compacted_entries ORDER BY ledger_id, generation, entry_id"):
        if _checksum_problem(bytes(data)):
            compacted.setdefault(int(lid), []).append(("letterbox.db", "a compacted copy fails its CRC32C", int(eid)))
    for lid, bad in compacted.items():
        report.findings += _ranges(bad, ledgers.get(lid, f"(ledger {lid})"))
    for lid, cname, state in conn.execute("SELECT ledger_id, name, state FROM cursors"):
        try:
            json.loads(bytes(state))
        except ValueError:
            report.findings.append(Finding("letterbox.db", f"the record of subscription {cname} does not parse",
                                           ledgers.get(lid, f"(ledger {lid})")))
    payload_dir = data_dir / "payloads"
    if payload_dir.is_dir():
        orphans = [p.name for p in payload_dir.iterdir() if p.name.endswith(SUFFIX) and p.name not in named]
        if orphans:
            report.findings.append(Finding("payloads/", f"{len(orphans)} payload files no entry names (removed at "
                                           "the next start)", damage=False))


def _check_ledger(conn: sqlite3.Connection, data_dir: Path, lid: int, name: str, first: int,
                  report: VerifyReport, named: set[str]) -> None:
    bad: list[tuple[str, str, int]] = []  # (file, what, entry id), in entry order
    expected = first
    for eid, size, data in conn.execute(
            "SELECT entry_id, size, data FROM entries WHERE ledger_id = ? AND entry_id >= ? ORDER BY entry_id",
            (lid, first)):
        report.entries += 1
        if eid != expected:
            report.findings.append(Finding("letterbox.db", "missing (their rows are gone)", name, expected, eid - 1))
        expected = eid + 1
        file = "letterbox.db"
        if isinstance(data, str):
            file = f"payloads/{data}"
            named.add(data)
            report.payload_files += 1
            problem = _payload_problem(data_dir / file, size)
        else:
            problem = None if len(data) == size else f"{len(data)} bytes stored, {size} recorded"
            problem = problem or _checksum_problem(bytes(data))
        if problem:
            bad.append((file, problem, eid))
    report.findings += _ranges(bad, name)


def _payload_problem(path: Path, size: int) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return "payload file missing"
    if st.st_size != size:
        return f"payload file of {st.st_size} bytes, {size} recorded"
    with open(path, "rb") as f:
        return _checksum_problem(f.read())


def _checksum_problem(data: bytes) -> str | None:
    return "fails its CRC32C" if entry_checksum_ok(data, strict=True) is False else None


def _ranges(bad: list[tuple[str, str, int]], topic: str) -> Iterator[Finding]:
    """Consecutive entries with the same file and problem, as one finding each."""
    i = 0
    while i < len(bad):
        file, what, lo = bad[i]
        hi = lo
        while i + 1 < len(bad) and bad[i + 1][:2] == (file, what) and bad[i + 1][2] == hi + 1:
            i += 1
            hi = bad[i][2]
        yield Finding(file, what, topic, lo, hi)
        i += 1
