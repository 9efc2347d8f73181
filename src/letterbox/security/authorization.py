# Authorization, in Apache Pulsar's model: which role may do what.
#
#   * super users (config super_user_roles, Pulsar's superUserRoles) may do
#     everything;
#   * a tenant's admin roles (the tenant document's "adminRoles") may do
#     everything inside that tenant, including granting permissions;
#   * other roles get per-namespace and per-topic permissions, stored as
#     Pulsar's Policies JSON stores them, in the namespace document under
#     "auth_policies": {"namespace_auth": {role: [action, ...]},
#     "destination_auth": {topic: {role: [action, ...]}},
#     "subscription_auth_roles": {subscription: [role, ...]}}.
#     Actions are Pulsar's AuthAction names plus letterbox's `edit`; produce, consume
#     and edit are enforced, the others (functions, sources, sinks, packages) are
#     accepted and stored.
#
# Rules: PRODUCER needs `produce`; SUBSCRIBE and readers need `consume` (and,
# when the subscription has roles listed in subscription_auth_roles, a role in
# that list); lookup and partition metadata need either. A partition uses the
# permissions of its partitioned topic. Topic-level grants add to the
# namespace-level ones. Super users and the tenant's admins pass every check.
# The broker's own dead-letter and retry appends are the broker's, not the
# consumer's: nothing checks them. The letterbox move over the admin API (used
# by letterbox.client) needs consume on the source subscription and either
# produce on the target or a target that is the subscription's own failure
# topic (can_move); the same target rule holds for a dead letter topic named
# by a consumer's properties or a namespace's dead-letter policy, and for the
# targets of a redrive (can_write_failure_topic, can_produce). A redrive that
# edits its messages (edit-and-replay) needs, besides the redrive's own rights,
# `edit` granted on the dead letter topic or its namespace (can_edit): super
# users have it, anyone else -- a tenant's admins too -- only once granted.
#
# Invariants: with authorization disabled every check returns True; a role of
# None (no authenticated identity) passes nothing when it is enabled. The
# service reads the store's metadata map on every call (checks happen per
# PRODUCER/SUBSCRIBE/LOOKUP command and per admin request, not per message),
# so a grant or revoke takes effect for the next check without a cache.
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from letterbox.errors import LetterboxError, ServerError
from letterbox.failure.naming import DLQ_SUFFIX, RETRY_SUFFIX, TopicRole, topic_role

if TYPE_CHECKING:
    from letterbox.config import BrokerConfig
    from letterbox.topic_name import TopicName

TENANT_KEY = "tenant:"
AUTH_POLICIES = "auth_policies"
NAMESPACE_AUTH = "namespace_auth"
DESTINATION_AUTH = "destination_auth"
SUBSCRIPTION_AUTH_ROLES = "subscription_auth_roles"
# Pulsar's AuthAction values, and letterbox's `edit` (change a dead letter's payload or
# properties as it is redriven)
ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages", "edit")


class AuthorizationFailed(LetterboxError):
    code = ServerError.AuthorizationError


def empty_auth_policies() -> dict[str, Any]:
    return {NAMESPACE_AUTH: {}, DESTINATION_AUTH: {}, SUBSCRIPTION_AUTH_ROLES: {}}


def check_actions(actions: Any) -> list[str]:
    """A validated, sorted, de-duplicated list of action names; ValueError says what is wrong."""
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ValueError(f"actions must be a JSON list of strings out of {list(ACTIONS)}, got {actions!r}")
    unknown = sorted({a for a in actions if a not in ACTIONS})
    if unknown:
        raise ValueError(f"unknown action(s) {unknown}; known: {list(ACTIONS)}")
    return sorted(set(actions))


