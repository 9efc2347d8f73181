# Integrity checks of a data dir's files: letterbox.db, its write-ahead log and payloads/.
#
#   * Entries: an entry's data is the SEND's headers-and-payload as it came, which carries the
#     producer's CRC32C ([0x0e01][crc32c of the rest]), after broker entry metadata if any.
#     entry_checksum_ok() checks it; read_checked() is the read path's guard: an entry whose
#     checksum fails is never returned, CorruptEntry names the topic, entry and file instead.
#     The store keeps any bytes (its own tests store plain ones), so reads check entries that
#     carry the magic; `letterbox verify` is strict: a broker's entry sent without a checksum
#     starts with its metadata size, whose first byte is 0 (metadata is far below 16 MiB), so
#     any other first byte is a damaged magic.
#   * The WAL: SQLite replays a WAL up to the first frame whose checksum (cumulative over the
#     frames before it) or salt fails, and silently drops every frame after it. scan_wal()
#     recomputes the checksums and finds frames of this WAL generation (same salt) after the
#     break: a commit after the break's own transaction is a transaction SQLite would drop
#     although it was fsynced (a power cut tears at most the last, unacknowledged one, since
#     the writer waits for each commit's fsync before it starts the next) -- damage, certain.
# Invariant: nothing here writes to the data dir; every check reads only.
from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from crc32c import crc32c

from .errors import CorruptEntry

WAL_MAGIC_LE, WAL_MAGIC_BE = 0x377F0682, 0x377F0683
WAL_HEADER, FRAME_HEADER = 32, 24
_HDR = struct.Struct(">IIIIIIII")
_FRAME = struct.Struct(">IIIIII")
WHAT_TO_DO = ("stop the broker, keep a copy of the data dir, run `letterbox verify --data-dir {dir}` to see what "
              "is damaged, then restore a backup with `letterbox restore`")


def entry_checksum_ok(data: bytes | memoryview, strict: bool = False) -> bool | None:
    """True: the entry's CRC32C matches; False: damaged; None: it carries no checksum. `strict`
    (letterbox verify, on a broker's data): an entry without a checksum must start with a
    metadata size (first byte 0), else its magic is what is damaged."""
    n = len(data)
    pos = 0
    if n >= 6 and data[0] == 0x0E and data[1] == 0x02:  # broker entry metadata first
        pos = 6 + int.from_bytes(data[2:6], "big")
    if pos + 6 <= n and data[pos] == 0x0E and data[pos + 1] == 0x01:
        return crc32c(memoryview(data)[pos + 6:]) == int.from_bytes(data[pos + 2:pos + 6], "big")
    if pos > n:
        return False
    return False if strict and (pos + 4 > n or data[pos] != 0) else None


class _Named(Protocol):
    name: str
    ledger_id: int


class _Payloads(Protocol):
    directory: Path

    def read(self, name: str) -> bytes: ...


def read_checked(payloads: _Payloads, ledgers: Mapping[str, _Named], ledger_id: int, entry_id: int,
                 data: bytes | str, after_good: bool = False) -> bytes | None:
    """A stored entry's bytes (read from its payload file when the row names one), checked;
    a damaged one raises CorruptEntry, or gives None when `after_good` (a read that returned
    good entries first stops short of it; the next read starts there and raises)."""
    where = None
    if type(data) is str:  # a large entry: its payload file's name
        where = payloads.directory / data
        data = payloads.read(data)
    assert isinstance(data, bytes)
    if entry_checksum_ok(data) is False:
        if after_good:
            return None
        topic = next((led.name for led in ledgers.values() if led.ledger_id == ledger_id), f"ledger {ledger_id}")
        file = where if where is not None else "letterbox.db"
        data_dir = payloads.directory.parent
        raise CorruptEntry(f"entry {entry_id} of topic {topic} (ledger {ledger_id}) in {file} fails its checksum "
                           f"and is not served; " + WHAT_TO_DO.format(dir=data_dir))
    return data


