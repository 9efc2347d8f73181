"""`letterbox migrate` accepted end to end at full scale, one command:

    .venv/bin/python benchmarks/migrate_acceptance.py [--messages 100000] [--topics 10]

Starts letterbox (`--sync full`) and the reference Apache Pulsar standalone (or uses one already
running: LETTERBOX_REFERENCE_URLS="pulsar://... http://..."), fills a tenant with the fixture of
_migrate_fixture.py (out-of-order and batch-index acknowledgements, two dead letter topics with
reasons and attempt logs, a retry topic) and remembers what every subscription owes. Then times
`letterbox migrate --tenant T` and a rerun with `--verify`, and on Pulsar drains every
subscription with the official client: each must receive exactly what it owed, each message
once, in the source's order per key; every dead letter must keep its properties (reason, attempt
log, description). Prints the tables; exit status 1 when anything differs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass

import pulsar
from _migrate_fixture import LOGGER, SUBSCRIPTIONS, TRIAGE, Fixture, filled, message_id, timed

OWN = ("MIGRATED_MESSAGE_ID", "MIGRATED_PUBLISH_TIME")
FIRST_MESSAGE_MS = 30_000
QUIET_MS = 2_000  # after the last owed message: the wait for one too many


@dataclass
class Tally:
    subscriptions: int = 0
    expected: int = 0
    received: int = 0
    duplicates: int = 0
    missing: int = 0
    unexpected: int = 0
    out_of_order: int = 0
    wrong_key: int = 0

    def add(self, other: Tally) -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    @property
    def clean(self) -> bool:
        return not (self.duplicates or self.missing or self.unexpected or self.out_of_order or self.wrong_key)


def drain(client: pulsar.Client, fx: Fixture, topic: str, sub: str) -> Tally:
    """Everything `sub` of `topic` receives on Pulsar, against what it owed."""
    owed = fx.owed[topic][sub]
    t = Tally(1, len(owed))
    cons = client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Exclusive, receiver_queue_size=2000)
    seen: set[str] = set()
    last: dict[str, int] = {}
    while True:
        try:
            m = cons.receive(QUIET_MS if t.received >= len(owed) else FIRST_MESSAGE_MS)
        except pulsar.Timeout:
            break
        t.received += 1
        ident = message_id(m)
        if ident in seen:
            t.duplicates += 1
        seen.add(ident)
        if ident not in owed:
            t.unexpected += 1
            continue
        key = m.partition_key()
        if key != f"k{int(ident.split(':')[1]) % 97}":
            t.wrong_key += 1
        rank = fx.rank(topic, ident)
        if last.get(key, -1) >= rank:
            t.out_of_order += 1
        last[key] = rank
    cons.close()
    t.missing = len(owed - seen)
    return t


def dead_letters_kept(client: pulsar.Client, fx: Fixture, dlq: str) -> tuple[Counter[str], int, int]:
    """(reasons on letterbox, dead letters on Pulsar with every property as on letterbox, with an
    attempt log)."""
    reader = client.create_reader(dlq, pulsar.MessageId.earliest)
    kept = logged = 0
    want = fx.dead_letters[dlq]
    while reader.has_message_available():
        m = reader.read_next(10_000)
        props = {k: v for k, v in m.properties().items() if k not in OWN}
        if props == want.get(message_id(m)):
            kept += 1
            logged += bool(json.loads(props.get("DELIVERY_ATTEMPTS", "[]")))
    reader.close()
    return Counter(p.get("DEAD_LETTER_REASON", "(none)") for p in want.values()), kept, logged


def groups(fx: Fixture) -> dict[str, list[tuple[str, str]]]:
    """The summary's rows: (topic, subscription) pairs by what they are."""
    out: dict[str, list[tuple[str, str]]] = {}
    data = [t for t in fx.owed if not t.endswith(("-DLQ", "-RETRY"))]
    for topic, subs in fx.owed.items():
        for sub in subs:
            if topic.endswith("-DLQ"):
                row = f"{TRIAGE} on the {len(fx.dead_letters)} dead letter topics"
            elif topic.endswith("-RETRY"):
                row = f"{sub} on the retry topic"
            else:
                row = f"{sub} on each of the {len(data)} topics"
            out.setdefault(row, []).append((topic, sub))
    return out


