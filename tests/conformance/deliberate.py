"""Differences from Apache Pulsar that letterbox keeps on purpose, and the known ones still to fix.

Each entry pins BOTH sides: the conformance test asserts that Apache Pulsar still answers
`pulsar` and letterbox still answers `letterbox`, so a change on either side shows. Every entry
has its row in docs/compatibility.md ("Deliberate differences", or "Known differences" for an
entry with `known=True`: a letterbox defect that is measured, listed and open), named by
`anchor`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Deliberate:
    reason: str  # one line: what letterbox does better, as docs/compatibility.md says it
    anchor: str  # the row of docs/compatibility.md
    pulsar: Any
    letterbox: Any
    known: bool = False  # a defect to fix, not a choice


# (client, scenario) -> the difference
def _second(counts: tuple[int, int, int]) -> list[dict[str, Any]]:
    return [{"data": d, "key": None, "redelivery_count": n} for d, n in zip(("m1", "m3", "m4"), counts, strict=True)]


def _nacked_twice(counts: tuple[int, int]) -> dict[str, Any]:
    return {"first": [["m0", 0], ["m1", 0], ["m2", 0]], "later": [["m1", counts[0]], ["m1", counts[1]]]}


def _corrupt_twentieth(before: bool) -> dict[str, Any]:
    return {"errors": [{"seq": 20, "error": "ChecksumError"}], "receipts": [*range(20), 21],
            "error_before_earlier_receipts": before}


_COUNTS_EVERYWHERE = ("redelivery counts are kept on every subscription type, so dead-lettering and backoff "
                      "work on Exclusive and Failover too (Pulsar's are always 0 there)")

DELIBERATE: dict[tuple[str, str], Deliberate] = {
    ("python", "delayed_one_second_shared"): Deliberate(
        "a delayed message is delivered at the time asked, never up to a tick early",
        "delayed-delivery-on-time",
        pulsar={"order": ["d", "m1"], "d_over_0.5s_after_m1": False},
        letterbox={"order": ["m1", "d"], "d_over_0.5s_after_m1": True}),
    ("python", "unacked_come_back_to_next_consumer"): Deliberate(
        "a consumer that disconnects holding unacknowledged messages counts one attempt for the "
        "oldest one it held, so a message that kills its consumer still reaches the dead letter topic",
        "counts-deliveries-to-closed-consumers",
        pulsar={"first": ["m0", "m1", "m2", "m3", "m4"], "second": _second((0, 0, 0))},
        letterbox={"first": ["m0", "m1", "m2", "m3", "m4"], "second": _second((1, 0, 0))}),
    ("python", "nack_redelivery_count_exclusive"): Deliberate(
        _COUNTS_EVERYWHERE, "counts-on-every-subscription-type",
        pulsar=_nacked_twice((0, 0)), letterbox=_nacked_twice((1, 2))),
    ("python", "nack_redelivery_count_failover"): Deliberate(
        _COUNTS_EVERYWHERE, "counts-on-every-subscription-type",
        pulsar=_nacked_twice((0, 0)), letterbox=_nacked_twice((1, 2))),
    ("python", "redelivery_count_across_reconnect"): Deliberate(
        "redelivery counts are persisted with the subscription cursor, so a consumer that reconnects "
        "does not reset them (and a consumer that closes holding a message counts one attempt for it)",
        "counts-survive-reconnect",
        pulsar=[0, 1, 2, 0], letterbox=[0, 1, 2, 3]),
    ("python", "connected_answer"): Deliberate(
        "letterbox advertises no topic-list watchers (pattern consumers poll for new topics) "
        "and no geo-replication",
        "connected-feature-flags",
        pulsar={"type": "CONNECTED", "protocol_version": 21, "max_message_size": 5242880,
                "feature_flags": ["supports_get_partitioned_metadata_without_auto_creation",
                                  "supports_repl_dedup_by_lid_and_eid", "supports_topic_watchers"]},
        letterbox={"type": "CONNECTED", "protocol_version": 21, "max_message_size": 5242880,
                   "feature_flags": ["supports_get_partitioned_metadata_without_auto_creation"]}),
    ("python", "watch_topic_list"): Deliberate(
        "a topic-list watcher is refused with NotAllowed, the answer of a Pulsar broker with "
        "enableBrokerSideSubscriptionPatternEvaluation=false; clients then poll",
        "connected-feature-flags",
        pulsar={"type": "WATCH_TOPIC_LIST_SUCCESS"},
        letterbox={"type": "ERROR", "error": "NotAllowedError"}),
    ("python", "schema_strategy_unknown_value"): Deliberate(
        "an unknown schema compatibility strategy is refused with 400 and the namespace keeps its "
        "strategy; Pulsar answers 204 and silently resets it to UNDEFINED (the broker's default)",
        "unknown-schema-strategy-refused",
        pulsar={"bogus": 204, "after": [200, "UNDEFINED"]},
        letterbox={"bogus": 400, "after": [200, "FORWARD"]}),
    ("python", "publish_in_flight_over_1000"): Deliberate(
        "a connection paused at 1,000 unreceipted sends is read again as soon as its receipts bring it "
        "back to 500; Pulsar's stays unread until the client's keep-alive closes it (about 60 s)",
        "reading-resumes-after-publish-backpressure",
        pulsar={"all_receipted_within_10s": False, "at_least_1000_receipted": True, "failed": 0},
        letterbox={"all_receipted_within_10s": True, "at_least_1000_receipted": True, "failed": 0}),
    ("python", "checksum_error_after_earlier_receipts"): Deliberate(
        "a producer's answers come in its send order: a ChecksumError follows the receipts of the "
        "SENDs sent ahead of it, as the Java client expects (it recovers only its oldest pending message)",
        "producer-answers-in-send-order",
        pulsar=_corrupt_twentieth(before=True), letterbox=_corrupt_twentieth(before=False)),
    ("python", "broker_backoff_property"): Deliberate(
        "the consumer property letterbox.backoff.min_ms makes the broker hold a nacked message back "
        "(on every subscription type); Pulsar keeps consumer properties as metadata only",
        "broker-side-failure-policies",
        pulsar={"back_within_1_5s": True, "back_within_10s": True, "count": 0},
        letterbox={"back_within_1_5s": False, "back_within_10s": True, "count": 1}),
    ("python", "broker_dead_letter_property"): Deliberate(
        "the consumer property letterbox.dlq.max_redeliveries moves a message to the dead letter topic "
        "broker-side, in one step with its acknowledgement, with its key, properties and the reason; "
        "Pulsar ignores the property (and counts 0 on Exclusive)",
        "broker-side-failure-policies",
        pulsar={"deliveries": [0, 0, 0, 0], "dead": []},
        letterbox={"deliveries": [0, 1], "dead": [{
            "data": "poison", "key": "k", "reason": "max-redeliveries",
            "property_names": ["DEAD_LETTER_REASON", "DEAD_LETTER_SUBSCRIPTION", "DEAD_LETTER_TIME",
                               "DELIVERY_ATTEMPTS", "DELIVERY_COUNT", "FIRST_DELIVERY_TIME", "LAST_DELIVERY_TIME",
                               "ORIGIN_MESSAGE_ID", "ORIGIN_PUBLISH_TIME", "REAL_TOPIC", "app"]}]}),
    ("go", "nack_exclusive_count"): Deliberate(
        "redelivery counts go up on every subscription type, Exclusive and Failover included",
        "counts-on-every-subscription-type",
        pulsar={"after": [], "redelivery_counts": [0, 0, 0]},
        letterbox={"after": [], "redelivery_counts": [0, 1, 2]}),
    ("java", "nack_redelivery_count_exclusive"): Deliberate(
        "redelivery counts go up on every subscription type, Exclusive and Failover included",
        "counts-on-every-subscription-type",
        pulsar={"deliveries": [["m0", 0], ["m0", 0], ["m0", 0], ["m0", 0]], "after_ack": None},
        letterbox={"deliveries": [["m0", 0], ["m0", 1], ["m0", 2], ["m0", 3]], "after_ack": None}),
    ("go", "count_across_reconnect"): Deliberate(
        "redelivery counts are stored with the subscription: a new consumer (or a restarted "
        "broker) continues the count",
        "counts-survive-reconnect",
        pulsar={"after": [], "after_reconnect": 0, "before_close": [0, 1]},
        letterbox={"after": [], "after_reconnect": 2, "before_close": [0, 1]}),
    ("java", "nack_count_across_reconnect"): Deliberate(
        "redelivery counts are stored with the subscription: a new consumer (or a restarted "
        "broker) continues the count",
        "counts-survive-reconnect",
        pulsar={"before_close": [0, 1, 2], "after_reconnect": ["m0", 0]},
        letterbox={"before_close": [0, 1, 2], "after_reconnect": ["m0", 3]}),
    ("go", "dlq_nack_exclusive"): Deliberate(
        "redelivery counts go up on Exclusive too, so the Go client's DLQPolicy, which follows the "
        "count on every subscription type, moves the message after MaxDeliveries",
        "counts-on-every-subscription-type",
        pulsar={"counts": [0, 0, 0, 0, 0], "dead": []},
        letterbox={"counts": [0, 1], "dead": ["m0"]}),
    ("java", "nack_dlq_exclusive"): Deliberate(
        "redelivery counts go up on Exclusive too; the Java client's DeadLetterPolicy has no path "
        "there, and a message it hands back unseen (count above maxRedeliverCount) comes again "
        "with the highest count it keeps",
        "counts-on-every-subscription-type",
        pulsar={"counts": [0, 0, 0, 0, 0, 0], "dlq": None},
        letterbox={"counts": [0, 1, 2, 2, 2, 2], "dlq": None}),
    ("python", "dlq_exclusive_subscription"): Deliberate(
        "redelivery counts go up on Exclusive too; the official client's dead letter policy has no "
        "path there, and a message it hands back unseen (count above max_redeliver_count) comes "
        "again with the highest count it keeps, so the application sees it each time, as on Pulsar",
        "counts-on-every-subscription-type",
        pulsar={"seen": [["poison", 0]] * 5, "dead": [], "sent_at_most_10": True},
        letterbox={"seen": [["poison", 0], ["poison", 1], ["poison", 2], ["poison", 2], ["poison", 2]],
                   "dead": [], "sent_at_most_10": True}),
    ("go", "non_persistent"): Deliberate(
        "a consumer on a non-persistent topic gets every message published while it is connected; "
        "with the Go client, Pulsar delivered none sent after the consumer had received its first",
        "non-persistent-delivers-every-message",
        pulsar={"received": ["m0"]},
        letterbox={"received": ["m0", "m1", "m2"]}),
}
