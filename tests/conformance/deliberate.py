"""Differences from Apache Pulsar that letterbox keeps on purpose.

Each entry pins BOTH sides: the conformance test asserts that Apache Pulsar still answers
`pulsar` and letterbox still answers `letterbox`, so a change on either side shows. Every entry
has its row in docs/compatibility.md ("Deliberate differences"), named by `anchor`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Deliberate:
    reason: str  # one line: what letterbox does better, as docs/compatibility.md says it
    anchor: str  # the row of docs/compatibility.md
    pulsar: Any
    letterbox: Any


# (client, scenario) -> the difference
def _second(counts: tuple[int, int, int]) -> list[dict[str, Any]]:
    return [{"data": d, "key": None, "redelivery_count": n} for d, n in zip(("m1", "m3", "m4"), counts, strict=True)]


DELIBERATE: dict[tuple[str, str], Deliberate] = {
    ("python", "unacked_come_back_to_next_consumer"): Deliberate(
        "a consumer that disconnects holding unacknowledged messages counts one attempt for the "
        "oldest one it held, so a message that kills its consumer still reaches the dead letter topic",
        "counts-deliveries-to-closed-consumers",
        pulsar={"first": ["m0", "m1", "m2", "m3", "m4"], "second": _second((0, 0, 0))},
        letterbox={"first": ["m0", "m1", "m2", "m3", "m4"], "second": _second((1, 0, 0))}),
    ("python", "connected_answer"): Deliberate(
        "letterbox advertises no optional protocol features: no topic-list watchers (pattern "
        "consumers poll for new topics), no partitioned-metadata lookups without auto-creation, "
        "no geo-replication",
        "connected-feature-flags",
        pulsar={"type": "CONNECTED", "protocol_version": 21, "max_message_size": 5242880,
                "feature_flags": ["supports_get_partitioned_metadata_without_auto_creation",
                                  "supports_repl_dedup_by_lid_and_eid", "supports_topic_watchers"]},
        letterbox={"type": "CONNECTED", "protocol_version": 21, "max_message_size": 5242880,
                   "feature_flags": []}),
    ("python", "watch_topic_list"): Deliberate(
        "a topic-list watcher is refused with NotAllowed, the answer of a Pulsar broker with "
        "enableBrokerSideSubscriptionPatternEvaluation=false; clients then poll",
        "connected-feature-flags",
        pulsar={"type": "WATCH_TOPIC_LIST_SUCCESS"},
        letterbox={"type": "ERROR", "error": "NotAllowedError"}),
}
