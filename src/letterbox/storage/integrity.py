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

import contextlib
import struct
import sys
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from letterbox.protocol.speedups import crc32c

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
    frame: int  # the first frame SQLite would drop (0-based)
    offset: int  # its byte offset in the file
    frames_after: int  # frames of this WAL generation from `frame` on, as far as known
    commits_after: int  # commit frames among them
    certain: bool  # a fsynced transaction would be dropped: not a crash's or power cut's doing
    reason: str  # what is wrong, in words

    def describe(self) -> str:
        return (f"{self.path}: {self.reason}; SQLite would silently drop {self.frames_after} frames from frame "
                f"{self.frame} (byte {self.offset}) on ({self.commits_after} commits)")


def scan_wal(path: Path) -> WalDamage | None:
    """Frames of a WAL that SQLite would drop although they belong to transactions that
    committed (None: the WAL replays whole, or there is none). Besides the checksums, the
    -shm file's index header (written after each commit's fsync, never ahead of what is
    durable) says how many frames of this WAL generation were committed: a WAL holding fewer
    valid ones was cut short."""
    shm = _shm_header(Path(f"{str(path)[:-4]}-shm")) if str(path).endswith("-wal") else None
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed below
    except FileNotFoundError:
        f = None
    header = f.read(WAL_HEADER) if f is not None else b""
    if len(header) < WAL_HEADER:
        if f is not None:
            f.close()
        if shm is not None and shm[1] > shm[2]:
            return WalDamage(path, 0, 0, shm[1] - shm[2], 1, True, f"the log is missing or cut to {len(header)} "
                             f"bytes, though {shm[1] - shm[2]} committed frames were not yet in letterbox.db")
        return None
    assert f is not None
    with f:
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
            return WalDamage(path, 0, 0, total, commits, commits > 0,
                             "the log's header fails its checksum") if total else None
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
        offset = WAL_HEADER + last_commit_end * frame_size
        committed = shm[1] if shm is not None and shm[0] == header[16:24] and shm[1] > shm[2] else 0
        if broken < 0:
            if committed > last_commit_end:
                return WalDamage(path, last_commit_end, offset, committed - last_commit_end, 1, True,
                                 f"the log is cut short: it holds {last_commit_end} valid frames, the broker "
                                 f"had committed {committed} (letterbox.db-shm)")
            return None
        commit_frames: list[int] = []
        frames_after = 0
        for i in range(last_commit_end, total):
            f.seek(WAL_HEADER + i * frame_size)
            _pgno, commit, fs1, fs2, _c1, _c2 = _FRAME.unpack(f.read(FRAME_HEADER))
            if (fs1, fs2) != (salt1, salt2):
                break
            frames_after += 1
            if commit:
                commit_frames.append(i)
        certain = len(commit_frames) > 1 or committed > last_commit_end
        return WalDamage(path, last_commit_end, offset, frames_after, len(commit_frames), certain,
                         f"frame {broken} (byte {WAL_HEADER + broken * frame_size}) fails its checksum")


@contextlib.contextmanager
def shm_kept(db: Path) -> Iterator[None]:
    """Put the -shm file back byte for byte after a read-only look at the database: SQLite
    rebuilds the WAL index from the WAL it reads, which would hide a WAL cut short from the
    next scan_wal."""
    shm = Path(f"{db}-shm")
    index = shm.read_bytes() if shm.is_file() else None
    try:
        yield
    finally:
        if index is not None:
            shm.write_bytes(index)


def _shm_header(path: Path) -> tuple[bytes, int, int] | None:
    """(the WAL salt, mxFrame, nBackfill) of a -shm file's index header, if it is whole."""
    try:
        with open(path, "rb") as f:
            raw = f.read(136)
    except OSError:
        return None
    if len(raw) < 100 or raw[:48] != raw[48:96] or raw[12] != 1:
        return None
    order = "<" if sys.byteorder == "little" else ">"
    mx_frame = struct.unpack_from(order + "I", raw, 16)[0]
    backfill = struct.unpack_from(order + "I", raw, 96)[0]
    return raw[32:40], mx_frame, backfill


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
