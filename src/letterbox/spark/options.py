# Options of the `letterbox` Spark data source, parsed and checked in one
# place so a wrong option fails on the driver with a message naming it.
# Authentication options (auth_plugin, auth_params, tls_trust_certs_file_path)
# become one AuthOptions that every client and admin call of the job uses.
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from letterbox.auth_options import AuthOptions, AuthOptionsError
from letterbox.errors import InvalidTopicName
from letterbox.spark.offsets import OffsetError, Position, parse_offsets_option
from letterbox.topic_name import TopicName


class SparkOptionError(ValueError):
    """A data source option is missing or has a value that cannot be used."""


def full_topic_name(name: str) -> str:
    """`t` -> persistent://public/default/t; `tenant/ns/t` -> persistent://tenant/ns/t."""
    try:
        return str(TopicName.parse(name.strip()))
    except InvalidTopicName as exc:
        raise SparkOptionError(str(exc)) from None


def _get(options: Mapping[str, str], name: str) -> str | None:
    v = options.get(name)
    return None if v is None or str(v).strip() == "" else str(v)


def _service_url(options: Mapping[str, str]) -> str:
    v = _get(options, "service_url")
    if v is None:
        raise SparkOptionError("option service_url is required, e.g. pulsar://localhost:6650")
    return v


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    v = _get(options, name)
    if v is None:
        return default
    try:
        n = int(v)
    except ValueError:
        raise SparkOptionError(f"option {name} must be an integer, got {v!r}") from None
    if n < minimum:
        raise SparkOptionError(f"option {name} must be >= {minimum}, got {n}")
    return n


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    v = _get(options, name)
    if v is None:
        return default
    t = v.lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise SparkOptionError(f"option {name} must be true or false, got {v!r}")


def _auth(options: Mapping[str, str]) -> AuthOptions:
    """Options auth_plugin / auth_params (the official client's authPlugin / authParams:
    token, basic, tls or their Pulsar class names) and tls_trust_certs_file_path."""
    plugin, params = _get(options, "auth_plugin"), _get(options, "auth_params")
    if params is not None and plugin is None:
        raise SparkOptionError("option auth_params needs auth_plugin (token, basic or tls)")
    try:
        return AuthOptions(plugin or "", params or "", _get(options, "tls_trust_certs_file_path") or "")
    except AuthOptionsError as exc:
        raise SparkOptionError(f"options auth_plugin / auth_params / tls_trust_certs_file_path: {exc}") from None


OffsetSpec = str | dict[str, dict[int, Position | str]]


def _offsets(options: Mapping[str, str], name: str, default: str) -> OffsetSpec:
    v = _get(options, name) or default
    if v in ("earliest", "latest"):
        return v
    try:
        spec = parse_offsets_option(v, name)
    except OffsetError as exc:
        raise SparkOptionError(str(exc)) from None
    return {full_topic_name(t): parts for t, parts in spec.items()}


@dataclass(frozen=True)
class ReadOptions:
    service_url: str
    topics: tuple[str, ...] = ()
    topics_pattern: str | None = None
    admin_url: str | None = None
    starting_offsets: OffsetSpec = "earliest"
    ending_offsets: OffsetSpec = "latest"
    min_partitions: int = 1
    max_records_per_trigger: int | None = None
    subscription: str | None = None
    fail_on_data_loss: bool = True
    # topic -> delay in ms: only messages due (publish_time + DELAY_TIME, at least the delay) are read
    retry_tiers: dict[str, int] = field(default_factory=dict)
    read_timeout_ms: int = 10_000
    arrow_batch_size: int = 10_000
    # "records": one row per message; "ranges": one row per planned position range (for
    # jobs that read the messages themselves in their tasks, like the pipeline)
    emit: str = "records"
    auth: AuthOptions = field(default_factory=AuthOptions)
    # read a named topic that does not exist (yet) as empty instead of failing
    create_if_missing: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        service_url = _service_url(options)
        given = [n for n in ("topic", "topics", "topics_pattern") if _get(options, n) is not None]
        tiers = _tiers(_get(options, "retry_tiers"))
        if len(given) > 1:
            raise SparkOptionError(f"give only one of topic, topics, topics_pattern (got {', '.join(given)})")
        if not given and not tiers:
            raise SparkOptionError("one of the options topic, topics or topics_pattern is required")
        topics: tuple[str, ...] = ()
        pattern = None
        if given and given[0] == "topics_pattern":
            pattern = _get(options, "topics_pattern")
            assert pattern is not None
            try:
                re.compile(pattern)
            except re.error as exc:
                raise SparkOptionError(f"option topics_pattern is not a valid regular expression: {exc}") from None
        elif given:
            raw = _get(options, given[0]) or ""
            topics = tuple(full_topic_name(t) for t in raw.split(",") if t.strip())
        start = _offsets(options, "starting_offsets", "earliest")
        end = _offsets(options, "ending_offsets", "latest")
        if end == "earliest":
            raise SparkOptionError("option ending_offsets cannot be 'earliest'")
        return cls(
            service_url=service_url,
            topics=topics,
            topics_pattern=pattern,
            admin_url=_get(options, "admin_url"),
            starting_offsets=start,
            ending_offsets=end,
            min_partitions=_int(options, "min_partitions", 1, 1) or 1,
            max_records_per_trigger=_int(options, "max_records_per_trigger", None, 1),
            subscription=_get(options, "subscription"),
            fail_on_data_loss=_bool(options, "fail_on_data_loss", True),
            retry_tiers=tiers,
            read_timeout_ms=_int(options, "read_timeout_ms", 10_000, 1) or 10_000,
            arrow_batch_size=_int(options, "arrow_batch_size", 10_000, 1) or 10_000,
            emit=_emit(options),
            auth=_auth(options),
            create_if_missing=_bool(options, "create_if_missing", False),
        )


def _emit(options: Mapping[str, str]) -> str:
    v = _get(options, "emit") or "records"
    if v not in ("records", "ranges"):
        raise SparkOptionError(f"option emit must be 'records' or 'ranges', got {v!r}")
    return v


def _tiers(text: str | None) -> dict[str, int]:
    if text is None:
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SparkOptionError(f"option retry_tiers must be JSON {{\"topic\": delay_ms}}: {exc.msg}") from None
    if not isinstance(raw, dict) or not all(isinstance(v, int) and v >= 0 for v in raw.values()):
        raise SparkOptionError('option retry_tiers must be JSON {"topic": delay_ms} with delays >= 0')
    return {full_topic_name(t): int(v) for t, v in raw.items()}


@dataclass(frozen=True)
class WriteOptions:
    service_url: str
    topic: str | None
    producer_name: str | None
    send_timeout_ms: int = 30_000
    auth: AuthOptions = field(default_factory=AuthOptions)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        service_url = _service_url(options)
        topic = _get(options, "topic")
        name = _get(options, "producer_name")
        if name is not None and not re.fullmatch(r"[A-Za-z0-9_.:-]+", name):
            raise SparkOptionError(f"option producer_name may hold letters, digits and _.:- only, got {name!r}")
        return cls(
            service_url=service_url,
            topic=full_topic_name(topic) if topic else None,
            producer_name=name,
            send_timeout_ms=_int(options, "send_timeout_ms", 30_000, 1) or 30_000,
            auth=_auth(options),
        )
