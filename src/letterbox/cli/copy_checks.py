# The ends of a copy between letterbox and Apache Pulsar (`letterbox migrate`, `import`,
# `redrive-back`), checked before the first write: each broker answers on its binary protocol
# and its admin API, accepts the credentials given, and (Apache Pulsar) is recent enough for
# what the copy uses (letterbox.migrate.probe says the minimum); the namespaces a copy writes
# into exist, or are created by the copy (migrate's tenants), which a line says. Each refusal is
# one line naming the broker, what is wrong and the option that fixes it: a usage error, exit
# status 2.
# Invariant: nothing here writes, and no message carries a credential.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

import click

from letterbox.auth_options import AuthOptions, AuthOptionsError
from letterbox.cli.http import AdminApiError, AdminClient, AdminUnreachable
from letterbox.migrate.probe import (
    MIN_PROTOCOL_VERSION,
    MIN_PULSAR_VERSION,
    Answer,
    ProbeFailed,
    probe,
    version_tuple,
)
from letterbox.topic_name import TopicName
from letterbox.usage_errors import OneLineUsageError

MIN_PULSAR = ".".join(map(str, MIN_PULSAR_VERSION))


@dataclass(frozen=True)
class End:
    """One side of a copy, as a refusal names it: who it is, and the options that point at it."""

    who: str  # "the target Apache Pulsar", "the local letterbox", ...
    url_option: str  # "--target-url"
    admin_option: str  # "--target-admin-url"
    token_option: str  # "--target-auth-token"


def refuse(message: str) -> NoReturn:
    raise OneLineUsageError(message)


def check_broker(end: End, url: str, auth: AuthOptions, *, pulsar: bool) -> Answer:
    """The broker at `url` answers a CONNECT, takes the credentials and, when it is Apache
    Pulsar (`pulsar`), speaks a protocol version recent enough."""
    try:
        answer = probe(url, auth.binary_credentials(), auth.ssl_context())
    except AuthOptionsError as exc:
        refuse(f"{end.who}: {exc}")
    except ProbeFailed as exc:
        if exc.kind == "unreachable":
            refuse(f"{end.who} at {url} does not answer ({exc}): is it running? (check {end.url_option})")
        if exc.kind == "credentials":
            refuse(f"{end.who} at {url} refuses the credentials ({exc}): give a valid token with {end.token_option}")
        refuse(f"{end.who} at {url} is not a Pulsar broker this can use: {exc} (check {end.url_option})")
    if pulsar and not answer.is_letterbox:
        version = version_tuple(answer.server_version)
        if answer.protocol_version < MIN_PROTOCOL_VERSION or (version is not None and version < MIN_PULSAR_VERSION):
            refuse(f"{end.who} at {url} is {answer.server_version or 'a broker'} speaking protocol version "
                   f"{answer.protocol_version}; this needs Apache Pulsar {MIN_PULSAR} or later (protocol "
                   f"{MIN_PROTOCOL_VERSION}+): upgrade the cluster")
    return answer


def check_admin(end: End, admin: AdminClient, *, pulsar: bool) -> None:
    """The admin API answers, takes the credentials and (Apache Pulsar) says a recent enough
    version (`GET /admin/v2/brokers/version`; a role not allowed to read it passes here)."""
    try:
        version = admin.request("GET", "/admin/v2/brokers/version").body.decode(errors="replace").strip()
    except AdminUnreachable:
        refuse(f"{end.who}'s admin API at {admin.base_url} does not answer: is it running? (check {end.admin_option})")
    except AdminApiError as exc:
        if exc.status == 401:
            refuse(f"{end.who}'s admin API at {admin.base_url} refuses the credentials (HTTP 401): "
                   f"give a valid token with {end.token_option}")
        if exc.status in (403, 404):
            return  # the credentials are taken (403), or an admin API without the route (404)
        refuse(f"{end.who}'s admin API at {admin.base_url} answered HTTP {exc.status} to GET "
               f"/admin/v2/brokers/version (check {end.admin_option})")
    found = version_tuple(version.strip('"'))
    if pulsar and found is not None and found < MIN_PULSAR_VERSION:
        refuse(f"{end.who} at {admin.base_url} is Apache Pulsar {version.strip(chr(34))}; this needs "
               f"Apache Pulsar {MIN_PULSAR} or later: upgrade the cluster")


def missing_tenants(end: End, admin: AdminClient, wanted: tuple[str, ...]) -> list[str]:
    """The tenants of `wanted` the target lacks (migrate creates them); a role that may not list
    tenants is refused: creating a tenant needs a super user."""
    try:
        have = set(admin.get_json("/admin/v2/tenants"))
    except AdminApiError as exc:
        refuse(f"{end.who}'s admin API at {admin.base_url} does not let this role list tenants (HTTP "
               f"{exc.status}): migrate needs a super user's token there ({end.token_option})")
    return [t for t in wanted if t not in have]


def check_namespace(end: End, admin: AdminClient, namespace: str, create_hint: str) -> None:
    """The namespace exists on the broker of `admin` (a copy into it would fail half-way)."""
    tenant = namespace.split("/")[0]
    try:
        have = admin.get_json(f"/admin/v2/namespaces/{tenant}")
    except AdminApiError as exc:
        if exc.status == 404:
            refuse(f"{end.who} has no tenant {tenant}: {create_hint}")
        refuse(f"{end.who}'s admin API at {admin.base_url} answered HTTP {exc.status} for the namespaces of "
               f"{tenant} (check {end.token_option})")
    if namespace not in set(have or []):
        refuse(f"{end.who} has no namespace {namespace}: {create_hint}")


def check_topic_namespace(end: End, client: Any, topic: str, hint: str) -> None:
    """The namespace of `topic` exists on the broker of the official `client`, asked on the binary
    protocol (a partitioned-metadata lookup: it creates nothing); a refusal otherwise."""
    import pulsar

    try:
        client.get_topic_partitions(topic)
    except pulsar.TopicNotFound:  # Pulsar's answer for a namespace (or tenant) it does not have
        refuse(f"{end.who} has no namespace {TopicName.parse(topic).namespace_name} (for {topic}): {hint}")


def check_ends(checks: list[tuple[End, AdminClient | None, str | None, AuthOptions, bool]]) -> None:
    """Each (end, its admin client or None, its service URL or None, credentials, is Pulsar) checked in
    order: admin API first, then the binary protocol."""
    for end, admin, url, auth, pulsar in checks:
        if admin is not None:
            check_admin(end, admin, pulsar=pulsar)
        if url is not None:
            check_broker(end, url, auth, pulsar=pulsar)


def note(line: str) -> None:
    click.echo(f"note: {line}", err=True)
