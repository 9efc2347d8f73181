"""Avro parsing and resolution rules of the schema registry (pure: no broker)."""
from __future__ import annotations

import json
from typing import Any

import pytest

from letterbox.broker.schemas.avro_resolution import AvroSchemaError, can_read, parse


def record(*fields: dict[str, Any], name: str = "User") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "shop", "fields": list(fields)})


NAME = {"name": "name", "type": "string"}
AGE_INT = {"name": "age", "type": "int"}
AGE_LONG = {"name": "age", "type": "long"}
EMAIL_OPT = {"name": "email", "type": ["null", "string"], "default": None}
EMAIL_NO_DEFAULT = {"name": "email", "type": ["null", "string"]}


def test_added_field_with_default_reads_old_data_and_old_reader_skips_it() -> None:
    v1, v2 = parse(record(NAME, AGE_INT)), parse(record(NAME, AGE_INT, EMAIL_OPT))
    assert can_read(v2, v1) is None
    assert can_read(v1, v2) is None


def test_added_field_without_default_cannot_read_old_data() -> None:
    v1, v2 = parse(record(NAME)), parse(record(NAME, EMAIL_NO_DEFAULT))
    reason = can_read(v2, v1)
    assert reason is not None and "shop.User.email" in reason and "no default" in reason


def test_removed_required_field_breaks_old_readers_only() -> None:
    v1, v2 = parse(record(NAME, AGE_INT)), parse(record(NAME))
    assert can_read(v2, v1) is None
    reason = can_read(v1, v2)
    assert reason is not None and "age" in reason


def test_promotions_go_one_way() -> None:
    ints, longs = parse(record(NAME, AGE_INT)), parse(record(NAME, AGE_LONG))
    assert can_read(longs, ints) is None
    reason = can_read(ints, longs)
    assert reason is not None and "long" in reason and "int" in reason
    assert can_read(parse('"bytes"'), parse('"string"')) is None


def test_records_resolve_by_structure_not_name_and_aliases_are_not_applied() -> None:
    """As Pulsar's checker (Avro's resolving grammar): a record's name is not compared, a
    reader field is found by its name only."""
    a = parse(record(NAME, name="User"))
    b = parse(record(NAME, name="Customer"))
    assert can_read(a, b) is None and can_read(b, a) is None
    renamed = parse(record({"name": "full_name", "type": "string", "aliases": ["name"]}))
    assert "full_name" in (can_read(renamed, a) or "")


def test_reader_union_picks_a_record_branch_by_name_then_by_structure() -> None:
    user = json.loads(record(NAME, AGE_INT))
    other = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}
    reader = parse(json.dumps(["null", other, user]))
    assert can_read(reader, parse(record(NAME, AGE_INT))) is None
    assert can_read(reader, parse(record(NAME, AGE_INT, name="Renamed"))) is None  # by structure
    assert can_read(reader, parse(record(AGE_LONG, name="Renamed"))) is not None  # no branch reads it


def test_enums_unions_arrays_maps_and_recursion() -> None:
    e1 = parse('{"type": "enum", "name": "C", "symbols": ["R", "G"]}')
    e2 = parse('{"type": "enum", "name": "C", "symbols": ["R"]}')
    assert can_read(e1, e2) is None and can_read(e2, e1) is None  # symbols are resolved at read time
    assert "enum" in (can_read(parse('{"type": "enum", "name": "D", "symbols": ["R"]}'), e2) or "")
    assert can_read(parse('["null", "long"]'), parse('"int"')) is None
    assert can_read(parse('"int"'), parse('["null", "int"]')) is not None
    assert can_read(parse('{"type": "array", "items": "long"}'), parse('{"type": "array", "items": "int"}')) is None
    assert can_read(parse('{"type": "map", "values": "int"}'), parse('{"type": "map", "values": "string"}'))
    node = '{"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}'
    assert can_read(parse(node), parse(node)) is None


@pytest.mark.parametrize(("text", "what"), [
    ("{not json", "not JSON"),
    ('{"type": "record", "name": "X"}', "fields"),
    ('{"type": "record", "name": "X", "fields": [{"name": "a", "type": "Nope"}]}', "unknown type 'Nope'"),
    ('{"type": "record", "fields": []}', "name"),
    ('{"type": "enum", "name": "E", "symbols": []}', "symbols"),
    ('{"type": "array"}', "items"),
    ('{"type": "record", "name": "X", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]}',
     "defined twice"),
])
def test_malformed_definitions_name_what_is_wrong(text: str, what: str) -> None:
    with pytest.raises(AvroSchemaError, match=what):
        parse(text)