def check_auth_policies(value: Any) -> dict[str, Any]:
    """The auth_policies object of a namespace create body, validated and normalised."""
    if not isinstance(value, dict):
        raise ValueError("auth_policies must be a JSON object")
    unknown = sorted(set(value) - {NAMESPACE_AUTH, DESTINATION_AUTH, SUBSCRIPTION_AUTH_ROLES})
    if unknown:
        raise ValueError(
            f"unknown field(s) {unknown} in auth_policies; known: "
            f"{[NAMESPACE_AUTH, DESTINATION_AUTH, SUBSCRIPTION_AUTH_ROLES]}"
        )
    out = empty_auth_policies()
    ns_auth = value.get(NAMESPACE_AUTH) or {}
    if not isinstance(ns_auth, dict):
        raise ValueError("auth_policies.namespace_auth must be an object {role: [actions]}")
    out[NAMESPACE_AUTH] = {_role(r): check_actions(a) for r, a in ns_auth.items()}
    dest = value.get(DESTINATION_AUTH) or {}
    if not isinstance(dest, dict) or not all(isinstance(v, dict) for v in dest.values()):
        raise ValueError("auth_policies.destination_auth must be an object {topic: {role: [actions]}}")
    out[DESTINATION_AUTH] = {
        str(t): {_role(r): check_actions(a) for r, a in grants.items()} for t, grants in dest.items()
    }
    subs = value.get(SUBSCRIPTION_AUTH_ROLES) or {}
    if not isinstance(subs, dict) or not all(
        isinstance(v, list) and all(isinstance(r, str) for r in v) for v in subs.values()
    ):
        raise ValueError("auth_policies.subscription_auth_roles must be an object {subscription: [roles]}")
    out[SUBSCRIPTION_AUTH_ROLES] = {str(s): sorted(set(v)) for s, v in subs.items()}
    return out


def _role(role: Any) -> str:
    if not isinstance(role, str) or not role.strip():
        raise ValueError(f"a role must be a non-empty string, got {role!r}")
    return role


class _Metadata(Protocol):
    def get_metadata(self, key: str) -> str | None: ...


class _NamespaceDocuments(Protocol):
    def document(self, namespace: str) -> dict[str, Any] | None: ...


