# Every admin input passes through here before a handler acts on it, so the
# limits hold for every route at once:
# - names: validate_names (a middleware) checks the raw path's percent escapes
#   and every name segment of the route (tenant, namespace, cluster, topic,
#   subscription, role) by letterbox.names' rules, before the handler runs;
# - JSON bodies: parse_json refuses bodies over MAX_BODY_BYTES, bodies that are
#   not UTF-8, nesting deeper than MAX_JSON_DEPTH, NaN/Infinity, numbers that
#   are not finite or outside +-MAX_JSON_INT, and strings that are not valid
#   Unicode; the parser never recurses past the limit;
# - fields: integers from the path, the query string or a body field are
#   checked against documented ranges (durations up to MAX_DELAY, counts
#   and ids up to MAX_JSON_INT) before anything is stored.
# Every bad input becomes an AdminError: 400 malformed (not JSON, not UTF-8,
# wrong type, number out of range of the format), 413 too large, 412 a valid
# value outside what the field allows or an invalid name.
from __future__ import annotations

import json
import math
import re
import urllib.parse
from typing import Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError, Handler
from letterbox.errors import InvalidTopicName
from letterbox.failure.limits import MAX_DELAY_MS
from letterbox.names import NameKind, name_problem
from letterbox.topic_name import TopicName

MAX_PARTITIONS = 10_000
MAX_BODY_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 32
MAX_JSON_INT = 2**63 - 1
MAX_DELAY = MAX_DELAY_MS  # re-exported: the longest delay or backoff (864,000 s)
_INT_DIGITS = len(str(MAX_JSON_INT)) + 1
_BAD_ESCAPE_RE = re.compile(rb"%(?![0-9A-Fa-f]{2})")
_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET_RE = re.compile(r"[\[\]{}]")
# route variables that are names, and the rules each follows
PATH_NAMES: dict[str, NameKind] = {
    "tenant": "tenant", "namespace": "namespace", "cluster": "cluster",
    "topic": "topic", "subscription": "subscription", "role": "role",
}
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


# --- names in the path ---------------------------------------------------------
def check_raw_path(raw: str) -> None:
    """400 when the request target has a '%' that is not an escape, or escapes
    that do not decode to UTF-8 text."""
    data = raw.encode("utf-8", "surrogatepass")
    if _BAD_ESCAPE_RE.search(data):
        raise AdminError(400, f"Invalid percent-encoding in {raw[:200]!r}: '%' must be followed by two hex digits")
    try:
        urllib.parse.unquote_to_bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise AdminError(400, f"Percent-encoded bytes in {raw[:200]!r} are not UTF-8 text") from None


def check_name(kind: NameKind, value: str) -> str:
    problem = name_problem(kind, value)
    if problem is not None:
        raise AdminError(412, f"Invalid {problem}")
    return value


