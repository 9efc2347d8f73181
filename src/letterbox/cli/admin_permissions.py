# `letterbox admin namespaces permissions | grant-permission | revoke-permission`
# (pulsar-admin's names and options): namespace permissions per role, over the
# admin API's .../namespaces/{tenant}/{ns}/permissions routes.
from __future__ import annotations

import click

from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.output import echo_json
from letterbox.cli.params import NAMESPACE, namespace_path, q

ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages", "edit")


def register(namespaces: click.Group) -> None:
    namespaces.add_command(permissions)
    namespaces.add_command(grant_permission)
    namespaces.add_command(revoke_permission)


@admin_command(None, "permissions", "namespace", NAMESPACE)
def permissions(a: AdminContext, namespace: str) -> None:
    """Show the roles granted on NAMESPACE and their actions."""
    grants = a.client.get_json(namespace_path(namespace) + "/permissions") or {}
    if a.json:
        echo_json(grants)
        return
    for role, actions in sorted(grants.items()):
        click.echo(f"{role}: {', '.join(actions)}")


def _actions(_ctx: click.Context, _param: click.Parameter, value: str) -> list[str]:
    actions = sorted({a.strip() for a in value.split(",") if a.strip()})
    unknown = [a for a in actions if a not in ACTIONS]
    if not actions or unknown:
        raise click.BadParameter(f"use a comma-separated list out of {', '.join(ACTIONS)}, got {value!r}")
    return actions


@admin_command(None, "grant-permission", "namespace", NAMESPACE)
@click.option("--role", required=True, help="The role to grant to.")
@click.option("--actions", required=True, callback=_actions, help="Comma-separated: produce,consume,functions,...")
def grant_permission(a: AdminContext, namespace: str, role: str, actions: list[str]) -> None:
    """Grant ROLE the ACTIONS on NAMESPACE (replaces what the role had)."""
    a.client.request("POST", f"{namespace_path(namespace)}/permissions/{q(role)}", actions)
    a.done(f"Granted {', '.join(actions)} on {namespace} to {role}", namespace=namespace, role=role,
           actions=actions)


@admin_command(None, "revoke-permission", "namespace", NAMESPACE)
@click.option("--role", required=True, help="The role whose permissions to revoke.")
def revoke_permission(a: AdminContext, namespace: str, role: str) -> None:
    """Revoke every permission ROLE has on NAMESPACE."""
    a.client.request("DELETE", f"{namespace_path(namespace)}/permissions/{q(role)}")
    a.done(f"Revoked the permissions of {role} on {namespace}", namespace=namespace, role=role)
