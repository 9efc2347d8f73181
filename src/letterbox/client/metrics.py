# Counters of the retrying consumer, in a Prometheus registry of their own.
# Names follow Pulsar's client metrics (`pulsar.client.consumer.message.nack`,
# `.message.dlq`) and PIP-372 (`pulsar_client_consumer_terms`); the retry
# counter is letterbox's. Labels: tenant, namespace, topic and subscription
# of the consumer (the topic it was subscribed to, not a partition).
from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)
_LABELS = ("pulsar_tenant", "pulsar_namespace", "topic", "subscription")

TERMS = Counter("pulsar_client_consumer_terms", "Messages terminated by the client (PIP-372)",
                _LABELS, registry=REGISTRY)
DLQ = Counter("pulsar_client_consumer_message_dlq", "Messages the client sent to the dead letter topic",
              _LABELS, registry=REGISTRY)
RETRY = Counter("pulsar_client_consumer_message_retry", "Messages sent to the retry letter topic",
                _LABELS, registry=REGISTRY)
NACK = Counter("pulsar_client_consumer_message_nack", "Negatively acknowledged messages",
               _LABELS, registry=REGISTRY)


@dataclass(frozen=True)
class CounterValues:
    terminated: int
    dead_lettered: int
    reconsumed: int
    nacked: int


class ConsumerCounters:
    """The four counters bound to one consumer's labels."""

    def __init__(self, tenant: str, namespace: str, topic: str, subscription: str) -> None:
        labels = (tenant, namespace, topic, subscription)
        self._labels = dict(zip(_LABELS, labels, strict=True))
        self.terms = TERMS.labels(*labels)
        self.dlq = DLQ.labels(*labels)
        self.retry = RETRY.labels(*labels)
        self.nack = NACK.labels(*labels)

    def _read(self, name: str) -> int:
        return int(REGISTRY.get_sample_value(name + "_total", self._labels) or 0)

    def values(self) -> CounterValues:
        return CounterValues(
            terminated=self._read("pulsar_client_consumer_terms"),
            dead_lettered=self._read("pulsar_client_consumer_message_dlq"),
            reconsumed=self._read("pulsar_client_consumer_message_retry"),
            nacked=self._read("pulsar_client_consumer_message_nack"),
        )


def metrics_text() -> str:
    """All letterbox client counters in the Prometheus text format."""
    return generate_latest(REGISTRY).decode()
