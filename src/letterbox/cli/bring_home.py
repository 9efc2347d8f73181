# `letterbox import` and `letterbox redrive-back`: a topic or dead letter topic of an Apache Pulsar
# cluster copied into the local letterbox (filters as `letterbox dlq redrive` has), and the
# imported messages sent back to their source topics on Pulsar after a fix (letterbox.migrate's
# bring_home does the copying). The local broker is reached with the usual --service-url /
# --admin-url and --auth-token / --tls-trust-certs; Pulsar with --pulsar-url and its own
# --pulsar-* options. Both are safe to rerun: the receiving namespace's deduplication stores a
# message sent twice once (switched on locally; on Pulsar a note says when it is off). Both ends
# are checked before the first write (copy_checks): each answers and takes its credentials,
# Pulsar is recent enough, the local namespace an import writes into exists, and so does every
# namespace on Pulsar a redrive-back writes into (each message's REAL_TOPIC, read beforehand).
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from letterbox.auth_flags import auth_options, current_auth
from letterbox.auth_options import AuthOptions, AuthOptionsError
from letterbox.cli.copy_checks import (
    End,
    check_admin,
    check_broker,
    check_namespace,
    check_topic_namespace,
)
from letterbox.cli.http import AdminApiError, AdminClient
from letterbox.cli.migrate import open_client
from letterbox.cli.params import TIME_HELP, parse_time_ms
from letterbox.default_urls import (
    ADMIN_URL_ENV,
    DEFAULT_ADMIN_URL,
    DEFAULT_SERVICE_URL,
    SERVICE_URL_ENV,
)
from letterbox.errors import InvalidTopicName
from letterbox.message_properties import DEAD_LETTER_REASONS
from letterbox.topic_name import TopicName

PULSAR_TOKEN_ENV = "LETTERBOX_PULSAR_AUTH_TOKEN"
PULSAR = End("Apache Pulsar", "--pulsar-url", "--pulsar-admin-url", "--pulsar-auth-token")
LOCAL = End("the local letterbox", "--service-url", "--admin-url", "--auth-token")


def _local_options(f: Any) -> Any:
    f = click.option("--admin-url", envvar=ADMIN_URL_ENV, default=DEFAULT_ADMIN_URL, show_default=True,
                     help=f"The local letterbox's admin API (env {ADMIN_URL_ENV}).")(f)
    f = click.option("--service-url", envvar=SERVICE_URL_ENV, default=DEFAULT_SERVICE_URL, show_default=True,
                     help=f"The local letterbox broker (env {SERVICE_URL_ENV}).")(f)
    return f


def _pulsar_options(f: Any) -> Any:
    f = click.option("--pulsar-tls-trust-certs", type=click.Path(dir_okay=False, exists=True),
                     help="CA certificate(s), PEM, of the Pulsar cluster's TLS certificate.")(f)
    f = click.option("--pulsar-auth-token", envvar=PULSAR_TOKEN_ENV,
                     help=f"A token for the Pulsar cluster (env {PULSAR_TOKEN_ENV}).")(f)
    f = click.option("--pulsar-url", required=True, help="The Apache Pulsar service URL.")(f)
    return f


def _pulsar_auth(token: str | None, trust: str | None) -> AuthOptions:
    try:
        return AuthOptions.from_token(token, trust or "")
    except AuthOptionsError as exc:
        raise click.UsageError(str(exc)) from None


def _topic(text: str, what: str) -> str:
    try:
        return str(TopicName.parse(text))
    except InvalidTopicName as exc:
        raise click.BadParameter(str(exc), param_hint=what) from None


def _namespace_path(topic: str) -> str:
    return f"/admin/v2/namespaces/{TopicName.parse(topic).namespace_name}"


