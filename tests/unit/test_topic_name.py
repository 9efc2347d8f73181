"""TopicName parsing: short and full forms, domains, partitions, clear errors."""
from __future__ import annotations

import pytest

from letterbox.errors import InvalidTopicName, ServerError
from letterbox.topic_name import TopicName


@pytest.mark.parametrize(
    ("raw", "full"),
    [
        ("orders", "persistent://public/default/orders"),
        ("acme/payments/orders", "persistent://acme/payments/orders"),
        ("persistent://acme/payments/orders", "persistent://acme/payments/orders"),
        ("non-persistent://acme/payments/ticks", "non-persistent://acme/payments/ticks"),
        ("persistent://public/default/a.b_c-d=e:f%20", "persistent://public/default/a.b_c-d=e:f%20"),
    ],
)
def test_valid_names_are_fully_qualified(raw: str, full: str) -> None:
    name = TopicName.parse(raw)
    assert str(name) == full
    assert TopicName.parse(full) == name  # the full form parses to the same value


def test_components() -> None:
    name = TopicName.parse("non-persistent://acme/payments/ticks")
    assert (name.domain, name.tenant, name.namespace, name.local) == (
        "non-persistent", "acme", "payments", "ticks"
    )
    assert name.persistent is False
    assert name.namespace_name == "acme/payments"
    short = TopicName.parse("ticks")
    assert (short.domain, short.tenant, short.namespace, short.local) == (
        "persistent", "public", "default", "ticks"
    )
    assert short.persistent is True
    assert short.namespace_name == "public/default"


def test_topic_names_are_immutable_and_hashable() -> None:
    name = TopicName.parse("orders")
    with pytest.raises(AttributeError):
        name.local = "other"  # type: ignore[misc]
    assert {name, TopicName.parse("persistent://public/default/orders")} == {name}


def test_partition_suffix() -> None:
    part = TopicName.parse("persistent://acme/ns/orders-partition-3")
    assert part.partition_index == 3
    assert part.partitioned_parent == TopicName.parse("persistent://acme/ns/orders")
    parent = TopicName.parse("acme/ns/orders")
    assert parent.partition_index == -1
    assert parent.partitioned_parent is parent
    assert parent.partition(3) == part
    assert str(parent.partition(0)) == "persistent://acme/ns/orders-partition-0"
    assert TopicName.parse("orders-partition-x").partition_index == -1
    assert TopicName.parse("orders-partition-").partition_index == -1
    nested = TopicName.parse("orders-partition-1-partition-2")
    assert nested.partition_index == 2
    assert nested.partitioned_parent.local == "orders-partition-1"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("", "empty"),
        ("http://acme/ns/t", "invalid topic domain 'http'"),
        ("persistent://acme/t", "expected persistent://tenant/namespace/topic"),
        ("persistent://acme/ns/t/extra", "expected persistent://tenant/namespace/topic"),
        ("acme/t", "use 'topic', 'tenant/namespace/topic'"),
        ("a/b/c/d", "use 'topic', 'tenant/namespace/topic'"),
        ("persistent:///ns/t", "invalid tenant ''"),
        ("persistent://acme//t", "invalid namespace ''"),
        ("persistent://ac me/ns/t", "invalid tenant 'ac me'"),
        ("acme/n$s/t", "invalid namespace 'n$s'"),
        ("persistent://acme/ns/", "invalid local topic name ''"),
        (" orders", "invalid local topic name ' orders'"),
        ("orders\n", "invalid local topic name"),
        ("ord\x00ers", "invalid local topic name"),
        ("t" * 1025, "longer than 1024 characters"),
    ],
)
def test_invalid_names_have_clear_messages(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidTopicName) as info:
        TopicName.parse(raw)
    assert fragment in str(info.value)
    assert info.value.code == ServerError.InvalidTopicName
    if raw and len(raw) <= 1024:
        assert repr(raw) in str(info.value)  # the message quotes what was given


def test_longest_allowed_name() -> None:
    raw = "persistent://public/default/" + "t" * (1024 - len("persistent://public/default/"))
    assert str(TopicName.parse(raw)) == raw
