# The schema registry: the schema versions of each topic (a partitioned
# topic's partitions share their parent's), as Pulsar keeps them.
# Storage: one JSON document per topic in the store's metadata map,
# "schemas:<topic>" -> {"next": n, "versions": [{version, type, name, data
# (base64), properties, timestamp}, ...]}; versions count from 0 and keep
# counting after a delete (Pulsar never reuses a version). A document written
# before the registry ("schema:<topic>", one serialized Schema) reads as
# version 0.
# Invariants: the registry's in-memory map is the truth once a topic was
# read; a new version is put in it and its metadata write is submitted to the
# store's single writer (at once, Store.submit_metadata) before any producer or
# move learns the version, so a message carrying version n is never durable
# before version n is.
# Compatibility (namespace policy schema_compatibility_strategy, Pulsar's
# enum; unset or UNDEFINED: the broker's schema_compatibility_strategy,
# FULL by default as Pulsar's): a schema equal to
# a stored version (same type and definition, AVRO/JSON compared as parsed
# JSON) is that version; otherwise AVRO
# and JSON definitions are checked with Avro resolution (BACKWARD: the new
# schema reads data of the latest version -- of every version for
# *_TRANSITIVE; FORWARD: the other way; FULL: both); other types are
# compatible only with their own type. A refusal raises IncompatibleSchema.
# Messages the broker moves (dead letters, retries, redrives, parked keys) carry
# their schema to the target (SchemaCarry): the source's version of each message is
# registered on the target (found or added, under the target's strategy, as Pulsar's
# client-side DLQ producer registers the consumer's schema there) and the message
# carries the target's version number. A new version's write is submitted before the
# move's transaction, and the single writer applies submissions in order, so the move
# never commits before the version it names. A target whose strategy refuses the schema still gets the message (a dead
# letter is never held back), without a schema version, and a warning is logged.
from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from letterbox.broker.schemas import avro_resolution as avro
from letterbox.config import SCHEMA_COMPATIBILITY_STRATEGIES
from letterbox.errors import IncompatibleSchema, NotAllowed
from letterbox.protocol import pb

if TYPE_CHECKING:
    from letterbox.broker.schemas.schema_broker import SchemaBroker
    from letterbox.topic_name import TopicName

log = logging.getLogger("letterbox.schemas")
SCHEMAS_KEY = "schemas:"
LEGACY_KEY = "schema:"
STRATEGY_POLICY = "schema_compatibility_strategy"
STRATEGIES = SCHEMA_COMPATIBILITY_STRATEGIES
AVRO_TYPES = (pb.Schema.Avro, pb.Schema.Json)


@dataclass(frozen=True)
class SchemaVersion:
    version: int
    type: int
    name: str
    data: bytes
    properties: dict[str, str] = field(default_factory=dict)
    timestamp: int = 0

    def same_schema(self, other: SchemaVersion) -> bool:
        """Same type and definition; AVRO/JSON definitions compare as JSON (whitespace and
        key order do not make a new version: the Python client indents what it sends)."""
        if self.type != other.type:
            return False
        if self.data == other.data:
            return True
        if self.type not in AVRO_TYPES:
            return False
        try:
            return bool(json.loads(self.data) == json.loads(other.data))
        except ValueError:
            return False

    def to_pb(self) -> pb.Schema:
        props = [pb.KeyValue(key=k, value=v) for k, v in sorted(self.properties.items())]
        return pb.Schema(name=self.name, schema_data=self.data, type=self.type, properties=props)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "type": self.type, "name": self.name,
                "data": base64.b64encode(self.data).decode(), "properties": self.properties,
                "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SchemaVersion:
        return cls(int(d["version"]), int(d["type"]), str(d.get("name", "")), base64.b64decode(d["data"]),
                   dict(d.get("properties") or {}), int(d.get("timestamp", 0)))

    @classmethod
    def from_pb(cls, s: pb.Schema, version: int = -1) -> SchemaVersion:
        return cls(version, int(s.type), s.name, bytes(s.schema_data), {kv.key: kv.value for kv in s.properties})


def version_bytes(version: int) -> bytes:
    """Pulsar's wire form of a schema version: an 8-byte big-endian long."""
    return version.to_bytes(8, "big", signed=True)


def parse_version_bytes(raw: bytes) -> int:
    if len(raw) != 8:
        raise NotAllowed(f"schema version must be 8 bytes (a big-endian long), got {len(raw)}")
    return int.from_bytes(raw, "big", signed=True)


def check_definition(s: SchemaVersion) -> None:
    """Raise avro.AvroSchemaError when an AVRO or JSON definition is malformed."""
    if s.type in AVRO_TYPES:
        avro.parse(s.data)


