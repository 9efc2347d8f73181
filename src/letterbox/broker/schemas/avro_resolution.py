# Avro schema parsing and the schema resolution rules the registry's
# compatibility checks need (Pulsar's AVRO and JSON schemas are both Avro
# record definitions). Pure functions, no I/O.
#   parse(text)              the definition as a small typed tree; AvroSchemaError
#                            (a ValueError) names what is malformed and where;
#   can_read(reader, writer) None when data written with `writer` can be read with
#                            `reader` (Avro's resolution), else the first reason why not.
# Rules: same primitive, or a promotion (int -> long/float/double, long ->
# float/double, float -> double, string <-> bytes); records match by full name
# (or a reader alias), every reader field is in the writer (by name or alias)
# with a readable type or has a default, writer-only fields are skipped;
# enums: every writer symbol is a reader symbol unless the reader has a default;
# fixed: same name and size; arrays/maps by items/values; a writer union is
# readable when each branch is; a reader union reads what one branch reads.
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


def _resolve(r: AvroType, w: AvroType, seen: set[tuple[int, int]], path: str) -> str | None:
    at = f" at {path}" if path else ""
    if isinstance(w, UnionType):
        for b in w.branches:
            reason = _resolve(r, b, seen, path)
            if reason is not None:
                return reason
        return None
    if isinstance(r, UnionType):
        if any(_resolve(b, w, seen, path) is None for b in r.branches):
            return None
        return f"{describe(r)}{at} cannot read {describe(w)}"
    if isinstance(r, Primitive) and isinstance(w, Primitive):
        if r.name == w.name or r.name in PROMOTIONS.get(w.name, ()):
            return None
        return f"{w.name}{at} cannot be read as {r.name}"
    if isinstance(r, Array) and isinstance(w, Array):
        return _resolve(r.items, w.items, seen, f"{path}[]")
    if isinstance(r, Map) and isinstance(w, Map):
        return _resolve(r.values, w.values, seen, f"{path}{{}}")
    if isinstance(r, Named) and isinstance(w, Named) and r.kind == w.kind:
        if w.fullname != r.fullname and w.fullname not in r.aliases:
            return f"{r.kind} name {r.fullname}{at} does not match {w.fullname}"
        key = (id(r), id(w))
        if key in seen:
            return None
        seen.add(key)
        return _resolve_named(r, w, seen, path or r.fullname)
    return f"{describe(w)}{at} cannot be read as {describe(r)}"


def _resolve_named(r: Named, w: Named, seen: set[tuple[int, int]], path: str) -> str | None:
    if r.kind == "fixed":
        return None if r.size == w.size else f"fixed {r.fullname} size {w.size} cannot be read as size {r.size}"
    if r.kind == "enum":
        missing = [s for s in w.symbols if s not in r.symbols]
        if missing and r.enum_default is None:
            return f"enum {r.fullname} lacks symbol(s) {missing} of the writer and has no default"
        return None
    written = {f.name: f for f in w.fields}
    for rf in r.fields:
        wf = written.get(rf.name) or next((written[a] for a in rf.aliases if a in written), None)
        if wf is None:
            if not rf.has_default:
                return f"field {path}.{rf.name} is not in the writer's schema and has no default"
            continue
        reason = _resolve(rf.type, wf.type, seen, f"{path}.{rf.name}")
        if reason is not None:
            return reason
    return None
