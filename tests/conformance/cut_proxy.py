"""A TCP proxy in front of a broker that can be cut and restored, to make a broker "go away"
mid-operation without stopping it (the reference Apache Pulsar is shared by the whole run).

Owns one listening socket on 127.0.0.1 (its port fixed at the first start, so clients reconnect
to the same address) and a pair of pump threads per connection. `cut()` closes the listener and
every connection at once: clients see their connections reset and new ones refused, as when a
broker dies. `restore()` listens again on the same port. With `cut_after_bytes`, the proxy cuts
itself once that many bytes have passed from clients to the broker (counted over all
connections), and runs `on_cut` (e.g. to cut the admin API's proxy too).

On the Pulsar binary protocol (`pulsar=True`) the broker's lookup answers are rewritten to name
the proxy, so a client's producers and consumers come back through it rather than connecting to
the broker's advertised address directly; other frames pass through as the bytes they are.
Invariant: after `cut()` returns, no byte passes in either direction until `restore()`.
"""
from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable

from letterbox.protocol import encode_command, pb

_SIZE = struct.Struct(">I")


class CutProxy:
    def __init__(self, upstream: tuple[str, int], *, pulsar: bool = False, cut_after_bytes: int | None = None,
                 on_cut: Callable[[], None] | None = None) -> None:
        self.upstream = upstream
        self.pulsar = pulsar
        self.cut_after_bytes = cut_after_bytes
        self.on_cut = on_cut
        self.port = 0
        self.bytes_up = 0
        self.was_cut = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None

    @property
    def url_host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> CutProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="cut-proxy-accept").start()
        return self

    def restore(self) -> None:
        """Listen again on the same port (after a cut)."""
        self.cut_after_bytes = None
        self.was_cut.clear()
        self.start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            doomed, self._open = self._open, set()
            first = not self.was_cut.is_set()
            self.was_cut.set()
        for s in ([listener] if listener else []) + list(doomed):
            _close(s)
        if first and self.on_cut is not None:
            self.on_cut()

    def stop(self) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                downstream, _ = listener.accept()
            except OSError:
                return  # cut: the listener is closed
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                _close(downstream)
                continue
            with self._lock:
                if self._listener is not listener:  # cut while connecting
                    _close(downstream)
                    _close(upstream)
                    return
                self._open.update((downstream, upstream))
            threading.Thread(target=self._pump_up, args=(downstream, upstream), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(upstream, downstream), daemon=True).start()

    def _pump_up(self, src: socket.socket, dst: socket.socket) -> None:
        """Client to broker, counted."""
        while data := _recv(src):
            with self._lock:
                if src not in self._open:
                    return
                self.bytes_up += len(data)
                over = self.cut_after_bytes is not None and self.bytes_up >= self.cut_after_bytes
            if over:
                self.cut()  # this chunk never reaches the broker
                return
            if not _send(dst, data):
                break
        self._drop(src, dst)

    def _pump_down(self, src: socket.socket, dst: socket.socket) -> None:
        """Broker to client, lookup answers rewritten on the Pulsar protocol."""
        pending = b""
        while data := _recv(src):
            if not self.pulsar:
                out = data
            else:
                pending += data
                out, pending = self._rewrite(pending)
            with self._lock:
                if src not in self._open:
                    return
            if out and not _send(dst, out):
                break
        self._drop(src, dst)

    def _rewrite(self, buf: bytes) -> tuple[bytes, bytes]:
        """The whole frames of `buf` (lookup answers naming the proxy) and the rest."""
        out = []
        while len(buf) >= 8:
            total = _SIZE.unpack_from(buf)[0]
            if len(buf) < 4 + total:
                break
            frame, buf = buf[:4 + total], buf[4 + total:]
            size = _SIZE.unpack_from(frame, 4)[0]
            if size == total - 4:  # a command without payload: perhaps a lookup answer
                cmd = pb.BaseCommand()
                cmd.ParseFromString(frame[8:])
                if cmd.type == pb.BaseCommand.LOOKUP_RESPONSE and cmd.lookupTopicResponse.brokerServiceUrl:
                    cmd.lookupTopicResponse.brokerServiceUrl = f"pulsar://{self.url_host}"
                    frame = encode_command(cmd)
            out.append(frame)
        return b"".join(out), buf

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            for s in socks:
                self._open.discard(s)
        for s in socks:
            _close(s)


def _recv(s: socket.socket) -> bytes:
    try:
        return s.recv(65536)
    except OSError:
        return b""


def _send(s: socket.socket, data: bytes) -> bool:
    try:
        s.sendall(data)
        return True
    except OSError:
        return False


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()
