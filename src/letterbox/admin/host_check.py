# The admin server answers only to the Host names it is meant to (DNS
# rebinding): a web page on evil.example can point its own name at 127.0.0.1,
# and the visitor's browser then sends same-origin requests -- Origin and Host
# both evil.example, so the cross-origin guard sees nothing wrong -- to a broker
# on the visitor's machine, which with authentication off (the default) would
# obey. So a request whose Host is a NAME this broker does not know answers 421
# with a reason and reaches no route.
# Known: IP literals (a rebinding attack needs a name; a broker bound to
# 0.0.0.0 is reached by any of its addresses), `localhost` and `*.localhost`,
# the bind address, advertised_address, the host names of
# advertised_listeners, this machine's host name, and admin_allowed_hosts
# (`*` there turns the check off). Case and the port are ignored; a request
# without a Host header (HTTP/1.0) passes.
# Invariants: the check runs before authentication and every route, /metrics
# and the console included; it changes nothing and reads only the header.
from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web

from letterbox.admin.http_errors import Handler, error_response

if TYPE_CHECKING:
    from aiohttp.typedefs import Middleware

    from letterbox.config import BrokerConfig

ANY = "*"


def known_hosts(config: BrokerConfig) -> frozenset[str]:
    """The host names (lower case, no port) the admin server answers to besides IP literals."""
    names = {"localhost", config.bind, config.advertised_address, socket.gethostname()}
    if config.advertised_listeners:
        from letterbox.advertised_listeners import ListenerConfigError, parse

        try:
            for listener in parse(config.advertised_listeners).values():
                for url in (listener.plain, listener.tls):
                    if url:
                        names.add(urlsplit(url).hostname or "")
        except ListenerConfigError:
            pass  # refused at start-up by BrokerConfig.validate
    names.update(config.admin_allowed_hosts)
    return frozenset(n.strip().lower().strip("[]") for n in names if n and n.strip())


def host_name(header: str) -> str:
    """The name of a Host header: without its port and the brackets of an IPv6 literal."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    if header.count(":") == 1:
        return header.split(":", 1)[0]
    return header  # a name, or a bare IPv6 literal (not a valid Host, kept as it is)


def allowed(host: str, known: frozenset[str]) -> bool:
    if ANY in known or host in known or host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_guard(config: BrokerConfig) -> Middleware:
    known = known_hosts(config)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Host")
        if header is not None and not allowed(host_name(header), known):
            shown = header.strip()[:100]
            return error_response(421, f"Host {shown!r} is not a name of this broker: requests must name it by "
                                       "an IP address, localhost or a configured name (to allow this one, add it "
                                       "to admin_allowed_hosts: LETTERBOX_ADMIN_ALLOWED_HOSTS, "
                                       "--admin-allowed-hosts)")
        return await handler(request)

    return guard
