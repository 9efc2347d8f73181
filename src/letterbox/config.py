# The broker's one configuration object. Values come, lowest precedence first,
# from the dataclass defaults, a TOML config file, `LETTERBOX_<FIELD>`
# environment variables, and finally CLI flags. Every field is validated in
# one place (`BrokerConfig.validate`) so a bad value is reported with the name
# of the setting to fix. Security settings carry Pulsar's names in snake_case
# (tlsCertificateFilePath -> tls_certificate_file_path); list settings are
# TOML arrays or comma-separated strings; a plain port set to "" is disabled
# (Pulsar's empty brokerServicePort / webServicePort), and TLS ports are off
# until given.
from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from letterbox.clock import CLOCK_KINDS

ENV_PREFIX = "LETTERBOX_"
SYNC_MODES = ("full", "normal", "off")
# authenticationProviders: our short names and Pulsar's provider class names
AUTH_PROVIDERS = {
    "token": "token",
    "basic": "basic",
    "tls": "tls",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken": "token",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": "basic",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls": "tls",
}
DISABLED = ""  # the value that turns a plain port off (CLI, env, file)


class ConfigError(ValueError):
    """A setting has a value that cannot be used; the message names the setting."""


# Pulsar's SchemaCompatibilityStrategy values (UNDEFINED: the broker's default applies)
SCHEMA_COMPATIBILITY_STRATEGIES = ("UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD",
                                   "FULL", "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")