class BrokerView(Protocol):
    """What authorization reads of the BrokerService (a Protocol, so security does not
    import the broker package, which imports security)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def store(self) -> _Metadata: ...

    @property
    def namespace_policies(self) -> _NamespaceDocuments: ...


class AuthorizationService:
    def __init__(self, service: BrokerView) -> None:
        self.service = service
        self.enabled: bool = service.config.authorization_enabled
        self.super_user_roles = frozenset(service.config.super_user_roles)

    # --- roles -----------------------------------------------------------------
    def is_super_user(self, role: str | None) -> bool:
        if not self.enabled:
            return True
        return role is not None and role in self.super_user_roles

    def tenant_admin_roles(self, tenant: str) -> list[str]:
        raw = self.service.store.get_metadata(TENANT_KEY + tenant)
        doc = _json_object(raw)
        roles = doc.get("adminRoles") or []
        return [r for r in roles if isinstance(r, str)]

    def is_tenant_admin(self, role: str | None, tenant: str) -> bool:
        if self.is_super_user(role):
            return True
        return role is not None and role in self.tenant_admin_roles(tenant)

    # --- namespace and topic permissions -------------------------------------------
    def auth_policies(self, namespace: str) -> dict[str, Any]:
        doc = self.service.namespace_policies.document(namespace) or {}
        value = doc.get(AUTH_POLICIES)
        out = empty_auth_policies()
        if isinstance(value, dict):
            for key in out:
                if isinstance(value.get(key), dict):
                    out[key] = value[key]
        return out

    def actions(self, role: str, topic: TopicName) -> set[str]:
        """What role was granted on topic: its namespace's grants plus the topic's own."""
        policies = self.auth_policies(topic.namespace_name)
        granted = set(_actions_of(policies[NAMESPACE_AUTH].get(role)))
        base = str(topic.partitioned_parent)
        for name in {str(topic), base}:
            grants = policies[DESTINATION_AUTH].get(name)
            if isinstance(grants, dict):
                granted |= set(_actions_of(grants.get(role)))
        return granted

    def namespace_actions(self, role: str, namespace: str) -> set[str]:
        return set(_actions_of(self.auth_policies(namespace)[NAMESPACE_AUTH].get(role)))

    def can_produce(self, role: str | None, topic: TopicName) -> bool:
        if self.is_tenant_admin(role, topic.tenant):
            return True
        return role is not None and "produce" in self.actions(role, topic)

    def can_consume(self, role: str | None, topic: TopicName, subscription: str | None) -> bool:
        if self.is_tenant_admin(role, topic.tenant):
            return True
        if role is None or "consume" not in self.actions(role, topic):
            return False
        if subscription is None:
            return True
        allowed = self.auth_policies(topic.namespace_name)[SUBSCRIPTION_AUTH_ROLES].get(subscription)
        return not allowed or role in allowed

    def can_edit(self, role: str | None, topic: TopicName) -> bool:
        """Edit dead letters of `topic` as they are redriven: super users, and roles granted
        `edit` on the topic or its namespace (a tenant's admins only once granted)."""
        if not self.enabled or self.is_super_user(role):
            return True
        return role is not None and "edit" in self.actions(role, topic)

    def can_lookup(self, role: str | None, topic: TopicName) -> bool:
        return self.can_produce(role, topic) or self.can_consume(role, topic, None)

    def can_consume_namespace(self, role: str | None, namespace: str) -> bool:
        """consume granted on the namespace itself (listing its topics, reading its stats)."""
        tenant = namespace.split("/", 1)[0]
        if self.is_tenant_admin(role, tenant):
            return True
        return role is not None and "consume" in self.namespace_actions(role, namespace)

    def can_move(self, role: str | None, source: TopicName, subscription: str, target: TopicName) -> bool:
        """The letterbox move (admin .../subscription/{sub}/letterbox/move): consume on the
        source subscription, and the target is that subscription's own failure topic
        (`<topic>-<subscription>-...` in the source's namespace, as letterbox.client names its
        retry and dead letter topics) or a topic the role may produce to."""
        if not self.can_consume(role, source, subscription):
            return False
        return self.can_write_failure_topic(role, source, subscription, target)

    def can_write_failure_topic(self, role: str | None, source: TopicName, subscription: str,
                                target: TopicName) -> bool:
        """A dead-letter or retry write for source/subscription into target, made by the
        broker on a consumer's behalf: free into the subscription's own failure topics
        (is_failure_topic_of), else the role must be allowed to produce on target."""
        return is_failure_topic_of(source, subscription, target) or self.can_produce(role, target)

    # --- raising forms, for callers that report an error -----------------------------
    def check_produce(self, role: str | None, topic: TopicName) -> None:
        if not self.can_produce(role, topic):
            raise AuthorizationFailed(f"Role {role} is not authorized to produce on topic {topic}")

    def check_consume(self, role: str | None, topic: TopicName, subscription: str | None) -> None:
        if not self.can_consume(role, topic, subscription):
            where = f" with subscription {subscription}" if subscription else ""
            raise AuthorizationFailed(f"Role {role} is not authorized to consume topic {topic}{where}")

    def check_lookup(self, role: str | None, topic: TopicName) -> None:
        if not self.can_lookup(role, topic):
            raise AuthorizationFailed(f"Role {role} is not authorized to look up topic {topic}")


def is_failure_topic_of(source: TopicName, subscription: str, target: TopicName) -> bool:
    """target is the subscription's own dead letter or retry topic in source's namespace:
    `<base>-<subscription>` + `-DLQ`, `-RETRY` or a retry tier `-RETRY-<delay>`, where base
    is the source topic's (partitioned parent's) local name, or its base when the source is
    itself such a failure topic (a retry topic's messages move on to the same DLQ)."""
    if (target.domain, target.tenant, target.namespace) != (source.domain, source.tenant, source.namespace):
        return False
    marker = f"-{subscription}-"
    local = source.partitioned_parent.local
    bases = {local}
    cut = local.find(marker)
    if cut > 0:
        bases.add(local[:cut])
    name = target.partitioned_parent.local
    return any(name.startswith(b + marker) and _is_failure_suffix(name[len(b) + len(marker) - 1:])
               for b in bases)


def _is_failure_suffix(suffix: str) -> bool:
    """`-DLQ`, `-RETRY` or `-RETRY-<delay>` and nothing else (not `-log`, not `-x-DLQ`)."""
    if suffix in (DLQ_SUFFIX, RETRY_SUFFIX):
        return True
    return suffix.count("-") == 2 and topic_role("t" + suffix) is TopicRole.RETRY


def _json_object(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _actions_of(value: Any) -> Iterable[str]:
    if isinstance(value, list):
        return [a for a in value if isinstance(a, str)]
    return ()
