"""A FUSE file system that loses what was not fsynced when its power is cut (a test tool).

    python tests/storage/volatile_fs.py PLATTER MOUNTPOINT

Everything lives in this process's memory; PLATTER (a real directory) holds only what is
durable. At start the platter is loaded; when the file system is unmounted (the power cut:
the process using it is killed first, then `fusermount3 -u MOUNTPOINT`), only the durable
state is written back to the platter, so the next mount sees what a disk would after a power
loss. What is durable, as POSIX promises and no more:
  * a file's bytes as of its last fsync/fdatasync (a file never synced comes back empty);
  * a directory's names (creations, removals, renames inside it) as of its last fsync;
    a file whose name never became durable is gone.
Unsynced writes are dropped whole (no torn pages: SQLite and the payload files must not
depend on what a torn write would leave either way). The kernel handles locks (flock and
POSIX locks stay local to the mount) and caches pages only while a file is open.
"""
from __future__ import annotations

import errno
import os
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

import mfusepy as fuse


class Node:
    __slots__ = ("data", "is_dir", "mode", "mtime", "synced")

    def __init__(self, is_dir: bool, mode: int, data: bytes = b"") -> None:
        self.is_dir = is_dir
        self.mode = mode
        self.data = bytearray(data)
        self.synced: bytes = bytes(data)  # durable content
        self.mtime = time.time()


class VolatileFS(fuse.Operations):  # type: ignore[misc]
    use_ns = True

    def __init__(self, platter: Path) -> None:
        self._mu = threading.Lock()
        self.platter = platter
        self.nodes: dict[str, Node] = {"/": Node(True, 0o755)}
        for root, dirs, files in os.walk(platter):
            rel = "/" + os.path.relpath(root, platter).lstrip(".").lstrip("/")
            for d in dirs:
                self.nodes[_join(rel, d)] = Node(True, 0o755)
            for f in files:
                self.nodes[_join(rel, f)] = Node(False, 0o644, (Path(root) / f).read_bytes())
        self.durable: dict[str, Node] = dict(self.nodes)  # path -> node, as the disk's directories say

    # ---- the power cut ----

    def write_platter(self) -> None:
        """Replace the platter with the durable state: durable names, synced bytes."""
        kept = {p: n for p, n in self.durable.items() if _parents_durable(p, self.durable)}
        for root, dirs, files in os.walk(self.platter, topdown=False):
            for f in files:
                os.unlink(Path(root) / f)
            for d in dirs:
                os.rmdir(Path(root) / d)
        for path, node in sorted(kept.items()):
            target = self.platter / path.lstrip("/")
            if node.is_dir:
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(node.synced)

    # ---- helpers ----

    def _node(self, path: str) -> Node:
        node = self.nodes.get(path)
        if node is None:
            raise fuse.FuseOSError(errno.ENOENT)
        return node

    def _children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return [p for p in self.nodes if p != "/" and p.startswith(prefix) and "/" not in p[len(prefix):]]

    # ---- operations ----

    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        with self._mu:
            n = self._node(path)
            kind = stat.S_IFDIR if n.is_dir else stat.S_IFREG
            return {"st_mode": kind | n.mode, "st_nlink": 2 if n.is_dir else 1, "st_size": len(n.data),
                    "st_mtime": n.mtime, "st_ctime": n.mtime, "st_atime": n.mtime,
                    "st_uid": os.getuid(), "st_gid": os.getgid()}

    def readdir(self, path: str, fh: Any) -> list[str]:
        with self._mu:
            return [".", "..", *(p.rsplit("/", 1)[1] for p in self._children(path))]

    def mkdir(self, path: str, mode: int) -> int:
        with self._mu:
            if path in self.nodes:
                raise fuse.FuseOSError(errno.EEXIST)
            self.nodes[path] = Node(True, mode & 0o777)
        return 0

    def rmdir(self, path: str) -> int:
        with self._mu:
            if self._children(path):
                raise fuse.FuseOSError(errno.ENOTEMPTY)
            self._node(path)
            del self.nodes[path]
        return 0

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        with self._mu:
            if path not in self.nodes:
                self.nodes[path] = Node(False, mode & 0o777)
        return 0

    def open(self, path: str, flags: int) -> int:
        with self._mu:
            n = self._node(path)
            if flags & os.O_TRUNC:
                del n.data[:]
        return 0

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self._mu:
            return bytes(self._node(path).data[offset:offset + size])

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self._mu:
            n = self._node(path)
            if offset > len(n.data):
                n.data.extend(b"\0" * (offset - len(n.data)))
            n.data[offset:offset + len(data)] = data
            n.mtime = time.time()
            return len(data)

    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        with self._mu:
            n = self._node(path)
            if length < len(n.data):
                del n.data[length:]
            else:
                n.data.extend(b"\0" * (length - len(n.data)))
        return 0

    def unlink(self, path: str) -> int:
        with self._mu:
            self._node(path)
            del self.nodes[path]
        return 0

    def rename(self, old: str, new: str) -> int:
        with self._mu:
            n = self._node(old)
            moved = {p: m for p, m in self.nodes.items() if p == old or p.startswith(old + "/")}
            for p in moved:
                del self.nodes[p]
            for p, m in moved.items():
                self.nodes[new + p[len(old):]] = m
            self.nodes[new] = n
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self._mu:
            n = self._node(path)
            n.synced = bytes(n.data)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        """The directory's names become durable: its entries in `durable` become its current ones."""
        with self._mu:
            prefix = path.rstrip("/") + "/"
            for p in [p for p in self.durable if p.startswith(prefix) and "/" not in p[len(prefix):]]:
                del self.durable[p]
            for p in self._children(path):
                self.durable[p] = self.nodes[p]
        return 0

    def chmod(self, path: str, mode: int) -> int:
        with self._mu:
            self._node(path).mode = mode & 0o777
        return 0

    def utimens(self, path: str, times: Any = None) -> int:
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 1 << 22, "f_bfree": 1 << 21, "f_bavail": 1 << 21,
                "f_files": 1 << 20, "f_ffree": 1 << 19, "f_favail": 1 << 19, "f_namemax": 255}


def _join(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name


def _parents_durable(path: str, durable: dict[str, Node]) -> bool:
    parent = path.rsplit("/", 1)[0] or "/"
    return parent == "/" or (parent in durable and _parents_durable(parent, durable))


def main() -> None:
    platter, mountpoint = Path(sys.argv[1]), sys.argv[2]
    fs = VolatileFS(platter)
    fuse.FUSE(fs, mountpoint, foreground=True, nothreads=False, attr_timeout=0, entry_timeout=0,
              negative_timeout=0)
    fs.write_platter()  # unmounted: what a disk holds after the power is cut


if __name__ == "__main__":
    main()