def is_typed(s: pb.Schema) -> bool:
    """Whether a client's schema is one the registry keeps (BYTES/NONE and AUTO_CONSUME are not)."""
    return int(s.type) not in (0, pb.Schema.AutoConsume)


@dataclass
class _TopicSchemas:
    versions: list[SchemaVersion] = field(default_factory=list)
    next: int = 0


class SchemaRegistry:
    def __init__(self, service: SchemaBroker) -> None:
        self.service = service
        self._topics: dict[str, _TopicSchemas] = {}

    # --- reads -------------------------------------------------------------------
    def _load(self, name: TopicName) -> _TopicSchemas:
        key = str(name.partitioned_parent)
        loaded = self._topics.get(key)
        if loaded is not None:
            return loaded
        store = self.service.store
        raw = store.get_metadata(SCHEMAS_KEY + key)
        if raw is not None:
            doc = json.loads(raw)
            loaded = _TopicSchemas([SchemaVersion.from_json(v) for v in doc.get("versions", [])],
                                   int(doc.get("next", 0)))
        else:
            loaded = _TopicSchemas()
            legacy = store.get_metadata(LEGACY_KEY + key)
            if legacy:
                s = pb.Schema()
                s.ParseFromString(base64.b64decode(legacy))
                loaded = _TopicSchemas([SchemaVersion.from_pb(s, 0)], 1)
        self._topics[key] = loaded
        return loaded

    def versions(self, name: TopicName) -> list[SchemaVersion]:
        return list(self._load(name).versions)

    def latest(self, name: TopicName) -> SchemaVersion | None:
        versions = self._load(name).versions
        return versions[-1] if versions else None

    def get(self, name: TopicName, version: int | None = None) -> SchemaVersion | None:
        if version is None:
            return self.latest(name)
        return next((v for v in self._load(name).versions if v.version == version), None)

    def strategy(self, name: TopicName) -> str:
        doc = self.service.namespace_policies.document(name.namespace_name) or {}
        value = doc.get(STRATEGY_POLICY)
        return value if isinstance(value, str) and value in STRATEGIES and value != "UNDEFINED" \
            else self.service.config.schema_compatibility_strategy

    # --- checks --------------------------------------------------------------------
    def incompatibility(self, name: TopicName, new: SchemaVersion, existing: list[SchemaVersion],
                        reader_only: bool = False) -> str | None:
        """Why `new` may not follow `existing` under the topic's strategy (None: it may).
        reader_only: a consumer's schema, which only has to read what was written."""
        if not existing:
            return None
        strategy = self.strategy(name)
        if strategy == "ALWAYS_COMPATIBLE":
            return None
        if strategy == "ALWAYS_INCOMPATIBLE":
            return f"the schema compatibility strategy of {name.namespace_name} is ALWAYS_INCOMPATIBLE"
        targets = existing if strategy.endswith("_TRANSITIVE") else existing[-1:]
        base = strategy.removesuffix("_TRANSITIVE")
        for old in targets:
            if old.type != new.type:
                return (f"schema type {_type_name(new.type)} differs from {_type_name(old.type)} "
                        f"of version {old.version}")
            if new.type not in AVRO_TYPES or old.data == new.data:
                continue
            try:
                new_t, old_t = avro.parse(new.data), avro.parse(old.data)
            except avro.AvroSchemaError as exc:
                return f"invalid schema definition: {exc}"
            checks = []
            if reader_only or base in ("BACKWARD", "FULL"):
                checks.append(("cannot read data written with", avro.can_read(new_t, old_t)))
            if not reader_only and base in ("FORWARD", "FULL"):
                checks.append(("cannot be read by", avro.can_read(old_t, new_t)))
            for what, reason in checks:
                if reason is not None:
                    return (f"{strategy}: the new schema {what} version {old.version} of {name} "
                            f"({reason})")
        return None

    def find(self, name: TopicName, schema: SchemaVersion) -> SchemaVersion | None:
        return next((v for v in self._load(name).versions if v.same_schema(schema)), None)

    # --- writes --------------------------------------------------------------------
    def add(self, name: TopicName, schema: SchemaVersion) -> tuple[SchemaVersion, Awaitable[None] | None]:
        """The version of `schema` on the topic: an equal stored one, else a new version when
        the strategy allows it (IncompatibleSchema otherwise). Returns the version and the
        durable write of a new one (None if nothing was added)."""
        existing = self.find(name, schema)
        if existing is not None:
            return existing, None
        try:
            check_definition(schema)
        except avro.AvroSchemaError as exc:
            raise IncompatibleSchema(f"invalid {_type_name(schema.type)} schema: {exc}") from None
        topic = self._load(name)
        reason = self.incompatibility(name, schema, topic.versions)
        if reason is not None:
            raise IncompatibleSchema(f"Incompatible schema: {reason}")
        added = SchemaVersion(topic.next, schema.type, schema.name, schema.data, schema.properties,
                              schema.timestamp or self.service.clock.now_ms())
        topic.versions.append(added)
        topic.next += 1
        write = self._persist(name, topic)

        def forget_if_lost(f: asyncio.Future[None]) -> None:
            # not stored (a storage fault): the version must not outlive this broker's memory either
            if (f.cancelled() or f.exception() is not None) and added in topic.versions:
                topic.versions.remove(added)
                log.warning("schema version %d of %s was not stored (%s): dropped", added.version, name,
                            "cancelled" if f.cancelled() else f.exception())

        write.add_done_callback(forget_if_lost)
        return added, write

    def check_consumer(self, name: TopicName, schema: SchemaVersion) -> Awaitable[None] | None:
        """A consumer's schema: equal to a version, or able to read what the strategy says;
        the first schema of a topic that has none is registered (Pulsar adds it then)."""
        topic = self._load(name)
        if not topic.versions:
            return self.add(name, schema)[1]
        if self.find(name, schema) is not None:
            return None
        reason = self.incompatibility(name, schema, topic.versions, reader_only=True)
        if reason is not None:
            raise IncompatibleSchema(f"Incompatible schema for consumer: {reason}")
        return None

    def carry_from(self, source: TopicName) -> SchemaCarry:
        """The schema versions of messages the broker moves out of `source` (SchemaCarry)."""
        return SchemaCarry(self, source)

    def delete_all(self, name: TopicName) -> tuple[list[SchemaVersion], Awaitable[None]]:
        topic = self._load(name)
        gone, topic.versions = topic.versions, []
        return gone, self._persist(name, topic)

    def _persist(self, name: TopicName, topic: _TopicSchemas) -> asyncio.Future[None]:
        key = str(name.partitioned_parent)
        doc = json.dumps({"next": topic.next, "versions": [v.to_json() for v in topic.versions]})
        store = self.service.store
        write = store.submit_metadata(SCHEMAS_KEY + key, doc)  # queued now, before any later move
        self.service.track(write)
        if store.get_metadata(LEGACY_KEY + key) is not None:
            self.service.background(store.put_metadata(LEGACY_KEY + key, None))
        return write