def report(fx: Fixture, tallies: dict[str, Tally], dead: dict[str, tuple[Counter[str], int, int]],
           seconds: float, rss: float, verify_s: float, verified: str) -> bool:
    print("| subscriptions | messages owed | received | duplicates | missing | not owed | out of order per key |")
    print("|---|---|---|---|---|---|---|")
    total = Tally()
    for row, t in tallies.items():
        total.add(t)
        print(f"| {row} | {t.expected:,} | {t.received:,} | {t.duplicates} | {t.missing} | {t.unexpected} "
              f"| {t.out_of_order} |")
    print(f"| all {total.subscriptions} | {total.expected:,} | {total.received:,} | {total.duplicates} "
          f"| {total.missing} | {total.unexpected} | {total.out_of_order} |")
    print("\n| dead letter topic | dead letters (reason) | on Pulsar with reason and attempt log as on letterbox |")
    print("|---|---|---|")
    dead_ok = True
    for dlq, (reasons, kept, logged) in dead.items():
        n = sum(reasons.values())
        dead_ok &= kept == logged == n
        print(f"| {dlq.rsplit('/', 1)[1]} | {n} ({', '.join(f'{r} {c}' for r, c in sorted(reasons.items()))}) "
              f"| {min(kept, logged)} |")
    print("\n| messages | topics (partitioned) | migrate s | msg/s | peak RSS MB | rerun with --verify s | --verify |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {fx.messages:,} | {fx.topics} (2) | {seconds:.1f} | {fx.messages / seconds:,.0f} | {rss:.0f} "
          f"| {verify_s:.1f} | {verified} |")
    ok = total.clean and total.wrong_key == 0 and dead_ok and verified.startswith("passed")
    print(f"\n{'ACCEPTED' if ok else 'NOT ACCEPTED'}" + ("" if total.wrong_key == 0 else
                                                          f" ({total.wrong_key} messages with another key)"))
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--topics", type=int, default=10)
    a = ap.parse_args()
    if a.topics < 6:
        sys.exit("--topics: at least 6 (t3 and t5 carry the dead letter and retry topics)")
    with filled("migrate-accept", a.topics, a.messages) as f:
        fx, base, target_url = f.fixture, f.migrate, f.target_url
        print(f"filled in {f.fill_s:.0f} s: {fx.messages:,} messages, "
              f"{sum(len(s) for s in fx.owed.values())} subscriptions", file=sys.stderr)
        seconds, rss, _, _ = timed(base)
        verify_s, _, out, status = timed([*base, "--verify"], must_pass=False)
        resent = sum(int(line.rsplit("(", 1)[1].split()[0]) for line in out.splitlines()
                     if line.endswith("sent by this run)"))
        line = next((x for x in out.splitlines() if x.startswith("verified:")), "")
        verified = (f"passed ({line.removeprefix('verified: ')})" if status == 0 and line
                    else f"FAILED (status {status})")
        if resent:
            verified += f", but the rerun sent {resent}"
        if status != 0:
            print(out[-3000:], file=sys.stderr)
        client = pulsar.Client(target_url, operation_timeout_seconds=60, logger=LOGGER)
        try:
            tallies = {}
            for row, pairs in groups(fx).items():
                tallies[row] = Tally()
                for topic, sub in pairs:
                    tallies[row].add(drain(client, fx, topic, sub))
            dead = {dlq: dead_letters_kept(client, fx, dlq) for dlq in fx.dead_letters}
        finally:
            client.close()
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load average "
              f"{[round(x, 2) for x in os.getloadavg()]}; subscriptions per row: "
              f"{', '.join(SUBSCRIPTIONS)} on every topic\n")
        ok = report(fx, tallies, dead, seconds, rss, verify_s, verified)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
