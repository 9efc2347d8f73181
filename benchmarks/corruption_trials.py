"""Corruption at random offsets of a stopped broker's data files, one trial each.

Base data dirs are made once by a real broker (topics t0..t2, messages sent one by one with
their receipts kept, a few large ones in payload files on t2), stopped by kill -9:
  db       -- the WAL checkpointed into letterbox.db (every entry in the database file)
  wal      -- before any checkpoint: every entry in letterbox.db-wal
  wal-ckpt -- after a checkpoint that restarted the WAL: a new generation over the old one
  payload  -- a payload file
Each trial copies a base, flips one bit at a random offset of the chosen file or truncates it
there, then runs `letterbox verify`, starts a broker (refused or not) and reads every topic
from the earliest message. Per trial: whether the damage was detected (verify, a refused
start, or an entry refused on read), messages served damaged (not byte-equal to what was
sent), messages missing, and missing ones with no error anywhere (`silent`).

    python benchmarks/corruption_trials.py --trials 50 --seed 1
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pulsar

QUIET = logging.getLogger("pulsar-client")
QUIET.setLevel(logging.ERROR)
TOPICS = [f"persistent://public/default/t{i}" for i in range(3)]
_LISTEN = re.compile(r"listening on pulsar://[\d.]+:(\d+)")


class Broker:
    def __init__(self, data: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "letterbox", "standalone", "--data-dir", str(data), "--port", "0",
             "--admin-port", "off", "--bind", "127.0.0.1"], stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.port = 0
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            m = _LISTEN.search(line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.proc.wait()

    def finish(self, kill: bool = False) -> str:
        if self.proc.poll() is None:
            (self.proc.kill if kill else self.proc.terminate)()
        rest = self.proc.stderr.read() if self.proc.stderr else ""
        self.proc.wait()
        return "".join(self.lines) + rest


def body(topic: int, i: int) -> bytes:
    big = topic == 2 and i % 40 == 0
    return f"t{topic}-{i:05d}-".encode() * (130_000 if big else 6)


def fill(data: Path, topics: list[int], n: int, start: int = 0) -> None:
    b = Broker(data)
    c = pulsar.Client(f"pulsar://127.0.0.1:{b.port}", operation_timeout_seconds=30, logger=QUIET)
    for t in topics:
        p = c.create_producer(TOPICS[t], batching_enabled=False)
        for i in range(start, start + n):
            p.send(body(t, i))
    c.close()
    b.finish(kill=True)


def checkpoint(data: Path, mode: str) -> None:
    conn = sqlite3.connect(data / "letterbox.db")
    conn.execute(f"PRAGMA wal_checkpoint({mode})")
    conn.close()


def bases(root: Path, n: int) -> dict[str, tuple[Path, dict[int, list[bytes]]]]:
    sent = {t: [body(t, i) for i in range(n)] for t in range(3)}
    wal = root / "wal"
    fill(wal, [0, 1, 2], n)
    db = root / "db"
    shutil.copytree(wal, db)
    checkpoint(db, "TRUNCATE")
    ck = root / "wal-ckpt"
    shutil.copytree(db, ck)
    checkpoint(ck, "RESTART")
    fill(ck, [0, 1], n // 4, start=n)
    sent_ck = {t: sent[t] + ([body(t, i) for i in range(n, n + n // 4)] if t < 2 else []) for t in range(3)}
    return {"db": (db, sent), "wal": (wal, sent), "wal-ckpt": (ck, sent_ck), "payload": (db, sent)}


def target(data: Path, kind: str, rng: random.Random) -> Path:
    if kind == "payload":
        return rng.choice(sorted((data / "payloads").iterdir()))
    return data / ("letterbox.db" if kind == "db" else "letterbox.db-wal")


def consume(port: int, sent: dict[int, list[bytes]]) -> tuple[int, dict[str, int]]:
    """(served damaged, missing per topic): each topic read from the earliest message."""
    c = pulsar.Client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=10, logger=QUIET)
    bad = 0
    missing: dict[str, int] = {}
    for t, bodies in sent.items():
        want = set(bodies)
        got: set[bytes] = set()
        try:
            cons = c.subscribe(TOPICS[t], "trial", initial_position=pulsar.InitialPosition.Earliest,
                               receiver_queue_size=1000)
            while True:
                m = cons.receive(1500)
                (got if m.data() in want else set()).add(m.data())
                bad += m.data() not in want
        except pulsar.Timeout:
            pass
        except pulsar.PulsarException:
            pass
        missing[TOPICS[t]] = len(want - got)
    c.close()
    return bad, missing


def trial(n: int, kind: str, base: Path, sent: dict[int, list[bytes]], rng: random.Random, work: Path) -> dict:
    data = work / f"trial-{n}"
    shutil.copytree(base, data)
    f = target(data, kind, rng)
    size = f.stat().st_size
    action = rng.choice(["flip", "truncate"])
    offset = rng.randrange(size)
    if action == "flip":
        raw = bytearray(f.read_bytes())
        raw[offset] ^= 1 << rng.randrange(8)
        f.write_bytes(raw)
    else:
        with open(f, "r+b") as fh:
            fh.truncate(offset)
    v = subprocess.run([sys.executable, "-m", "letterbox", "verify", "--data-dir", str(data), "--json"],
                       capture_output=True, text=True)
    report = json.loads(v.stdout) if v.stdout.startswith("{") else {"damaged": True, "findings": []}
    b = Broker(data)
    refused = ""
    bad, lost = 0, {}
    if b.port:
        bad, lost = consume(b.port, sent)
        log = b.finish()
    else:
        log = b.finish()
        refused = next((ln for ln in log.splitlines() if ln.startswith("Error:")), "exit without a message")
    read_refused = "fails its checksum and is not served" in log
    detected = bool(report["damaged"]) or bool(refused) or read_refused
    shutil.rmtree(data)
    first = report["findings"][0] if report["findings"] else None
    named = {f["topic"] for f in report["findings"]}
    missing = sum(lost.values())
    others = sum(n for t, n in lost.items() if t not in named)  # topics no finding names
    return {"n": n, "file": f.name, "kind": kind, "action": action,
            "offset": offset, "size": size, "verify": "damaged" if report["damaged"] else "ok",
            "start": "refused" if refused else "started", "read_refused": read_refused, "served_bad": bad,
            "missing": missing, "silent": missing if not detected else 0, "others": others,
            "tracebacks": log.count("Traceback"),
            "finding": _finding(first)}


def _finding(f: dict | None) -> str:
    if f is None:
        return ""
    where = f" {f['topic']}" if f["topic"] else ""
    where += f" entries {f['first']}..{f['last']}" if f["first"] is not None else ""
    return f"{f['file']}{where}: {f['what'][:90]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--messages", type=int, default=200, help="messages per topic")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="letterbox-corruption-"))
    t0 = time.monotonic()
    made = bases(work / "bases", args.messages)
    kinds = ["db", "wal", "wal-ckpt", "payload"]
    rows = []
    print("| # | file (kind) | damage | verify | start | read refused | served damaged | missing | missing "
          "with no error | missing in topics verify did not name | first finding |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in range(1, args.trials + 1):
        kind = kinds[(n - 1) % len(kinds)]
        base, sent = made[kind]
        r = trial(n, kind, base, sent, rng, work)
        rows.append(r)
        print(f"| {n} | {r['file']} ({kind}) | {r['action']} at {r['offset']} of {r['size']} | {r['verify']} | "
              f"{r['start']} | {'yes' if r['read_refused'] else 'no'} | {r['served_bad']} | {r['missing']} | "
              f"{r['silent']} | {r['others']} | {r['finding']} |", flush=True)
    print(f"\n{len(rows)} trials in {time.monotonic() - t0:.0f} s: served damaged {sum(r['served_bad'] for r in rows)}, "
          f"missing with no error {sum(r['silent'] for r in rows)}, missing in topics verify did not name "
          f"{sum(r['others'] for r in rows)}, detected "
          f"{sum(r['verify'] == 'damaged' or r['start'] == 'refused' or r['read_refused'] for r in rows)}, "
          f"tracebacks in broker logs {sum(r['tracebacks'] > 0 for r in rows)} trials")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