TYPE_NAMES = {
    "NONE": 0, "STRING": 1, "JSON": 2, "PROTOBUF": 3, "AVRO": 4, "BOOLEAN": 5, "INT8": 6, "INT16": 7,
    "INT32": 8, "INT64": 9, "FLOAT": 10, "DOUBLE": 11, "DATE": 12, "TIME": 13, "TIMESTAMP": 14,
    "KEY_VALUE": 15, "INSTANT": 16, "LOCAL_DATE": 17, "LOCAL_TIME": 18, "LOCAL_DATE_TIME": 19,
    "PROTOBUF_NATIVE": 20,
}
_NAMES_BY_TYPE = {v: k for k, v in TYPE_NAMES.items()}


def _type_name(t: int) -> str:
    return _NAMES_BY_TYPE.get(t, str(t))


type_name = _type_name


class SchemaCarry:
    """The schema versions of messages moved by the broker out of `source`: `to(target)`
    maps a message's schema version (8 bytes, the source's) to the target's (None: the
    message goes without one). Use it before the move's transaction commits."""

    def __init__(self, registry: SchemaRegistry, source: TopicName) -> None:
        self.registry = registry
        self.source = source
        self._seen: dict[tuple[str, bytes], bytes | None] = {}

    def to(self, target: TopicName) -> Callable[[bytes], bytes | None]:
        def carry(raw: bytes) -> bytes | None:
            key = (str(target), bytes(raw))
            if key not in self._seen:
                self._seen[key] = self._carry(target, key[1])
            return self._seen[key]

        return carry

    def _carry(self, target: TopicName, raw: bytes) -> bytes | None:
        if self.source.partitioned_parent == target.partitioned_parent:
            return raw  # the same registry: the version means the same there
        registry = self.registry
        if not registry.versions(self.source):
            # a topic without schemas whose messages carry versions (a dead letter topic written
            # before moved messages registered their schema): the version is their origin's
            return raw
        try:
            schema = registry.get(self.source, parse_version_bytes(raw))
        except NotAllowed:
            schema = None
        if schema is None:
            log.warning("moving a message of %s to %s: its schema version %s is not in the registry; "
                        "moved without a schema version", self.source, target, raw.hex())
            return None
        try:
            added, _write = registry.add(target, schema)  # submitted now: stored before the move
        except IncompatibleSchema as exc:
            log.warning("moving a message of %s to %s: the target refuses its schema (version %d of the "
                        "source), moved without a schema version: %s", self.source, target,
                        schema.version, exc)
            return None
        return version_bytes(added.version)
