# Avro schema parsing and the schema resolution rules the registry's
# compatibility checks need (Pulsar's AVRO and JSON schemas are both Avro
# record definitions). Pure functions, no I/O.
#   parse(text)              the definition as a small typed tree; AvroSchemaError
#                            (a ValueError) names what is malformed and where;
#   can_read(reader, writer) None when data written with `writer` can be read with
#                            `reader`, else the first reason why not.
# can_read is the check Apache Pulsar's broker runs (Avro's SchemaValidator, whose
# strategies ask Avro's resolving grammar for errors), so it answers as Pulsar does:
# - same primitive, or a promotion (int -> long/float/double, long -> float/double,
#   float -> double, string <-> bytes);
# - records resolve by structure, their names are not compared: every reader field
#   is a writer field of the same name with a readable type, or has a default;
#   writer-only fields are skipped; aliases are not applied;
# - enums need the same full name (a writer symbol the reader lacks is no error: the
#   grammar maps it to a failure at read time only); fixed: same full name and size;
# - arrays and maps by items and values;
# - a writer union is readable when each of its branches is; a reader union reads a
#   non-union writer through its first matching branch: the same primitive type, a
#   named type of the same full name, else a record that resolves (one of the same
#   short name preferred), else a promotion.
# Logical types are read as their underlying type.
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class AvroSchemaError(ValueError):
    """A schema definition that is not valid Avro."""


@dataclass(frozen=True)
class Primitive:
    name: str


@dataclass(eq=False)
class Field:
    name: str
    type: AvroType
    has_default: bool
    aliases: tuple[str, ...] = ()


@dataclass(eq=False)
class Named:
    kind: str  # record | enum | fixed
    fullname: str
    aliases: tuple[str, ...] = ()
    fields: list[Field] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    size: int = 0


@dataclass(eq=False)
class Array:
    items: AvroType


@dataclass(eq=False)
class Map:
    values: AvroType


@dataclass(eq=False)
class UnionType:
    branches: list[AvroType]


AvroType = Primitive | Named | Array | Map | UnionType


