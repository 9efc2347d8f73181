"""Admin input rules without a broker: JSON limits, name rules, raw path escapes."""
from __future__ import annotations

import pytest

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import MAX_JSON_DEPTH, check_raw_path, parse_json
from letterbox.errors import InvalidTopicName
from letterbox.names import name_problem
from letterbox.topic_name import TopicName


@pytest.mark.parametrize(
    ("raw", "status", "fragment"),
    [
        (b"[" * 100_000 + b"]" * 100_000, 400, "nested deeper"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, 400, "nested deeper"),
        (b"\xff\xfe{}", 400, "not UTF-8"),
        (b'{"a": "\xe9"}', 400, "not UTF-8"),
        (b"Infinity", 400, "finite"),
        (b'{"minDelayMs": NaN}', 400, "finite"),
        (b"-Infinity", 400, "finite"),
        (b"1e999", 400, "not finite"),
        (b'{"minDelayMs": 1000000000000000000000000000000}', 400, "out of range"),
        (b"9" * 5000, 400, "out of range"),
        (b'{"k": "\\ud800"}', 400, "surrogate"),
        (b"{nope", 400, "Malformed JSON"),
        (b" " * (1024 * 1024 + 1), 413, "larger than"),
    ],
)
def test_bad_bodies_are_refused_with_a_reason(raw: bytes, status: int, fragment: str) -> None:
    with pytest.raises(AdminError) as info:
        parse_json(raw)
    assert info.value.status == status
    assert fragment in info.value.reason


def test_good_bodies_parse() -> None:
    assert parse_json(b"") is None
    assert parse_json(b'{"a": [1, 2.5, "x[{"], "b": {"c": null}}') == {"a": [1, 2.5, "x[{"], "b": {"c": None}}
    assert parse_json(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH) is not None
    assert parse_json(str(2**63 - 1).encode()) == 2**63 - 1
    assert parse_json('{"k": "\u00e9\\ud83d\\ude00"}'.encode()) == {"k": "\u00e9\U0001F600"}


@pytest.mark.parametrize("raw", ["/admin/v2/tenants/%zz", "/admin/v2/tenants/a%2", "/x/%", "/t/%E9"])
def test_bad_percent_encoding_is_400(raw: str) -> None:
    with pytest.raises(AdminError) as info:
        check_raw_path(raw)
    assert info.value.status == 400


def test_good_percent_encoding_passes() -> None:
    check_raw_path("/admin/v2/persistent/public/default/a%20b%25c?x=%C3%A9")


@pytest.mark.parametrize(
    ("kind", "value", "fragment"),
    [
        ("tenant", "", "empty"),
        ("tenant", "..", "'..'"),
        ("namespace", "a..b", "'..'"),
        ("tenant", "a%2Fb", "may only contain"),
        ("tenant", "a b", "may only contain"),
        ("subscription", "sub\x00x", "control character"),
        ("subscription", "..", "'..'"),
        ("subscription", "a/b", "'/'"),
        ("topic", "t\x7f", "control character"),
        ("topic", "t\u0085", "control character"),
        ("role", "x" * 1025, "longer than"),
        ("role", " admin", "white space"),
        ("topic", "\ud800", "not valid Unicode"),
    ],
)
def test_bad_names(kind: str, value: str, fragment: str) -> None:
    problem = name_problem(kind, value)  # type: ignore[arg-type]
    assert problem is not None and fragment in problem


@pytest.mark.parametrize(
    ("kind", "value"),
    [("tenant", "acme-1_x=y:z.w"), ("topic", "a b%c"), ("subscription", "my-sub.1"), ("role", "ops@example.com"),
     ("topic", "caf\u00e9")],
)
def test_good_names(kind: str, value: str) -> None:
    assert name_problem(kind, value) is None  # type: ignore[arg-type]


def test_topic_names_follow_the_same_rules() -> None:
    for raw in ("persistent://../default/t", "persistent://public/a..b/t", "persistent://public/default/..",
                "persistent://pu%zzblic/default/t", "persistent://public/default/t\x01"):
        with pytest.raises(InvalidTopicName):
            TopicName.parse(raw)
