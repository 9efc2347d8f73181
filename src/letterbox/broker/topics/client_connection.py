# What a producer or a consumer needs of the client connection it lives on
# (connection.server_cnx.ServerCnx is the one implementation): send frames through its one
# checked outbound path (`send`), know whether the transport takes more, close a producer or
# a consumer of the client (telling it, and forgetting it on the connection), and the
# broker's configuration. It names no producer or consumer: they name it.
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from letterbox.config import BrokerConfig


class Configured(Protocol):
    @property
    def config(self) -> BrokerConfig: ...


class ClientConnection(Protocol):
    remote: str  # the peer's host:port, for logs and attempt rows
    client_version: str  # CONNECT's client_version

    @property
    def writable(self) -> bool: ...

    @property
    def service(self) -> Configured: ...  # the broker, for its configuration

    def send(self, frames: bytes, *, consumer_id: int | None = None, producer_id: int | None = None,
             count: int = 1) -> None: ...
    def close_producer(self, producer_id: int) -> None: ...
    def close_consumer(self, consumer_id: int) -> None: ...