@dataclass(frozen=True)
class WalDamage:
    path: Path
    frame: int  # the first frame whose checksum fails (0-based)
    offset: int  # its byte offset in the file
    dropped: int  # the first frame SQLite would drop (the start of the broken frame's transaction)
    frames_after: int  # frames of this WAL generation from `dropped` to the end
    commits_after: int  # commit frames among them
    certain: bool  # a fsynced transaction after the break would be dropped: not a power cut's doing

    def describe(self) -> str:
        return (f"{self.path}: frame {self.frame} (byte {self.offset}) fails its checksum; SQLite would silently "
                f"drop the {self.frames_after} frames from frame {self.dropped} on ({self.commits_after} commits)")


def scan_wal(path: Path) -> WalDamage | None:
    """The first frame of a WAL that SQLite would drop while later frames of the same WAL
    generation exist (None: the WAL replays whole, or there is none)."""
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed below
    except FileNotFoundError:
        return None
    with f:
        header = f.read(WAL_HEADER)
        if len(header) < WAL_HEADER:
            return None
        magic, _version, page_size, _seq, salt1, salt2, c1, c2 = _HDR.unpack(header)
        frame_size = FRAME_HEADER + page_size
        size = path.stat().st_size
        total = (size - WAL_HEADER) // frame_size if page_size else 0
        big = magic == WAL_MAGIC_BE
        ok = magic in (WAL_MAGIC_LE, WAL_MAGIC_BE) and 512 <= page_size <= 65536
        s0, s1 = _checksum(header[:24], 0, 0, big) if ok else (0, 0)
        if not ok or (s0, s1) != (c1, c2):  # SQLite ignores the whole WAL
            commits = 0
            for i in range(total):
                f.seek(WAL_HEADER + i * frame_size)
                fh = f.read(FRAME_HEADER)
                commits += len(fh) == FRAME_HEADER and _FRAME.unpack(fh)[1] != 0
            return WalDamage(path, 0, 0, 0, total, commits, commits > 0) if total else None
        last_commit_end = 0  # frames SQLite keeps: those up to the last valid commit
        broken = -1
        for i in range(total):
            raw = f.read(frame_size)
            pgno, commit, fs1, fs2, fc1, fc2 = _FRAME.unpack_from(raw)
            if (fs1, fs2) != (salt1, salt2):
                break  # a frame of an older generation: the end of this one
            s0, s1 = _checksum(raw[:8], s0, s1, big)
            s0, s1 = _checksum(raw[FRAME_HEADER:], s0, s1, big)
            if (s0, s1) != (fc1, fc2) or pgno == 0:
                broken = i
                break
            if commit:
                last_commit_end = i + 1
        if broken < 0:
            return None
        frames_after = 0
        commit_frames: list[int] = []
        for i in range(last_commit_end, total):
            f.seek(WAL_HEADER + i * frame_size)
            fh = f.read(FRAME_HEADER)
            _pgno, commit, fs1, fs2, _c1, _c2 = _FRAME.unpack(fh)
            if (fs1, fs2) != (salt1, salt2):
                break
            frames_after += 1
            if commit:
                commit_frames.append(i)
        return WalDamage(path, broken, WAL_HEADER + broken * frame_size, last_commit_end, frames_after,
                         len(commit_frames), len(commit_frames) > 1)


def _checksum(data: bytes, s0: int, s1: int, big: bool) -> tuple[int, int]:
    """SQLite's WAL checksum over `data` (a multiple of 8 bytes), continued from (s0, s1)."""
    words: Any = array("I", data)
    if big != (sys.byteorder == "big"):
        words.byteswap()
    it = iter(words)
    for x0, x1 in zip(it, it, strict=True):
        s0 = (s0 + x0 + s1) & 0xFFFFFFFF
        s1 = (s1 + x1 + s0) & 0xFFFFFFFF
    return s0, s1
