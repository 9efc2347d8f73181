"""AuthorizationService decisions on stored tenants and namespace documents,
without a broker: super users, tenant admins, namespace and topic grants,
subscription roles, partitions, and everything allowed when disabled."""
from __future__ import annotations

import json
from typing import Any

import pytest

from letterbox.config import BrokerConfig
from letterbox.security.authorization import (
    AuthorizationFailed,
    AuthorizationService,
    check_actions,
    check_auth_policies,
)
from letterbox.topic_name import TopicName


class _Store:
    def __init__(self, data: dict[str, str]) -> None:
        self.data = data

    def get_metadata(self, key: str) -> str | None:
        return self.data.get(key)


class _Policies:
    def __init__(self, store: _Store) -> None:
        self.store = store

    def document(self, ns: str) -> dict[str, Any] | None:
        raw = self.store.get_metadata("namespace:" + ns)
        return None if raw is None else json.loads(raw)


class _Service:
    def __init__(self, enabled: bool, data: dict[str, str]) -> None:
        self.config = BrokerConfig(authorization_enabled=enabled, super_user_roles=["root"])
        self.store = _Store(data)
        self.namespace_policies = _Policies(self.store)


ORDERS = TopicName.parse("persistent://acme/orders/t")
OTHER = TopicName.parse("persistent://acme/other/t")
DATA = {
    "tenant:acme": json.dumps({"adminRoles": ["acme-admin"], "allowedClusters": ["standalone"]}),
    "namespace:acme/orders": json.dumps({"auth_policies": {
        "namespace_auth": {"A": ["produce"], "B": ["consume"]},
        "destination_auth": {"persistent://acme/orders/special": {"A": ["consume"]}},
        "subscription_auth_roles": {"locked": ["C"]},
    }}),
    "namespace:acme/other": json.dumps({}),
}


def _authz(enabled: bool = True) -> AuthorizationService:
    return AuthorizationService(_Service(enabled, DATA))  # type: ignore[arg-type]


def test_namespace_grants_decide_produce_and_consume() -> None:
    a = _authz()
    assert a.can_produce("A", ORDERS) and not a.can_consume("A", ORDERS, "s")
    assert a.can_consume("B", ORDERS, "s") and not a.can_produce("B", ORDERS)
    assert a.can_lookup("A", ORDERS) and a.can_lookup("B", ORDERS)
    for role in ("A", "B", "nobody", None):
        assert not a.can_lookup(role, OTHER)
    with pytest.raises(AuthorizationFailed, match="Role B is not authorized to produce"):
        a.check_produce("B", ORDERS)


def test_super_user_and_tenant_admin_pass_everything_in_their_scope() -> None:
    a = _authz()
    assert a.is_super_user("root") and not a.is_super_user("acme-admin") and not a.is_super_user(None)
    for role in ("root", "acme-admin"):
        assert a.can_produce(role, OTHER) and a.can_consume(role, OTHER, "x")
        assert a.is_tenant_admin(role, "acme")
    assert not a.is_tenant_admin("acme-admin", "public")
    assert not a.can_produce("acme-admin", TopicName.parse("persistent://public/default/t"))


def test_topic_grants_add_to_namespace_grants_and_partitions_inherit() -> None:
    a = _authz()
    special = TopicName.parse("persistent://acme/orders/special")
    assert a.can_consume("A", special, "s") and not a.can_consume("A", ORDERS, "s")
    assert a.can_consume("A", special.partition(3), "s")
    assert a.actions("A", special) == {"produce", "consume"}


def test_subscription_auth_roles_restrict_a_named_subscription() -> None:
    a = _authz()
    assert not a.can_consume("B", ORDERS, "locked")
    assert a.can_consume("B", ORDERS, "free")


def test_disabled_allows_everything() -> None:
    a = _authz(enabled=False)
    assert a.is_super_user(None) and a.can_produce(None, OTHER) and a.can_consume("x", OTHER, "locked")


def test_actions_and_auth_policies_are_validated() -> None:
    assert check_actions(["consume", "produce", "consume"]) == ["consume", "produce"]
    with pytest.raises(ValueError, match="unknown action"):
        check_actions(["write"])
    with pytest.raises(ValueError, match="list of strings"):
        check_actions("produce")
    with pytest.raises(ValueError, match="unknown field"):
        check_auth_policies({"namespace_auth": {}, "nope": 1})
    with pytest.raises(ValueError, match="non-empty string"):
        check_auth_policies({"namespace_auth": {"": ["produce"]}})
    got = check_auth_policies({"namespace_auth": {"A": ["produce"]}})
    assert got == {"namespace_auth": {"A": ["produce"]}, "destination_auth": {}, "subscription_auth_roles": {}}


def test_move_targets_own_failure_topics_or_need_produce() -> None:
    a = _authz()
    src = TopicName.parse("persistent://acme/orders/t")
    retry = TopicName.parse("persistent://acme/orders/t-s-RETRY")
    dlq = TopicName.parse("persistent://acme/orders/t-s-DLQ")
    assert a.can_move("B", src, "s", retry) and a.can_move("B", src, "s", dlq)
    assert a.can_move("B", retry, "s", dlq) and a.can_move("B", src.partition(2), "s", dlq)
    assert not a.can_move("B", src, "s", TopicName.parse("persistent://acme/orders/t-other-DLQ"))
    assert not a.can_move("B", src, "s", TopicName.parse("persistent://acme/orders/elsewhere"))
    assert not a.can_move("B", src, "s", TopicName.parse("persistent://acme/other/t-s-DLQ"))
    assert not a.can_move("A", src, "s", dlq)  # no consume on the source
    assert not a.can_move("B", src, "locked", TopicName.parse("persistent://acme/orders/t-locked-DLQ"))


def test_move_targets_named_like_failure_topics_but_not_failure_topics_need_produce() -> None:
    a = _authz()
    src = TopicName.parse("persistent://acme/orders/t")
    assert a.can_move("B", src, "s", TopicName.parse("persistent://acme/orders/t-s-RETRY-5s"))
    for other in ("t-s-log", "t-s-audit-DLQ", "t-s-DLQ-copy", "t-s-RETRY-x", "t-s-"):
        assert not a.can_move("B", src, "s", TopicName.parse("persistent://acme/orders/" + other)), other
