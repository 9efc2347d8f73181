# The broker's one configuration object. Values come, lowest precedence first,
# from the dataclass defaults, a TOML config file, `LETTERBOX_<FIELD>`
# environment variables, and finally CLI flags. Every field is validated in
# one place (`BrokerConfig.validate`) so a bad value is reported with the name
# of the setting to fix.
from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

ENV_PREFIX = "LETTERBOX_"
SYNC_MODES = ("full", "normal", "off")


class ConfigError(ValueError):
    """A setting has a value that cannot be used; the message names the setting."""


@dataclass
class BrokerConfig:
    data_dir: Path = field(default_factory=lambda: Path("data"))
    bind: str = "0.0.0.0"
    port: int = 6650
    admin_port: int = 8080
    advertised_address: str = ""
    # durability: "full" fsyncs before every receipt batch, "normal" survives a
    # process crash but not an OS crash, "off" leaves syncing to the OS.
    sync: str = "full"
    max_message_size: int = 5 * 1024 * 1024
    cache_size_mb: int = 64
    auto_topic_creation: bool = True
    # what a first use creates: "non-partitioned", or "partitioned" with
    # default_num_partitions partitions (Pulsar's allowAutoTopicCreationType)
    auto_topic_creation_type: str = "non-partitioned"
    default_num_partitions: int = 1
    deduplication_enabled: bool = False
    # keep acknowledged messages this long (0: delete once all subscriptions acked, -1: forever)
    retention_time_minutes: int = 0
    cluster_name: str = "standalone"
    log_level: str = "INFO"
    # security (Pulsar's authenticationEnabled, authorizationEnabled, superUserRoles,
    # anonymousUserRole); lists are TOML arrays or comma-separated text
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    super_user_roles: list[str] = field(default_factory=list)
    anonymous_user_role: str = ""
    # --- limits (Pulsar's names; 0 = unlimited where Pulsar says so) -----
    broker_max_connections: int = 0  # brokerMaxConnections
    broker_max_connections_per_ip: int = 0  # brokerMaxConnectionsPerIp
    max_pending_publish_requests_per_connection: int = 1000  # maxPendingPublishRequestsPerConnection
    # bytes of one connection's SENDs not yet receipted plus its unfinished frame
    # before reading pauses (letterbox; never less than one max-size frame)
    max_pending_bytes_per_connection: int = 16 * 1024 * 1024
    # the same over all connections (maxMessagePublishBufferSizeInMB; -1: no limit)
    max_message_publish_buffer_size_in_mb: int = 256
    # a started frame must be complete within this time, and CONNECT must
    # arrive this long after the TCP accept (letterbox; Pulsar has no equivalent)
    frame_timeout_seconds: float = 30.0
    connect_timeout_seconds: float = 10.0
    max_topics_per_namespace: int = 0  # maxTopicsPerNamespace
    max_subscriptions_per_topic: int = 0  # maxSubscriptionsPerTopic
    max_unacked_messages_per_consumer: int = 50_000  # maxUnackedMessagesPerConsumer
    max_unacked_messages_per_subscription: int = 200_000  # maxUnackedMessagesPerSubscription

    def validate(self) -> BrokerConfig:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be between 0 and 65535, got {self.port}")
        if not 0 <= self.admin_port <= 65535:
            raise ConfigError(f"admin_port must be between 0 and 65535, got {self.admin_port}")
        if self.sync not in SYNC_MODES:
            raise ConfigError(f"sync must be one of {', '.join(SYNC_MODES)}, got {self.sync!r}")
        if not 1024 <= self.max_message_size <= 1024 * 1024 * 1024:
            raise ConfigError(
                f"max_message_size must be between 1024 and 1073741824 bytes, got {self.max_message_size}"
            )
        if self.auto_topic_creation_type not in ("non-partitioned", "partitioned"):
            raise ConfigError(
                "auto_topic_creation_type must be 'non-partitioned' or 'partitioned', "
                f"got {self.auto_topic_creation_type!r}"
            )
        if not 1 <= self.default_num_partitions <= 10_000:
            raise ConfigError(
                f"default_num_partitions must be between 1 and 10000, got {self.default_num_partitions}"
            )
        if self.retention_time_minutes < -1:
            raise ConfigError(
                f"retention_time_minutes must be -1 (forever), 0 or a number of minutes, got {self.retention_time_minutes}"
            )
        if self.cache_size_mb < 0:
            raise ConfigError(f"cache_size_mb must be >= 0, got {self.cache_size_mb}")
        self._validate_limits()
        return self

    def _validate_limits(self) -> None:
        for name in (
            "broker_max_connections", "broker_max_connections_per_ip",
            "max_pending_publish_requests_per_connection", "max_topics_per_namespace",
            "max_subscriptions_per_topic", "max_unacked_messages_per_consumer",
            "max_unacked_messages_per_subscription",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (0: unlimited), got {getattr(self, name)}")
        if self.max_pending_bytes_per_connection < 1:
            raise ConfigError(
                f"max_pending_bytes_per_connection must be >= 1, got {self.max_pending_bytes_per_connection}"
            )
        if self.max_message_publish_buffer_size_in_mb < -1 or self.max_message_publish_buffer_size_in_mb == 0:
            raise ConfigError(
                "max_message_publish_buffer_size_in_mb must be -1 (no limit) or a number of MB, "
                f"got {self.max_message_publish_buffer_size_in_mb}"
            )
        for name in ("frame_timeout_seconds", "connect_timeout_seconds"):
            value = getattr(self, name)
            if not 0 < value <= 3600:
                raise ConfigError(f"{name} must be between 0 and 3600 seconds, got {value}")

    @classmethod
    def load(
        cls,
        config_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> BrokerConfig:
        values: dict[str, Any] = {}
        if config_file is not None:
            try:
                with open(config_file, "rb") as fh:
                    raw = tomllib.load(fh)
            except OSError as exc:
                raise ConfigError(f"cannot read config file {config_file}: {exc.strerror}") from exc
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"config file {config_file} is not valid TOML: {exc}") from exc
            values.update(_coerce_all(raw, f"config file {config_file}"))
        env = os.environ if env is None else env
        env_values = {
            k[len(ENV_PREFIX) :].lower(): v for k, v in env.items() if k.startswith(ENV_PREFIX)
        }
        values.update(_coerce_all(env_values, "environment variable", prefix=ENV_PREFIX))
        if overrides:
            values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values).validate()


_FIELDS = {f.name: f for f in fields(BrokerConfig)}


def _coerce_all(raw: Mapping[str, Any], source: str, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name not in _FIELDS:
            if prefix:
                continue  # unrelated LETTERBOX_* variables are not our business
            raise ConfigError(f"unknown setting {key!r} in {source}; known: {', '.join(_FIELDS)}")
        out[name] = _coerce(name, value, f"{source} {prefix}{key.upper() if prefix else key}")
    return out


def _coerce(name: str, value: Any, where: str) -> Any:
    default = _FIELDS[name].default
    if _FIELDS[name].type in ("list[str]", list[str]):
        return _coerce_list(name, value, where)
    if default is dataclasses.MISSING:  # data_dir
        return Path(str(value))
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError(value)
            return int(value)
        if isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ValueError(value)
            number = float(value)
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError(value)
            return number
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {name} has an invalid value {value!r}") from None


def _coerce_list(name: str, value: Any, where: str) -> list[str]:
    """A list of names: a TOML array of strings or comma-separated text."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise ConfigError(f"{where}: {name} must be a list of names or comma-separated text, got {value!r}")