@web.middleware
async def validate_names(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every route's name segments are checked before its handler runs."""
    check_raw_path(request.raw_path)
    for key, kind in PATH_NAMES.items():
        value = request.match_info.get(key)
        if value is not None:
            check_name(kind, value)
    return await handler(request)


# --- JSON bodies -------------------------------------------------------------------
def _refuse_constant(name: str) -> Any:
    raise AdminError(400, f"Malformed JSON body: {name} is not a JSON number (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise AdminError(400, f"Malformed JSON body: number {text[:40]} is out of range (not finite)")
    return value


def _bounded_int(text: str) -> int:
    if len(text) > _INT_DIGITS or abs(value := int(text)) > MAX_JSON_INT:
        raise AdminError(400, f"Malformed JSON body: integer {text[:40]}... is out of range (|n| <= 2^63-1)")
    return value


def _check_depth(text: str) -> None:
    depth = 0
    for m in _BRACKET_RE.finditer(_JSON_STRING_RE.sub('""', text)):
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            raise AdminError(400, f"Malformed JSON body: nested deeper than {MAX_JSON_DEPTH} levels")


def _check_text(value: Any) -> None:
    """Strings (keys too) must be encodable text: no lone surrogates from \\uD800."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise AdminError(400, "Malformed JSON body: a string holds an unpaired \\u surrogate") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_text(k)
            _check_text(v)
    elif isinstance(value, list):
        for v in value:
            _check_text(v)


def parse_json(raw: bytes) -> Any:
    """The JSON value of a request body (None when empty), within the limits above."""
    if len(raw) > MAX_BODY_BYTES:
        raise AdminError(413, f"Request body is larger than {MAX_BODY_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdminError(400, f"Request body is not UTF-8 text (invalid byte at offset {exc.start})") from None
    if not text.strip():
        return None
    _check_depth(text)
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                           parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise AdminError(400, f"Malformed JSON body: {exc}") from None
    except RecursionError:
        raise AdminError(400, f"Malformed JSON body: nested deeper than {MAX_JSON_DEPTH} levels") from None
    _check_text(value)
    return value


async def json_body(request: web.Request) -> Any:
    """The parsed JSON body, or None when the body is empty."""
    return parse_json(await request.read())


async def partition_count(request: web.Request) -> int:
    value = await json_body(request)
    if value is None:
        raise AdminError(400, "Request body must be the number of partitions (a JSON integer)")
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError(400, f"Number of partitions must be a JSON integer, got {json.dumps(value)[:50]}")
    if value <= 0:
        raise AdminError(406, "Number of partitions should be more than 0")  # Pulsar's status
    if value > MAX_PARTITIONS:
        raise AdminError(412, f"Number of partitions should be less than or equal to {MAX_PARTITIONS}")
    return value


# --- integers and names in fields --------------------------------------------------
def _parse_int(raw: str, what: str) -> int:
    text = raw.strip()
    if len(text) > _INT_DIGITS or not re.fullmatch(r"[-+]?[0-9]+", text):
        raise AdminError(412, f"{what} must be an integer, got {raw[:40]!r}")
    value = int(text)
    if abs(value) > MAX_JSON_INT:
        raise AdminError(412, f"{what} must be between -(2^63-1) and 2^63-1, got {raw[:40]!r}")
    return value


def _check_range(what: str, value: int, minimum: int, maximum: int) -> int:
    if value < minimum:
        raise AdminError(412, f"{what} must be >= {minimum}, got {value}")
    if value > maximum:
        raise AdminError(412, f"{what} must be <= {maximum}, got {value}")
    return value


def path_int(request: web.Request, key: str, what: str, minimum: int = 0,
             maximum: int = MAX_JSON_INT) -> int:
    """An integer path segment; 412 when it is not an integer or out of range."""
    return _check_range(what, _parse_int(request.match_info[key], what), minimum, maximum)


def query_int(request: web.Request, name: str, default: int) -> int:
    """An integer query parameter (default when absent); 412 when not an integer."""
    raw = request.query.get(name)
    return default if raw is None else _parse_int(raw, name)


def int_field(body: dict[str, Any], key: str, minimum: int, maximum: int = MAX_JSON_INT) -> int | None:
    """An integer field of a JSON object, None when absent or null; 400 when not
    an integer, 412 when out of range."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError(400, f"{key} must be an integer, got {json.dumps(value)[:60]}")
    return _check_range(key, value, minimum, maximum)


def number_field(body: dict[str, Any], key: str, minimum: float, maximum: float) -> float | None:
    """A number field (integer or finite decimal), None when absent or null."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AdminError(400, f"{key} must be a number, got {json.dumps(value)[:60]}")
    if not minimum <= value <= maximum:
        raise AdminError(412, f"{key} must be between {minimum:g} and {maximum:g}, got {value}")
    return float(value)


def name_field(body: dict[str, Any], key: str, kind: NameKind) -> str | None:
    """An optional name given in a body field: 400 when not a string, 412 when invalid."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise AdminError(400, f"{key} must be a string, got {json.dumps(value)[:60]}")
    problem = name_problem(kind, value)
    if problem is not None:
        raise AdminError(412, f"{key}: invalid {problem}")
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