def parse(text: str | bytes) -> AvroType:
    """Parse a JSON schema definition; AvroSchemaError says what is wrong."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AvroSchemaError(f"schema definition is not JSON: {exc}") from None
    return _Parser().parse(doc, None, "schema")


class _Parser:
    def __init__(self) -> None:
        self.names: dict[str, Named] = {}

    def parse(self, doc: Any, namespace: str | None, where: str) -> AvroType:
        if isinstance(doc, str):
            return self._reference(doc, namespace, where)
        if isinstance(doc, list):
            if not doc:
                raise AvroSchemaError(f"{where}: a union needs at least one branch")
            branches = [self.parse(b, namespace, f"{where}[{i}]") for i, b in enumerate(doc)]
            if any(isinstance(b, UnionType) for b in branches):
                raise AvroSchemaError(f"{where}: a union may not contain a union")
            return UnionType(branches)
        if not isinstance(doc, dict):
            raise AvroSchemaError(f"{where}: expected a type name, object or union, got {doc!r}")
        kind = doc.get("type")
        if kind is None:
            raise AvroSchemaError(f"{where}: missing \"type\"")
        if isinstance(kind, (list, dict)):
            return self.parse(kind, namespace, where)
        if not isinstance(kind, str):
            raise AvroSchemaError(f"{where}: \"type\" must be a string, got {kind!r}")
        if kind in PRIMITIVES:
            return Primitive(kind)
        if kind == "array":
            if "items" not in doc:
                raise AvroSchemaError(f"{where}: array without \"items\"")
            return Array(self.parse(doc["items"], namespace, f"{where}.items"))
        if kind == "map":
            if "values" not in doc:
                raise AvroSchemaError(f"{where}: map without \"values\"")
            return Map(self.parse(doc["values"], namespace, f"{where}.values"))
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(doc, "record" if kind == "error" else kind, namespace, where)
        return self._reference(kind, namespace, where)

    def _reference(self, name: str, namespace: str | None, where: str) -> AvroType:
        if name in PRIMITIVES:
            return Primitive(name)
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        named = self.names.get(full) or self.names.get(name)
        if named is None:
            raise AvroSchemaError(f"{where}: unknown type {name!r}")
        return named

    def _named(self, doc: dict[str, Any], kind: str, namespace: str | None, where: str) -> Named:
        name = doc.get("name")
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(f"{where}: a {kind} needs a \"name\" (a non-empty string)")
        ns = doc.get("namespace", namespace)
        if ns is not None and not isinstance(ns, str):
            raise AvroSchemaError(f"{where}: \"namespace\" must be a string")
        full = name if "." in name or not ns else f"{ns}.{name}"
        if full in self.names:
            raise AvroSchemaError(f"{where}: type {full!r} is defined twice")
        own_ns = full.rsplit(".", 1)[0] if "." in full else None
        aliases = tuple(_qualify(a, own_ns) for a in _strings(doc.get("aliases", []), f"{where}.aliases"))
        named = Named(kind, full, aliases)
        self.names[full] = named
        where = f"{where}({full})"
        if kind == "record":
            fields = doc.get("fields")
            if not isinstance(fields, list):
                raise AvroSchemaError(f"{where}: a record needs \"fields\" (a list)")
            seen: set[str] = set()
            for i, f in enumerate(fields):
                if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                    raise AvroSchemaError(f"{where}.fields[{i}]: a field needs a \"name\" and a \"type\"")
                if f["name"] in seen:
                    raise AvroSchemaError(f"{where}: field {f['name']!r} is defined twice")
                seen.add(f["name"])
                ftype = self.parse(f["type"], own_ns, f"{where}.{f['name']}")
                named.fields.append(Field(f["name"], ftype, "default" in f,
                                          _strings(f.get("aliases", []), f"{where}.{f['name']}.aliases")))
        elif kind == "enum":
            symbols = _strings(doc.get("symbols"), f"{where}.symbols")
            if not symbols or len(set(symbols)) != len(symbols):
                raise AvroSchemaError(f"{where}: an enum needs distinct \"symbols\"")
            named.symbols = symbols
            default = doc.get("default")
            if default is not None and default not in symbols:
                raise AvroSchemaError(f"{where}: enum default {default!r} is not one of its symbols")
            named.enum_default = default
        else:
            size = doc.get("size")
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise AvroSchemaError(f"{where}: a fixed needs a \"size\" (an integer >= 0)")
            named.size = size
        return named


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AvroSchemaError(f"{where}: expected a list of strings")
    return tuple(value)


def _qualify(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def describe(t: AvroType) -> str:
    if isinstance(t, Primitive):
        return t.name
    if isinstance(t, Named):
        return f"{t.kind} {t.fullname}"
    if isinstance(t, Array):
        return f"array<{describe(t.items)}>"
    if isinstance(t, Map):
        return f"map<{describe(t.values)}>"
    return "union[" + ", ".join(describe(b) for b in t.branches) + "]"


def can_read(reader: AvroType, writer: AvroType) -> str | None:
    """None if `reader` reads data written with `writer`, else why not."""
    return _resolve(reader, writer, set(), "")


def _kind(t: AvroType) -> str:
    if isinstance(t, Primitive):
        return t.name
    if isinstance(t, Named):
        return t.kind
    return "array" if isinstance(t, Array) else "map" if isinstance(t, Map) else "union"


def _promotes(writer: AvroType, reader: AvroType) -> bool:
    return isinstance(writer, Primitive) and isinstance(reader, Primitive) \
        and reader.name in PROMOTIONS.get(writer.name, ())


def _resolve(r: AvroType, w: AvroType, seen: set[tuple[int, int]], path: str) -> str | None:
    at = f" at {path}" if path else ""
    if isinstance(w, UnionType):
        for b in w.branches:
            reason = _resolve(r, b, seen, path)
            if reason is not None:
                return reason
        return None
    if isinstance(r, UnionType):
        branch = _matching_branch(r, w, seen, path)
        if branch is None:
            return f"{describe(r)}{at} cannot read {describe(w)}"
        return _resolve(branch, w, seen, path)
    if _kind(r) != _kind(w):
        if _promotes(w, r):
            return None
        return f"{describe(w)}{at} cannot be read as {describe(r)}"
    if isinstance(r, Primitive):
        return None
    if isinstance(r, Array) and isinstance(w, Array):
        return _resolve(r.items, w.items, seen, f"{path}[]")
    if isinstance(r, Map) and isinstance(w, Map):
        return _resolve(r.values, w.values, seen, f"{path}{{}}")
    assert isinstance(r, Named) and isinstance(w, Named)
    if r.kind == "fixed":
        if r.fullname != w.fullname or r.size != w.size:
            return f"fixed {w.fullname} (size {w.size}){at} cannot be read as fixed {r.fullname} (size {r.size})"
        return None
    if r.kind == "enum":
        return None if r.fullname == w.fullname else f"enum {w.fullname}{at} cannot be read as enum {r.fullname}"
    return _resolve_record(r, w, seen, path or r.fullname)


def _matching_branch(r: UnionType, w: AvroType, seen: set[tuple[int, int]], path: str) -> AvroType | None:
    """The reader union's branch that reads the (non-union) writer type, as Avro picks it."""
    structural: AvroType | None = None
    for b in r.branches:
        if _kind(b) != _kind(w):
            continue
        if not isinstance(w, Named):
            return b
        assert isinstance(b, Named)
        if b.fullname == w.fullname:
            return b
        if w.kind == "record" and (structural is None or _short(b) == _short(w)) \
                and _resolve_record(b, w, set(seen), path) is None:
            structural = b
    if structural is not None:
        return structural
    return next((b for b in r.branches if _promotes(w, b)), None)


def _short(t: Named) -> str:
    return t.fullname.rsplit(".", 1)[-1]


def _resolve_record(r: Named, w: Named, seen: set[tuple[int, int]], path: str) -> str | None:
    key = (id(r), id(w))
    if key in seen:
        return None
    seen.add(key)
    written = {f.name: f for f in w.fields}
    for rf in r.fields:
        if rf.name not in written and not rf.has_default:
            return f"field {path}.{rf.name} is not in the writer's schema and has no default"
    for rf in r.fields:
        wf = written.get(rf.name)
        if wf is not None:
            reason = _resolve(rf.type, wf.type, seen, f"{path}.{rf.name}")
            if reason is not None:
                return reason
    return None
