# Advertised listeners (Pulsar's broker.conf `advertisedListeners` and
# `internalListenerName`; config.py validates them, broker/connection/handlers_topic.py answers
# LOOKUP with them): named sets of addresses clients are told to connect to,
# e.g. `internal:pulsar://10.0.0.5:6650,internal:pulsar+ssl://10.0.0.5:6651,
# external:pulsar://broker.example.com:6650`. A LOOKUP carrying
# `advertised_listener_name` (the official clients' `listener_name`) is answered with
# that listener's URLs; one without gets the internal listener's; an unknown name is
# refused with ServiceNotReady and Pulsar's message ("the broker do not have NAME
# listener", which the C++ client matches to keep its connection), then the listeners
# there are. Without advertisedListeners the broker has no named listener, as Pulsar:
# lookups without a name answer advertised_address (or the address the client
# connected to), and every name is refused.
from __future__ import annotations

from dataclasses import dataclass

from letterbox.errors import ServiceNotReady

SCHEMES = ("pulsar", "pulsar+ssl")


class ListenerConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Listener:
    plain: str | None
    tls: str | None


def parse(text: str) -> dict[str, Listener]:
    """`name:url,name:url,...` -> {name: Listener}; ListenerConfigError says what is wrong."""
    found: dict[str, dict[str, str]] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, url = item.partition(":")
        scheme = url.split("://", 1)[0] if "://" in url else ""
        if not sep or not name or scheme not in SCHEMES or not url.split("://", 1)[1]:
            raise ListenerConfigError(
                f"advertisedListeners item {item!r}: use NAME:pulsar://HOST:PORT or NAME:pulsar+ssl://HOST:PORT")
        urls = found.setdefault(name, {})
        if scheme in urls:
            raise ListenerConfigError(f"advertisedListeners: listener {name!r} has two {scheme}:// addresses")
        urls[scheme] = url
    return {n: Listener(u.get("pulsar"), u.get("pulsar+ssl")) for n, u in found.items()}


def internal_name(listeners: dict[str, Listener], configured: str) -> str:
    if configured:
        if configured not in listeners:
            raise ListenerConfigError(
                f"internalListenerName {configured!r} is not one of the advertisedListeners: {sorted(listeners)}")
        return configured
    return next(iter(listeners))


def select(listeners: dict[str, Listener], internal: str, requested: str) -> tuple[str, str | None]:
    """The (plain, tls) URLs a lookup answers for listener `requested` ('' = internal)."""
    name = requested or internal
    listener = listeners.get(name)
    if listener is None:
        raise unknown_listener(name, listeners)
    plain = listener.plain or listener.tls or ""
    return plain, listener.tls


def unknown_listener(name: str, listeners: dict[str, Listener]) -> ServiceNotReady:
    """The refusal of a lookup naming a listener the broker does not have."""
    there = ", ".join(sorted(listeners)) if listeners else "none (advertisedListeners is not set)"
    return ServiceNotReady(f"the broker do not have {name} listener; its listeners: {there}")
