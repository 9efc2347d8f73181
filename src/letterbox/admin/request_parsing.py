# Parsing of admin request inputs that do not need the broker: JSON bodies,
# topic names from the path, partition counts, tenant/namespace segments,
# integers from the path, the query string or a JSON body field, topic names
# given in a body field.
# Every bad input becomes an AdminError (400 malformed, 412 invalid value).
from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.errors import InvalidTopicName
from letterbox.topic_name import TopicName

MAX_PARTITIONS = 10_000
DOMAIN = "{domain:persistent|non-persistent}"
NS_BASE = "/admin/v2/" + DOMAIN + "/{tenant}/{namespace}"
TOPIC_BASE = NS_BASE + "/{topic}"
NAMESPACE_BASE = "/admin/v2/namespaces/{tenant}/{namespace}"


def topic_name(request: web.Request) -> TopicName:
    m = request.match_info
    return TopicName.parse(f"{m['domain']}://{m['tenant']}/{m['namespace']}/{m['topic']}")


def namespace_of(request: web.Request) -> str:
    return f"{request.match_info['tenant']}/{request.match_info['namespace']}"


def query_flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    if value is None:
        return default
    return value.lower() == "true"


async def json_body(request: web.Request) -> Any:
    """The parsed JSON body, or None when the body is empty."""
    body = await request.text()
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise AdminError(400, f"Malformed JSON body: {exc}") from None


async def partition_count(request: web.Request) -> int:
    body = await request.text()
    if not body.strip():
        raise AdminError(400, "Request body must be the number of partitions (a JSON integer)")
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AdminError(400, f"Malformed JSON body: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError(400, f"Number of partitions must be a JSON integer, got {body.strip()[:50]!r}")
    if value <= 0:
        raise AdminError(412, "Number of partitions should be more than 0")
    if value > MAX_PARTITIONS:
        raise AdminError(412, f"Number of partitions should be less than or equal to {MAX_PARTITIONS}")
    return value


def check_segment(what: str, value: str) -> None:
    try:
        TopicName.parse(f"{value}/x/y" if what == "tenant" else f"x/{value}/y")
    except InvalidTopicName:
        raise AdminError(412, f"Invalid {what} name {value!r}") from None


def _parse_int(raw: str, what: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise AdminError(412, f"{what} must be an integer, got {raw!r}") from None


def path_int(request: web.Request, key: str, what: str, minimum: int = 0) -> int:
    """An integer path segment; 412 when it is not an integer or below minimum."""
    value = _parse_int(request.match_info[key], what)
    if value < minimum:
        raise AdminError(412, f"{what} must be >= {minimum}, got {value}")
    return value


def query_int(request: web.Request, name: str, default: int) -> int:
    """An integer query parameter (default when absent); 412 when not an integer."""
    raw = request.query.get(name)
    return default if raw is None else _parse_int(raw, name)


def int_field(body: dict[str, Any], key: str, minimum: int) -> int | None:
    """An integer field of a JSON object, None when absent or null; 400 when not
    an integer, 412 when below minimum."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError(400, f"{key} must be an integer, got {value!r}")
    if value < minimum:
        raise AdminError(412, f"{key} must be >= {minimum}, got {value}")
    return value


def persistent_topic_field(key: str, value: str) -> TopicName:
    """A persistent topic name given in body field `key`; 412 otherwise."""
    try:
        name = TopicName.parse(value)
    except InvalidTopicName as exc:
        raise AdminError(412, f"{key}: {exc}") from None
    if not name.persistent:
        raise AdminError(412, f"{key} must be a persistent topic")
    return name
