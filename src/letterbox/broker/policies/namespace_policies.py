# Namespace policies: the Pulsar ones letterbox enforces (deduplication,
# retention, message TTL) and letterbox's own dead-letter and redelivery
# backoff policies. They are kept in the store's metadata map as the JSON
# document of the namespace ("namespace:<tenant>/<ns>", the same document the
# admin API creates), with Pulsar's field names (deduplicationEnabled,
# retention_policies, message_ttl_in_seconds) plus letterbox_* fields, so they
# survive restarts. NamespacePolicyCache is the broker's read path: parsed
# once per namespace and dropped on every change, because the publish and
# dispatch paths ask for them per message.
# Precedence: a subscription whose consumers set letterbox.* consumer
# properties uses those (the last created consumer's wins, PIP-22); other
# subscriptions use the namespace's dead-letter and backoff policies.
# A namespace without a deduplication or retention policy uses the broker
# configuration.
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from letterbox.failure import Backoff, DeadLetterPolicy, FailurePolicy, PolicyError, PolicyOrigin
from letterbox.failure.events import FailureEventsPolicy
from letterbox.failure.limits import MAX_BACKOFF_MULTIPLIER, MAX_DELAY_MS
from letterbox.failure.policies import KeyFailure

if TYPE_CHECKING:
    from letterbox.broker.policies.bounded import PolicyBroker

NAMESPACE_KEY = "namespace:"
DEDUP = "deduplicationEnabled"
RETENTION = "retention_policies"
TTL = "message_ttl_in_seconds"
DEAD_LETTER = "letterbox_dead_letter_policy"
BACKOFF = "letterbox_redelivery_backoff"
FAILURE_EVENTS = "letterbox_failure_events"  # failure/events.py: the namespace's failure events topic


@dataclass(frozen=True)
class NamespacePolicies:
    deduplication: bool | None = None
    retention_minutes: int | None = None
    retention_size_mb: int | None = None
    ttl_seconds: int | None = None
    subscription: FailurePolicy = field(default_factory=lambda: FailurePolicy(origin=PolicyOrigin.NAMESPACE))
    failure_events: FailureEventsPolicy = field(default_factory=FailureEventsPolicy)

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> NamespacePolicies:
        retention = doc.get(RETENTION) or {}
        dl = doc.get(DEAD_LETTER)
        bo = doc.get(BACKOFF)
        dead_letter = None
        if dl:
            dead_letter = DeadLetterPolicy(
                int(dl["maxRedeliverCount"]),
                dead_letter_topic=dl.get("deadLetterTopic"),
                initial_subscription_name=dl.get("initialSubscriptionName"),
            )
        backoff = None
        if bo:
            # clamped: a document stored before the admin API checked ranges may hold any number
            low = max(1, min(int(bo["minDelayMs"]), MAX_DELAY_MS))
            high = max(low, min(int(bo["maxDelayMs"]), MAX_DELAY_MS))
            backoff = Backoff(low, high, min(max(float(bo["multiplier"]), 1.0), MAX_BACKOFF_MULTIPLIER))
        return cls(
            deduplication=doc.get(DEDUP),
            retention_minutes=retention.get("retentionTimeInMinutes") if retention else None,
            retention_size_mb=retention.get("retentionSizeInMB") if retention else None,
            ttl_seconds=doc.get(TTL),
            subscription=FailurePolicy(dead_letter, backoff, origin=PolicyOrigin.NAMESPACE,
                                       on_key_failure=_key_failure(dl)),
            failure_events=_failure_events(doc.get(FAILURE_EVENTS)),
        )


def _failure_events(value: Any) -> FailureEventsPolicy:
    """The stored failure events policy; one that no longer reads (edited by hand): off."""
    if not value:
        return FailureEventsPolicy()
    try:
        return FailureEventsPolicy.from_json(value)
    except PolicyError:
        return FailureEventsPolicy()


def _key_failure(dl: dict[str, Any] | None) -> KeyFailure:
    """The ordered quarantine of the namespace's dead-letter policy (applied on ordered
    subscriptions only, failure.key_quarantine.parks); an unknown stored value: continue."""
    value = (dl or {}).get("onKeyFailure")
    return KeyFailure.PARK if value == KeyFailure.PARK.value else KeyFailure.CONTINUE


_EMPTY = NamespacePolicies()


class NamespacePolicyCache:
    def __init__(self, service: PolicyBroker) -> None:
        self.service = service
        self._cache: dict[str, NamespacePolicies] = {}

    def document(self, namespace: str) -> dict[str, Any] | None:
        raw = self.service.store.get_metadata(NAMESPACE_KEY + namespace)
        if raw is None:
            return None
        doc = json.loads(raw)
        return doc if isinstance(doc, dict) else {}

    def get(self, namespace: str) -> NamespacePolicies:
        policies = self._cache.get(namespace)
        if policies is None:
            doc = self.document(namespace)
            policies = NamespacePolicies.from_document(doc) if doc else _EMPTY
            self._cache[namespace] = policies
        return policies

    async def update(self, namespace: str, key: str, value: Any) -> None:
        """Set (or with value None, remove) one policy field, durably, then apply it."""
        doc = self.document(namespace) or {}
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
        await self.service.store.put_metadata(NAMESPACE_KEY + namespace, json.dumps(doc))
        self._cache.pop(namespace, None)
        self.service.apply_namespace_policies(namespace)

    def forget(self, namespace: str) -> None:
        self._cache.pop(namespace, None)
        self.service.apply_namespace_policies(namespace)

    # --- what the broker asks ----------------------------------------------------
    def deduplication(self, namespace: str) -> bool:
        value = self.get(namespace).deduplication
        return self.service.config.deduplication_enabled if value is None else value

    def retention_ms(self, namespace: str) -> int:
        """-1 keep forever, 0 delete once acknowledged, n keep n ms after publishing."""
        minutes = self.get(namespace).retention_minutes
        if minutes is None:
            minutes = self.service.config.retention_time_minutes
        return -1 if minutes < 0 else minutes * 60_000

    def retention_bytes(self, namespace: str) -> int:
        """-1 no size limit (also for 0 or no policy), n > 0 MB as bytes."""
        size_mb = self.get(namespace).retention_size_mb
        return size_mb * 1024 * 1024 if size_mb is not None and size_mb > 0 else -1

    def subscription_policy(self, namespace: str) -> FailurePolicy:
        return self.get(namespace).subscription
