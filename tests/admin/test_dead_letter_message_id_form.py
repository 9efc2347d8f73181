"""`messageIds` in a redrive or purge body must be message ids as the listing gives them
(ledger:entry:partition:batchIndex): a malformed one is a mistake (400 naming it, nothing
moved or purged), not a silent "0 matched". Before, {"messageIds": ["12:7"]} (the short
form the attempts route accepts) or a client's "(12,7,-1,-1)" answered 200 and did nothing."""
from __future__ import annotations

import uuid

import pulsar

from tests.conftest import BrokerProcess
from tests.console.dead_letters import live_dead_letters, make_dead_letters, rest_path
from tests.security.http import call


def test_malformed_message_ids_are_refused_naming_them(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/idform-{uuid.uuid4().hex[:6]}"
    dlq = make_dead_letters(client, broker.admin_url, topic, "s", nacked=3, terminated=0)
    ids = [m["messageId"] for m in live_dead_letters(broker.admin_url, dlq)]
    ledger, entry = ids[0].split(":")[:2]
    base = rest_path(dlq) + "/letterbox"
    for bad in (f"{ledger}:{entry}", f"({ledger},{entry},-1,-1)", f"{ledger}:{entry}:-1:-1 ", "", "a:b:c:d",
                f"{ledger}:{entry}:-1:-1:0"):
        for op in ("redrive", "purge"):
            status, _, reply = call(broker.admin_url, "POST", f"{base}/{op}", {"messageIds": [ids[1], bad]})
            assert status == 400, (op, bad, status, reply)
            assert repr(bad) in reply["reason"] and "ledger:entry:partition:batchIndex" in reply["reason"], reply
    assert [m["messageId"] for m in live_dead_letters(broker.admin_url, dlq)] == ids  # nothing moved
    status, _, reply = call(broker.admin_url, "POST", f"{base}/purge", {"messageIds": [ids[1]]})
    assert (status, reply["purged"]) == (200, 1), reply
