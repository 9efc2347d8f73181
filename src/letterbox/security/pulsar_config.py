# Reading an Apache Pulsar broker.conf / standalone.conf (Java properties:
# `key=value`, `#` or `!` comments, blank lines, empty values) into letterbox
# settings. Pure: no I/O beyond reading the file, no logging; the caller logs
# the keys that were ignored, once.
#
# Invariants: every Pulsar key letterbox understands maps to exactly one
# BrokerConfig field; an empty value leaves the letterbox default in place,
# except for the plain ports, where Pulsar's empty brokerServicePort /
# webServicePort means "no plain listener" and maps to "" (disabled).
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Pulsar key -> letterbox setting
PULSAR_KEYS: dict[str, str] = {
    "brokerServicePort": "port",
    "brokerServicePortTls": "broker_service_port_tls",
    "webServicePort": "admin_port",
    "webServicePortTls": "web_service_port_tls",
    "bindAddress": "bind",
    "advertisedAddress": "advertised_address",
    "advertisedListeners": "advertised_listeners",
    "internalListenerName": "internal_listener_name",
    "clusterName": "cluster_name",
    "maxMessageSize": "max_message_size",
    "allowAutoTopicCreation": "auto_topic_creation",
    "allowAutoTopicCreationType": "auto_topic_creation_type",
    "defaultNumPartitions": "default_num_partitions",
    "brokerDeduplicationEnabled": "deduplication_enabled",
    "defaultRetentionTimeInMinutes": "retention_time_minutes",
    "managedLedgerMinLedgerRolloverTimeMinutes": "acked_replay_minutes",
    "managedLedgerMaxEntriesPerLedger": "acked_replay_max_entries",
    "brokerMaxConnections": "broker_max_connections",
    "brokerMaxConnectionsPerIp": "broker_max_connections_per_ip",
    "maxPendingPublishRequestsPerConnection": "max_pending_publish_requests_per_connection",
    "maxMessagePublishBufferSizeInMB": "max_message_publish_buffer_size_in_mb",
    "maxTopicsPerNamespace": "max_topics_per_namespace",
    "maxSubscriptionsPerTopic": "max_subscriptions_per_topic",
    "maxUnackedMessagesPerConsumer": "max_unacked_messages_per_consumer",
    "maxUnackedMessagesPerSubscription": "max_unacked_messages_per_subscription",
    "schemaCompatibilityStrategy": "schema_compatibility_strategy",
    "tlsCertificateFilePath": "tls_certificate_file_path",
    "tlsKeyFilePath": "tls_key_file_path",
    "tlsTrustCertsFilePath": "tls_trust_certs_file_path",
    "tlsRequireTrustedClientCertOnConnect": "tls_require_trusted_client_cert_on_connect",
    "tlsAllowInsecureConnection": "tls_allow_insecure_connection",
    "authenticationEnabled": "authentication_enabled",
    "authenticationProviders": "authentication_providers",
    "authenticationRefreshCheckSeconds": "authentication_refresh_check_seconds",
    "authorizationEnabled": "authorization_enabled",
    "superUserRoles": "super_user_roles",
    "anonymousUserRole": "anonymous_user_role",
    "tokenSecretKey": "token_secret_key",
    "tokenPublicKey": "token_public_key",
    "tokenAuthClaim": "token_auth_claim",
    "tokenAudienceClaim": "token_audience_claim",
    "tokenAudience": "token_audience",
    "basicAuthConf": "basic_auth_conf",
    "pulsar.auth.basic.conf": "basic_auth_conf",
}
# ports whose empty value switches the listener off instead of meaning "default"
_EMPTY_DISABLES = {"brokerServicePort", "webServicePort", "brokerServicePortTls", "webServicePortTls"}


class PulsarConfigError(ValueError):
    """The file cannot be read or a line is not `key=value`; the message says where."""


@dataclass
class PulsarSettings:
    values: dict[str, str] = field(default_factory=dict)  # letterbox setting -> text
    ignored: list[str] = field(default_factory=list)  # Pulsar keys with a value we do not use


def parse_pulsar_config(text: str, source: str = "Pulsar config") -> PulsarSettings:
    out = PulsarSettings()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise PulsarConfigError(f"{source} line {lineno}: expected key=value, got {line!r}")
        key, value = line[:cut].strip(), line[cut + 1 :].strip()
        name = PULSAR_KEYS.get(key)
        if name is None:
            if value and key not in out.ignored:
                out.ignored.append(key)
            continue
        if value:
            out.values[name] = value
        elif key in _EMPTY_DISABLES:
            out.values[name] = ""
    return out


def read_pulsar_config(path: Path) -> PulsarSettings:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PulsarConfigError(f"cannot read Pulsar config {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise PulsarConfigError(f"Pulsar config {path} is not UTF-8 text: {exc}") from exc
    return parse_pulsar_config(text, f"Pulsar config {path}")
