"""kill -9 of the broker in the middle of a compaction (issue 15 item 3): the compaction is
made slow and observable with compaction_chunk_entries=1 (one view row per storage
transaction), the broker is killed while its status is RUNNING and rows of the new
generation are being written, and after a restart the view in force is whole -- the old one
or the new one -- and a compacted reader misses no key. A compaction after the restart
finishes the job."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pulsar

from tests.admin.helpers import call
from tests.broker.test_compaction import P, compact_and_wait, produce_keyed, read_all
from tests.conftest import _quiet_logger, wait_until

SLOW = {"LETTERBOX_COMPACTION_CHUNK_ENTRIES": "1"}


def _view(data_dir: Path) -> tuple[dict[str, Any] | None, dict[int, int]]:
    """The view in force (metadata) and the rows per generation, read from the data dir."""
    db = sqlite3.connect(f"file:{data_dir / 'letterbox.db'}?mode=ro", uri=True, timeout=5)
    try:
        raw = db.execute("SELECT value FROM metadata WHERE key LIKE 'compaction:%'").fetchone()
        rows = dict(db.execute("SELECT generation, COUNT(*) FROM compacted_entries GROUP BY generation").fetchall())
    finally:
        db.close()
    return (json.loads(raw[0]) if raw else None), rows


def test_kill_during_compaction_leaves_a_whole_view(broker_factory: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir, env=SLOW)
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    topic = "crash-compaction"
    old_latest = produce_keyed(client, topic, 1500, 1500, 0)
    assert compact_and_wait(broker, topic, timeout=120)["status"] == "SUCCESS"
    first, _ = _view(data_dir)
    assert first is not None and first["generation"] == 1 and first["entries"] == 1500
    new_values = produce_keyed(client, topic, 3000, 3000, 0)  # k0..k1499 again, and 1500 new keys
    latest = {**old_latest, **new_values}
    client.close()

    assert call(broker.admin_url, "PUT", P + topic + "/compaction")[0] == 204

    def writing_new_generation() -> bool:
        return _view(data_dir)[1].get(2, 0) >= 10

    assert wait_until(writing_new_generation, timeout=120, interval=0.01)
    assert call(broker.admin_url, "GET", P + topic + "/compaction")[1]["status"] == "RUNNING"
    broker.kill()

    in_force, rows = _view(data_dir)
    assert in_force is not None and in_force["generation"] in (1, 2)
    assert rows[in_force["generation"]] == in_force["entries"], (in_force, rows)  # whole, never partial
    print(f"killed with generation {in_force['generation']} in force, rows per generation {rows}")

    broker = broker_factory(data_dir, env=SLOW)
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    try:
        assert call(broker.admin_url, "GET", P + topic + "/compaction")[1]["status"] == "NOT_RUN"
        seen: dict[str, bytes] = {}
        for msg in read_all(client, topic, compacted=True):
            seen[msg.partition_key()] = msg.data()
        assert seen == latest  # the view (old or new) plus the rest of the topic: no key missing
        assert compact_and_wait(broker, topic, timeout=180)["status"] == "SUCCESS"
        final, rows = _view(data_dir)
        assert final is not None and final["entries"] == 3000 and list(rows) == [final["generation"]]
        got = read_all(client, topic, compacted=True)
        assert len(got) == 3000 and {m.partition_key(): m.data() for m in got} == latest
    finally:
        client.close()
