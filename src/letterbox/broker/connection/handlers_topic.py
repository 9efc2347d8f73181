# Topic-level requests of ServerCnx: LOOKUP, PARTITIONED_METADATA,
# GET_TOPICS_OF_NAMESPACE, GET_SCHEMA and GET_OR_CREATE_SCHEMA. This broker
# owns every topic, so lookups always answer "connect to me".
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from letterbox.advertised_listeners import internal_name, unknown_listener
from letterbox.advertised_listeners import parse as parse_listeners
from letterbox.advertised_listeners import select as select_listener
from letterbox.broker.schemas.schema_registry import (
    SchemaVersion,
    parse_version_bytes,
    version_bytes,
)
from letterbox.errors import InvalidTopicName, LetterboxError, ServerError, TopicNotFound
from letterbox.protocol import commands, pb
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.protocol import Frame

T = pb.BaseCommand


def handle_lookup(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.lookupTopic
    name = TopicName.parse(c.topic)
    cnx.service.authorization.check_lookup(cnx.role, name)
    cfg = cnx.service.config
    requested = c.advertised_listener_name if c.HasField("advertised_listener_name") else ""
    if cfg.advertised_listeners:  # advertisedListeners: the one the client names, else the internal one
        listeners = parse_listeners(cfg.advertised_listeners)
        plain, tls = select_listener(listeners, internal_name(listeners, cfg.internal_listener_name), requested)
    elif requested:
        raise unknown_listener(requested, {})
    else:
        plain, tls = cnx.advertised_urls()
    cnx.send(commands.lookup_response(c.request_id, plain, broker_url_tls=tls))


def handle_partitioned_metadata(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.partitionMetadata
    name = TopicName.parse(c.topic)
    service = cnx.service
    service.authorization.check_lookup(cnx.role, name)
    rid = c.request_id
    if c.HasField("metadata_auto_creation_enabled") and not c.metadata_auto_creation_enabled:
        # a question about a topic, not a request to create it: TopicNotFound when there is none
        n = service.partitions_of(name)
        if n or service.topic_exists(name):
            cnx.send(commands.partitioned_metadata_response(rid, n))
        else:
            cnx.send(commands.partitioned_metadata_error(rid, ServerError.TopicNotFound,
                                                          f"Topic {name} does not exist"))
        return
    if not service.should_auto_partition(name):
        cnx.send(commands.partitioned_metadata_response(rid, service.partitions_of(name)))
        return
    partitions = service.config.default_num_partitions

    async def create() -> None:
        await service.create_partitioned_topic(name, partitions)
        cnx.send(commands.partitioned_metadata_response(rid, partitions))

    cnx.spawn(create(), rid)


def handle_get_topics_of_namespace(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.getTopicsOfNamespace
    ns = c.namespace
    if ns.count("/") != 1 or not all(ns.split("/")):
        raise InvalidTopicName(f"invalid namespace {ns!r}: expected tenant/namespace")
    authz = cnx.service.authorization
    if not authz.can_consume_namespace(cnx.role, ns):  # Pulsar: GET_TOPICS is a consume operation
        raise LetterboxError(
            f"Role {cnx.role} is not authorized to list the topics of namespace {ns}",
            ServerError.AuthorizationError,
        )
    mode = c.mode if c.HasField("mode") else pb.CommandGetTopicsOfNamespace.PERSISTENT
    domains = {
        pb.CommandGetTopicsOfNamespace.PERSISTENT: ("persistent",),
        pb.CommandGetTopicsOfNamespace.NON_PERSISTENT: ("non-persistent",),
        pb.CommandGetTopicsOfNamespace.ALL: ("persistent", "non-persistent"),
    }[mode]
    topics = [t for t in cnx.service.list_topics(ns) if t.split("://", 1)[0] in domains]
    filtered = False
    if c.HasField("topics_pattern") and c.topics_pattern:
        try:
            rx = re.compile(c.topics_pattern)
        except re.error as exc:
            raise InvalidTopicName(f"invalid topics pattern {c.topics_pattern!r}: {exc}") from None
        topics = [t for t in topics if rx.fullmatch(t) or rx.fullmatch(t.split("://", 1)[1])]
        filtered = True
    cnx.send(commands.get_topics_of_namespace_response(c.request_id, topics, filtered))


def handle_get_schema(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.getSchema
    name = TopicName.parse(c.topic)
    cnx.service.authorization.check_lookup(cnx.role, name)
    wanted = parse_version_bytes(c.schema_version) if c.HasField("schema_version") else None
    found = cnx.service.schemas.get(name, wanted)
    if found is None:
        what = "a schema" if wanted is None else f"schema version {wanted}"
        raise TopicNotFound(f"Topic {name} does not have {what}")
    cnx.send(commands.get_schema_response(c.request_id, found.to_pb(), version_bytes(found.version)))


def handle_get_or_create_schema(cnx: ServerCnx, frame: Frame) -> None:
    c = frame.command.getOrCreateSchema
    name = TopicName.parse(c.topic)
    cnx.service.authorization.check_produce(cnx.role, name)  # it may set the topic's schema
    version, write = cnx.service.schemas.add(name, SchemaVersion.from_pb(c.schema))
    rid = c.request_id
    if write is None:
        cnx.send(commands.get_or_create_schema_response(rid, version_bytes(version.version)))
        return

    async def stored() -> None:
        await write
        cnx.send(commands.get_or_create_schema_response(rid, version_bytes(version.version)))

    cnx.spawn(stored(), rid)


HANDLERS: dict[int, Any] = {
    T.LOOKUP: handle_lookup,
    T.PARTITIONED_METADATA: handle_partitioned_metadata,
    T.GET_TOPICS_OF_NAMESPACE: handle_get_topics_of_namespace,
    T.GET_SCHEMA: handle_get_schema,
    T.GET_OR_CREATE_SCHEMA: handle_get_or_create_schema,
}
