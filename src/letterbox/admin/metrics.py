# GET /metrics: Prometheus text exposition (format 0.0.4) with Pulsar's
# metric names and labels (cluster, namespace, topic, subscription) where
# Pulsar has one, plus letterbox's own dead-letter counters by reason.
from __future__ import annotations

from typing import TYPE_CHECKING

from letterbox.broker.topic import PersistentTopic

if TYPE_CHECKING:
    from letterbox.admin.stats import StatsTracker
    from letterbox.broker.service import BrokerService

Labels = dict[str, str]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = name
        self.kind = kind
        self.help = help_text
        self.samples: list[tuple[Labels, float]] = []

    def add(self, labels: Labels, value: float) -> None:
        self.samples.append((labels, value))

    def render(self) -> str:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        for labels, value in self.samples:
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            lines.append(f"{self.name}{{{text}}} {_fmt(value)}")
        return "\n".join(lines)


def render_metrics(service: BrokerService, tracker: StatsTracker) -> str:
    cluster = service.config.cluster_name
    fams = {
        name: _Family(name, kind, help_text)
        for name, kind, help_text in (
            ("pulsar_in_messages_total", "counter", "Messages published to the topic"),
            ("pulsar_in_bytes_total", "counter", "Bytes published to the topic"),
            ("pulsar_out_messages_total", "counter", "Messages dispatched to consumers of the topic"),
            ("pulsar_rate_in", "gauge", "Messages per second published (1 minute window)"),
            ("pulsar_rate_out", "gauge", "Messages per second dispatched (1 minute window)"),
            ("pulsar_storage_size", "gauge", "Bytes stored for the topic"),
            ("pulsar_msg_backlog", "gauge", "Messages not yet acknowledged, summed over subscriptions"),
            ("pulsar_producers_count", "gauge", "Connected producers"),
            ("pulsar_subscriptions_count", "gauge", "Subscriptions"),
            ("pulsar_consumers_count", "gauge", "Connected consumers"),
            ("pulsar_subscription_back_log", "gauge", "Messages not yet acknowledged by the subscription"),
            ("pulsar_subscription_unacked_messages", "gauge", "Messages delivered and not yet acknowledged"),
            ("pulsar_subscription_delayed", "gauge", "Messages held back for delayed delivery or backoff"),
            ("pulsar_subscription_msg_rate_redeliver", "gauge", "Redeliveries per second (1 minute window)"),
            ("pulsar_subscription_consumers_count", "gauge", "Consumers connected to the subscription"),
            ("letterbox_dead_letter_messages_total", "counter", "Messages moved to a dead letter topic, by reason"),
        )
    }
    _load_stored_topics(service)
    tracker.counters()  # fold departed consumers into the out counters
    for tname, topic in sorted(service.topics.items()):
        base = {"cluster": cluster, "namespace": topic.name.namespace_name, "topic": tname}
        subs = dict(getattr(topic, "subscriptions", {}))
        msg_out = 0
        for sname, sub in sorted(subs.items()):
            lab = {**base, "subscription": sname}
            out = tracker.sub_msg_out(tname, sname, list(sub.consumers))
            msg_out += out
            backlog = sub.backlog() if hasattr(sub, "backlog") else 0
            fams["pulsar_subscription_back_log"].add(lab, backlog)
            fams["pulsar_subscription_unacked_messages"].add(
                lab, sum(sum(c.pending.values()) for c in sub.consumers)
            )
            fams["pulsar_subscription_delayed"].add(
                lab, sub.delayed_count() if hasattr(sub, "delayed_count") else 0
            )
            fams["pulsar_subscription_msg_rate_redeliver"].add(lab, tracker.rate("redeliver", tname, sname))
            fams["pulsar_subscription_consumers_count"].add(lab, len(sub.consumers))
        fams["pulsar_in_messages_total"].add(base, topic.msg_in)
        fams["pulsar_in_bytes_total"].add(base, topic.bytes_in)
        fams["pulsar_out_messages_total"].add(base, msg_out)
        fams["pulsar_rate_in"].add(base, tracker.rate("in", tname))
        fams["pulsar_rate_out"].add(base, tracker.rate("out", tname))
        storage = topic.ledger.size_bytes() if isinstance(topic, PersistentTopic) else 0
        fams["pulsar_storage_size"].add(base, storage)
        fams["pulsar_msg_backlog"].add(base, topic.backlog() if isinstance(topic, PersistentTopic) else 0)
        fams["pulsar_producers_count"].add(base, len(topic.producers))
        fams["pulsar_subscriptions_count"].add(base, len(subs))
        fams["pulsar_consumers_count"].add(base, sum(len(s.consumers) for s in subs.values()))
    for reason, count in sorted(service.stats.dead_letters_by_reason.items()):
        fams["letterbox_dead_letter_messages_total"].add({"cluster": cluster, "reason": reason}, count)
    return "\n".join(f.render() for f in fams.values()) + "\n"


def _load_stored_topics(service: BrokerService) -> None:
    """Stored topics not used since the broker started are loaded, so they are reported too."""
    from letterbox.errors import LetterboxError
    from letterbox.topic_name import TopicName

    for name in service.store.ledger_names():
        if name not in service.topics:
            try:
                service.get_topic(TopicName.parse(name), create=False)
            except LetterboxError:
                continue
