"""Stand-ins for the far end of a copy (`letterbox migrate`, `import`, `redrive-back`), each
recording what it was asked: an admin API that answers 401 to everything or says an old
version, and a binary-protocol broker whose CONNECTED says an old protocol version (or that
refuses the credentials with ERROR, as Apache Pulsar does). A test checks from the records that
a refused copy wrote nothing."""
from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from letterbox.protocol import FrameDecoder, commands, pb


@dataclass
class Seen:
    requests: list[str] = field(default_factory=list)  # "METHOD /path" or a binary command's name

    @property
    def writes(self) -> list[str]:
        return [r for r in self.requests if r.split()[0] in ("PUT", "POST", "DELETE", "PRODUCER", "SUBSCRIBE", "SEND")]


@contextmanager
def admin_stub(version: str = "4.0.8", status: int = 200) -> Iterator[tuple[str, Seen]]:
    """An admin API answering `status` to every call (200: `version`, and [] or {} bodies)."""
    seen = Seen()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.requests.append(f"{self.command} {self.path}")
            if status != 200:
                body, kind = json.dumps({"reason": "HTTP 401 Unauthorized"}).encode(), "application/json"
            elif self.path.endswith("/brokers/version"):
                body, kind = version.encode(), "text/plain"
            else:
                body, kind = (b'["standalone"]' if self.path.endswith("/clusters") else b"[]"), "application/json"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def broker_stub(server_version: str = "Pulsar Server2.5.0", protocol_version: int = 15,
                refuse: str | None = None) -> Iterator[tuple[str, Seen]]:
    """A binary-protocol broker: CONNECTED with these versions, or (`refuse`) ERROR
    AuthenticationError with that message before CONNECTED, as Apache Pulsar refuses a token."""
    seen = Seen()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while not stop.is_set():
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not None:
                    cmd = frame.command
                    seen.requests.append(pb.BaseCommand.Type.Name(cmd.type))
                    if cmd.type == pb.BaseCommand.CONNECT:
                        conn.sendall(commands.error(commands.NO_REQUEST_ID, pb.AuthenticationError, refuse)
                                     if refuse else commands.connected(server_version, protocol_version))
                    elif cmd.type == pb.BaseCommand.GET_TOPICS_OF_NAMESPACE:
                        conn.sendall(commands.error(cmd.getTopicsOfNamespace.request_id, pb.ServiceNotReady, "stub"))

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"pulsar://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        stop.set()
        listener.close()