@contextmanager
def _clients(pulsar_url: str, pulsar_auth: AuthOptions, service_url: str) -> Iterator[tuple[Any, Any]]:
    """The official client on Pulsar and on the local letterbox, closed at the end; a copy's
    failure (a refused message, a topic the copy cannot place, a client error) said in one line."""
    import pulsar

    pulsar_client = open_client(pulsar_url, pulsar_auth)
    local = open_client(service_url, current_auth())
    try:
        yield pulsar_client, local
    except (RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    except pulsar.PulsarException as exc:
        raise click.ClickException(f"Apache Pulsar at {pulsar_url} or letterbox at {service_url} failed: "
                                   f"{exc} (is each reachable, and the topic's name right?)") from None
    finally:
        pulsar_client.close()
        local.close()


def _progress(topic: str) -> Any:
    return lambda sent: click.echo(f"\r{topic}: {sent} sent", nl=False, err=True)


@click.command("import")
@click.argument("topic")
@_pulsar_options
@click.option("--as", "local_topic", help="The local topic to copy into (default: the same name).")
@click.option("--reason", "-r", type=click.Choice(DEAD_LETTER_REASONS), help="Only dead letters of this reason.")
@click.option("--key", "-k", help="Only messages with this key.")
@click.option("--since", help=f"Only messages dead-lettered (else published) at or after this time: {TIME_HELP}.")
@click.option("--until", help=f"Only messages dead-lettered (else published) before this time: {TIME_HELP}.")
@_local_options
@auth_options
def import_(topic: str, pulsar_url: str, pulsar_auth_token: str | None,
            pulsar_tls_trust_certs: str | None, local_topic: str | None, reason: str | None, key: str | None,
            since: str | None, until: str | None, service_url: str, admin_url: str) -> None:
    """Copy TOPIC (a topic or dead letter topic) of an Apache Pulsar cluster into this letterbox."""
    from letterbox.migrate.bring_home import Selection, import_topic

    source = _topic(topic, "'TOPIC'")
    target = _topic(local_topic, "'--as'") if local_topic else source
    since_ms = parse_time_ms(since, "'--since'") if since else None
    until_ms = parse_time_ms(until, "'--until'") if until else None
    if since_ms is not None and until_ms is not None and since_ms >= until_ms:
        raise click.BadParameter("--since must be earlier than --until")
    pulsar_auth = _pulsar_auth(pulsar_auth_token, pulsar_tls_trust_certs)
    local_admin = AdminClient(admin_url, auth=current_auth())
    check_broker(PULSAR, pulsar_url, pulsar_auth, pulsar=True)
    check_admin(LOCAL, local_admin, pulsar=False)
    check_broker(LOCAL, service_url, current_auth(), pulsar=False)
    namespace = TopicName.parse(target).namespace_name
    check_namespace(LOCAL, local_admin, namespace,
                    f"create it with `letterbox admin namespaces create {namespace}`, or give --as a topic of another")
    with _clients(pulsar_url, pulsar_auth, service_url) as (pulsar, local):
        pulsar.get_topic_partitions(source)  # Pulsar answers for the topic before anything is written
        local_admin.request("POST", _namespace_path(target) + "/deduplication", True)  # reruns send nothing twice
        copied = import_topic(pulsar, local, source, target, Selection(reason, key, since_ms, until_ms),
                              _progress(target))
    click.echo(f"\rimported {copied.messages} messages of {source} into {target} ({copied.sent} sent by this run)")


@click.command("redrive-back")
@click.argument("topic")
@_pulsar_options
@click.option("--to", "to", help="The Pulsar topic to send every message to (default: each one's REAL_TOPIC).")
@click.option("--pulsar-admin-url", help="The Pulsar cluster's admin URL: check the namespaces written to on it, "
              "and say when one has no deduplication.")
@_local_options
@auth_options
def redrive_back(topic: str, pulsar_url: str, pulsar_admin_url: str | None, pulsar_auth_token: str | None,
                 pulsar_tls_trust_certs: str | None, to: str | None, service_url: str, admin_url: str) -> None:
    """Send the messages of local TOPIC (imported dead letters) back to their source topics on Apache Pulsar."""
    from letterbox.migrate.bring_home import destinations
    from letterbox.migrate.bring_home import redrive_back as send_back

    local_topic = _topic(topic, "'TOPIC'")
    target = _topic(to, "'--to'") if to else None
    pulsar_auth = _pulsar_auth(pulsar_auth_token, pulsar_tls_trust_certs)
    answer = check_broker(PULSAR, pulsar_url, pulsar_auth, pulsar=True)
    pulsar_admin = AdminClient(pulsar_admin_url, auth=pulsar_auth) if pulsar_admin_url else None
    if pulsar_admin is not None:
        check_admin(PULSAR, pulsar_admin, pulsar=not answer.is_letterbox)
    check_broker(LOCAL, service_url, current_auth(), pulsar=False)
    with _clients(pulsar_url, pulsar_auth, service_url) as (pulsar, local):
        # every namespace a message goes to is checked before the first message is sent
        hint = ("create it on Pulsar, or give --to a topic of another" if target else
                "create it on Pulsar, or send the messages to another topic with --to")
        by_namespace = {TopicName.parse(t).namespace_name: t
                        for t in sorted([target] if target else destinations(local, local_topic))}
        for namespace, dest in sorted(by_namespace.items()):
            if pulsar_admin is not None:
                check_namespace(PULSAR, pulsar_admin, namespace, hint)
                _note_deduplication(pulsar_admin, dest)
            else:
                check_topic_namespace(PULSAR, pulsar, dest, hint)
        copied = send_back(local, pulsar, local_topic, target, _progress(local_topic))
    click.echo(f"\rsent {copied.messages} messages of {local_topic} back to Pulsar ({copied.sent} by this run)")


def _note_deduplication(admin: AdminClient, topic: str) -> None:
    try:
        on = admin.get_json(_namespace_path(topic) + "/deduplication")
    except AdminApiError:
        on = None
    if on is not True:
        click.echo(f"note: deduplication is not on for {TopicName.parse(topic).namespace_name} on Pulsar: a rerun after an "
                   "interruption may send a message twice (turn it on with `letterbox admin namespaces "
                   "set-deduplication NS --enable --admin-url PULSAR_ADMIN_URL`)", err=True)
