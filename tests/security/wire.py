"""A raw binary-protocol connection with our own codec, to see exactly what the
broker puts on the wire (ERROR codes and messages, AUTH_CHALLENGE)."""
from __future__ import annotations

import socket
import ssl
import time

from letterbox.protocol import client_commands, pb
from letterbox.protocol.framing import FrameDecoder, encode_command

T = pb.BaseCommand


class Wire:
    def __init__(self, port: int, tls_ca: str | None = None) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if tls_ca is not None:
            sock = ssl.create_default_context(cafile=tls_ca).wrap_socket(sock, server_hostname="localhost")
        self.sock = sock
        self.decoder = FrameDecoder()

    def connect(self, method: str | None = None, data: bytes | None = None, refresh: bool = True) -> pb.BaseCommand:
        flags = pb.FeatureFlags(supports_auth_refresh=refresh)
        self.sock.sendall(client_commands.connect("wire-test", 21, auth_method_name=method, auth_data=data,
                                                  feature_flags=flags))
        return self.next(10)

    def send(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def auth_response(self, method: str, data: bytes) -> None:
        body = pb.CommandAuthResponse(client_version="wire-test", protocol_version=21,
                                      response=pb.AuthData(auth_method_name=method, auth_data=data))
        self.send(encode_command(T(type=T.AUTH_RESPONSE, authResponse=body)))

    def next(self, timeout: float) -> pb.BaseCommand:
        """The next command other than PING (answered); raises EOFError when the broker closes."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                if frame.command.type == T.PING:
                    self.send(encode_command(T(type=T.PONG, pong=pb.CommandPong())))
                    continue
                return frame.command
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame from the broker")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("broker closed the connection")
            self.decoder.feed(chunk)

    def closed_by_broker(self, timeout: float = 10) -> bool:
        try:
            self.next(timeout)
        except EOFError:
            return True
        except (ConnectionResetError, ssl.SSLError):
            return True
        return False

    def close(self) -> None:
        self.sock.close()