@dataclass
class BrokerConfig:
    data_dir: Path = field(default_factory=lambda: Path("data"))
    # loopback unless opened up: a broker is not reachable from the network by accident
    bind: str = "127.0.0.1"
    port: int | None = 6650  # None: no plain pulsar:// listener
    admin_port: int | None = 8080  # None: no plain http:// admin listener
    advertised_address: str = ""
    # advertisedListeners / internalListenerName (advertised_listeners.py): "" = off
    advertised_listeners: str = ""
    internal_listener_name: str = ""
    # Host names the admin server answers to besides IP literals, localhost, the bind and
    # advertised names (admin/host_check.py; "*": any)
    admin_allowed_hosts: list[str] = field(default_factory=list)
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
    # the replay window (storage/retention.py): acknowledged entries stay this long, at most
    # this many per topic, so a seek back replays them (Pulsar: until the ledger rolls over)
    acked_replay_minutes: int = 10
    acked_replay_max_entries: int = 50_000
    cluster_name: str = "standalone"
    log_level: str = "INFO"
    # --- TLS (Pulsar: brokerServicePortTls, webServicePortTls, tls*) ---
    broker_service_port_tls: int | None = None  # pulsar+ssl:// listener (Pulsar's is 6651)
    web_service_port_tls: int | None = None  # https:// admin listener (Pulsar's is 8443)
    tls_certificate_file_path: str = ""
    tls_key_file_path: str = ""
    tls_trust_certs_file_path: str = ""  # CA(s) that client certificates must chain to
    tls_require_trusted_client_cert_on_connect: bool = False  # mutual TLS
    # accept any client certificate unverified (then never used to authenticate)
    tls_allow_insecure_connection: bool = False
    # --- authentication and authorization ---
    authentication_enabled: bool = False
    authentication_providers: list[str] = field(default_factory=list)
    authentication_refresh_check_seconds: int = 60
    authorization_enabled: bool = False
    super_user_roles: list[str] = field(default_factory=list)
    anonymous_user_role: str = ""
    token_secret_key: str = ""  # file:///path, data:;base64,..., or base64 text
    token_public_key: str = ""
    token_auth_claim: str = "sub"
    token_audience_claim: str = "aud"
    token_audience: str = ""  # when set, a token's audience claim must name it
    basic_auth_conf: str = ""  # htpasswd file (a path, file:///path or data:;base64,...)
    # --- limits (Pulsar's names; 0 = unlimited where Pulsar says so) -----
    broker_max_connections: int = 0  # brokerMaxConnections
    broker_max_connections_per_ip: int = 0  # brokerMaxConnectionsPerIp
    max_pending_publish_requests_per_connection: int = 1000  # maxPendingPublishRequestsPerConnection
    # bytes of one connection's SENDs not yet receipted plus its unfinished frame
    # before reading pauses (letterbox; never less than one max-size frame)
    max_pending_bytes_per_connection: int = 16 * 1024 * 1024
    # bytes awaiting storage over all connections (maxMessagePublishBufferSizeInMB; -1: no
    # limit); 64 keeps broker RSS under ~300 MB however many producers flood (docs/operations.md)
    max_message_publish_buffer_size_in_mb: int = 64
    # a started frame must be complete within this time, and CONNECT must
    # arrive this long after the TCP accept (letterbox; Pulsar has no equivalent)
    frame_timeout_seconds: float = 30.0
    connect_timeout_seconds: float = 10.0
    max_topics_per_namespace: int = 0  # maxTopicsPerNamespace
    max_subscriptions_per_topic: int = 0  # maxSubscriptionsPerTopic
    max_unacked_messages_per_consumer: int = 50_000  # maxUnackedMessagesPerConsumer
    max_unacked_messages_per_subscription: int = 200_000  # maxUnackedMessagesPerSubscription
    # --- the broker's clock (letterbox/clock.py): "manual" moves only through
    # POST /admin/v2/letterbox/clock/advance, for tests; refused unless allow_test_clock
    clock: str = "real"
    allow_test_clock: bool = False
    # --- delivery attempt log (letterbox) ---
    attempt_log_size: int = 10  # failed deliveries kept per message (the last N)
    # --- topic compaction (broker/compaction/compactor.py) ---
    compaction_chunk_entries: int = 1000  # entries read, and view rows written, per step
    compaction_monitor_interval_seconds: int = 60  # brokerServiceCompactionMonitorIntervalInSeconds
    # --- schema registry (broker/schemas/schema_registry.py) ---
    schema_compatibility_strategy: str = "FULL"  # schemaCompatibilityStrategy: namespaces without a policy
    # --- behave as Apache Pulsar (admin/compat_mode.py): every letterbox-only extension off ---
    pulsar_compatible_only: bool = False

    def validate(self) -> BrokerConfig:
        for name in ("port", "admin_port", "broker_service_port_tls", "web_service_port_tls"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 65535:
                raise ConfigError(f"{name} must be between 0 and 65535, got {value}")
        if self.sync not in SYNC_MODES:
            raise ConfigError(f"sync must be one of {', '.join(SYNC_MODES)}, got {self.sync!r}")
        if not 1024 <= self.max_message_size <= 1024 * 1024 * 1024:
            raise ConfigError(
                f"max_message_size must be between 1024 and 1073741824 bytes, got {self.max_message_size}"
            )
        if self.advertised_listeners or self.internal_listener_name:
            from letterbox.advertised_listeners import ListenerConfigError, internal_name, parse

            try:
                listeners = parse(self.advertised_listeners)
                if not listeners:
                    raise ListenerConfigError("internalListenerName needs advertisedListeners")
                internal_name(listeners, self.internal_listener_name)
            except ListenerConfigError as exc:
                raise ConfigError(str(exc)) from None
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
        for name in ("acked_replay_minutes", "acked_replay_max_entries"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (0 turns it off), got {getattr(self, name)}")
        if self.cache_size_mb < 0:
            raise ConfigError(f"cache_size_mb must be >= 0, got {self.cache_size_mb}")
        self._validate_limits()
        if not 1 <= self.compaction_chunk_entries <= 1_000_000:
            raise ConfigError(f"compaction_chunk_entries must be between 1 and 1000000, got {self.compaction_chunk_entries}")
        if not 1 <= self.compaction_monitor_interval_seconds <= 86_400:
            raise ConfigError("compaction_monitor_interval_seconds must be between 1 and 86400, "
                              f"got {self.compaction_monitor_interval_seconds}")
        self.schema_compatibility_strategy = self.schema_compatibility_strategy.upper()
        if self.schema_compatibility_strategy not in SCHEMA_COMPATIBILITY_STRATEGIES[1:]:
            raise ConfigError(f"schema_compatibility_strategy must be one of "
                              f"{', '.join(SCHEMA_COMPATIBILITY_STRATEGIES[1:])}, got {self.schema_compatibility_strategy!r}")
        if not 1 <= self.attempt_log_size <= 1000:
            raise ConfigError(f"attempt_log_size must be between 1 and 1000, got {self.attempt_log_size}")
        self._validate_security()
        self._validate_clock()
        return self

    def _validate_clock(self) -> None:
        if self.clock not in CLOCK_KINDS:
            raise ConfigError(f"clock must be one of {', '.join(CLOCK_KINDS)}, got {self.clock!r}")
        if self.clock == "manual" and not self.allow_test_clock:
            raise ConfigError(
                "clock 'manual' stops the broker's time (backoff, delayed delivery, TTL) until a test "
                "advances it, so it is for tests only: add --allow-test-clock "
                "(allow_test_clock = true, LETTERBOX_ALLOW_TEST_CLOCK=1) to run it"
            )

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

    def _validate_security(self) -> None:
        if self.port is None and self.broker_service_port_tls is None:
            raise ConfigError(
                "port is disabled and broker_service_port_tls is not set: the broker needs a listener"
            )
        tls_on = self.broker_service_port_tls is not None or self.web_service_port_tls is not None
        if tls_on:
            for name in ("tls_certificate_file_path", "tls_key_file_path"):
                path = getattr(self, name)
                if not path:
                    raise ConfigError(f"{name} must be set when a TLS port is configured")
                if not Path(path).is_file():
                    raise ConfigError(f"{name}: no such file {path!r}")
        trust = self.tls_trust_certs_file_path
        if trust and not Path(trust).is_file():
            raise ConfigError(f"tls_trust_certs_file_path: no such file {trust!r}")
        if self.tls_require_trusted_client_cert_on_connect and not trust:
            raise ConfigError(
                "tls_require_trusted_client_cert_on_connect needs tls_trust_certs_file_path "
                "(the CA client certificates must chain to)"
            )
        unknown = [p for p in self.authentication_providers if p not in AUTH_PROVIDERS]
        if unknown:
            raise ConfigError(
                f"authentication_providers has unknown provider(s) {', '.join(map(repr, unknown))}; "
                "known: token, basic, tls (or Pulsar's AuthenticationProvider class names)"
            )
        providers = self.auth_provider_names()
        if self.authentication_enabled and not providers:
            raise ConfigError(
                "authentication_enabled needs authentication_providers (token, basic and/or tls)"
            )
        if "token" in providers and not (self.token_secret_key or self.token_public_key):
            raise ConfigError(
                "authentication provider 'token' needs token_secret_key or token_public_key"
            )
        if "basic" in providers and not self.basic_auth_conf:
            raise ConfigError("authentication provider 'basic' needs basic_auth_conf (an htpasswd file)")
        if self.authentication_refresh_check_seconds < 1:
            raise ConfigError(
                "authentication_refresh_check_seconds must be >= 1, "
                f"got {self.authentication_refresh_check_seconds}"
            )
        if not self.token_auth_claim:
            raise ConfigError("token_auth_claim must name a claim (Pulsar's default is 'sub')")

    def auth_provider_names(self) -> list[str]:
        """authentication_providers as short names (token, basic, tls), in order, once each."""
        names: list[str] = []
        for provider in self.authentication_providers:
            short = AUTH_PROVIDERS.get(provider)
            if short is not None and short not in names:
                names.append(short)
        return names

    @classmethod
    def load(
        cls,
        config_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
        pulsar_settings: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """`pulsar_settings` (letterbox names -> text, see security/pulsar_config.py)
        rank just above the defaults."""
        values: dict[str, Any] = {}
        if pulsar_settings:
            values.update(_coerce_all(pulsar_settings, "Pulsar config"))
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
            for key, value in overrides.items():
                if value is None:
                    continue  # not given on the command line
                if isinstance(value, str) and key in _FIELDS and _kind(key) != "str":
                    value = _coerce(key, value, f"option --{key.replace('_', '-')}")
                values[key] = value
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


def _kind(name: str) -> str:
    """The declared type of a setting, as written in the dataclass."""
    return str(_FIELDS[name].type)


def _coerce(name: str, value: Any, where: str) -> Any:
    kind = _kind(name)
    if kind == "list[str]":
        return _coerce_list(name, value, where)
    try:
        if kind == "Path":
            return Path(str(value))
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind in ("int", "int | None"):
            if kind == "int | None" and isinstance(value, str) and value.strip() == DISABLED:
                return None
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError(value)
            return int(value)
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ValueError(value)
            number = float(value)
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError(value)
            return number
        if isinstance(value, list | dict | bool):
            raise ValueError(value)
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
