"""The integrity checks without a broker: an entry's CRC32C, and the WAL scan on WALs SQLite
wrote (intact, a flipped bit with commits after it, cut short with and without its index)."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from letterbox.protocol import build_headers_and_payload, pb
from letterbox.storage.integrity import entry_checksum_ok, scan_wal

PAGE = 4096


def _entry() -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    return build_headers_and_payload(meta, b"payload" * 20)


def test_an_entry_checksum_is_checked_and_a_damaged_magic_is_caught_when_strict() -> None:
    good = _entry()
    assert entry_checksum_ok(good) is True
    for at in (2, 9, len(good) - 1):  # the checksum, the metadata, the payload
        bad = bytearray(good)
        bad[at] ^= 0x20
        assert entry_checksum_ok(bytes(bad)) is False
    unchecked = good[6:]  # the same entry sent without a checksum: starts with its metadata size
    assert entry_checksum_ok(unchecked) is None and entry_checksum_ok(unchecked, strict=True) is None
    magic_hit = bytearray(good)
    magic_hit[1] ^= 0x01  # 0x0e01 -> 0x0e00: no longer a checksum header
    assert entry_checksum_ok(bytes(magic_hit)) is None  # reads keep any bytes (the store is format-agnostic)
    assert entry_checksum_ok(bytes(magic_hit), strict=True) is False  # verify knows a broker's entries


def _wal(tmp: Path, commits: int = 40) -> Path:
    """A database whose WAL holds `commits` transactions, left as a killed process leaves it
    (the WAL and its index on disk: copied while the connection is still open)."""
    src = tmp / "src"
    src.mkdir()
    conn = sqlite3.connect(src / "t.db", isolation_level=None)
    conn.execute(f"PRAGMA page_size={PAGE}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (x BLOB)")
    for i in range(commits):
        conn.execute("INSERT INTO t VALUES (?)", (bytes([i]) * 3000,))
    out = tmp / "copy"
    out.mkdir()
    for name in ("t.db", "t.db-wal", "t.db-shm"):
        shutil.copyfile(src / name, out / name)
    conn.close()
    return out / "t.db-wal"


def _frame_offset(i: int) -> int:
    return 32 + i * (24 + PAGE)


def test_an_intact_wal_passes(tmp_path: Path) -> None:
    assert scan_wal(_wal(tmp_path)) is None


def test_a_flipped_bit_with_commits_after_it_is_certain_damage(tmp_path: Path) -> None:
    wal = _wal(tmp_path)
    raw = bytearray(wal.read_bytes())
    raw[_frame_offset(5) + 24 + 700] ^= 0x08
    wal.write_bytes(raw)
    damage = scan_wal(wal)
    assert damage is not None and damage.certain and damage.commits_after > 1
    assert "fails its checksum" in damage.reason and damage.offset <= _frame_offset(5)


def test_a_wal_cut_short_is_caught_by_its_index_and_not_without_it(tmp_path: Path) -> None:
    wal = _wal(tmp_path)
    with open(wal, "r+b") as f:
        f.truncate(_frame_offset(20))  # whole frames gone: every checksum left still holds
    damage = scan_wal(wal)
    assert damage is not None and damage.certain and "cut short" in damage.reason
    Path(f"{str(wal)[:-4]}-shm").unlink()  # after a power cut the index may be gone: nothing tells
    assert scan_wal(wal) is None


def test_a_torn_unfinished_commit_at_the_end_is_not_certain(tmp_path: Path) -> None:
    wal = _wal(tmp_path)
    raw = wal.read_bytes()
    last = bytearray(raw[-(24 + PAGE):])
    last[4:8] = b"\0\0\0\0"  # not a commit frame: a transaction still being written
    last[30] ^= 0xFF
    wal.write_bytes(raw + bytes(last))
    damage = scan_wal(wal)
    assert damage is not None and not damage.certain and damage.commits_after == 0
