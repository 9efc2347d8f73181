"""An unknown reason filter is refused by the listing, redrive and purge routes with 400 and the
list of valid reasons (the list the CLI's --reason takes), and nothing moves."""
from __future__ import annotations

import json

import pytest

from letterbox.message_properties import DEAD_LETTER_REASONS
from tests.admin.helpers import call
from tests.admin.test_redrive_mistakes import NS, P, T, _live, _produce
from tests.conftest import BrokerProcess, wait_until


@pytest.fixture(scope="module")
def dlq(broker: BrokerProcess) -> str:
    """rs-s-DLQ with 5 expired dead letters."""
    base = broker.admin_url
    assert call(base, "POST", NS + "/letterbox/deadLetterPolicy", '{"maxRedeliverCount": 5}')[0] == 204
    assert call(base, "PUT", P + "/rs")[0] == 204
    assert call(base, "PUT", P + "/rs/subscription/s", '{"ledgerId": -1, "entryId": -1}')[0] == 204
    _produce(broker.url, T + "rs", 5)
    assert call(base, "POST", P + "/rs/subscription/s/expireMessages/0")[0] == 204
    assert wait_until(lambda: _live(base, "rs-s-DLQ") == 5, 30)
    return "rs-s-DLQ"


@pytest.mark.parametrize("route", ["redrive", "purge"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_unknown_reason_in_a_body_is_400_naming_the_valid_ones(broker: BrokerProcess, dlq: str, route: str,
                                                                dry_run: bool) -> None:
    body = json.dumps({"reason": "max-redelivery", "dryRun": dry_run})
    status, err = call(broker.admin_url, "POST", f"{P}/{dlq}/letterbox/{route}", body)
    assert status == 400, (status, err)
    assert "max-redelivery" in err["reason"] and all(r in err["reason"] for r in DEAD_LETTER_REASONS), err
    assert _live(broker.admin_url, dlq) == 5


def test_unknown_reason_in_the_listing_is_400_and_a_known_one_filters(broker: BrokerProcess, dlq: str) -> None:
    status, err = call(broker.admin_url, "GET", f"{P}/{dlq}/letterbox/deadLetters?reason=expird")
    assert status == 400 and "expird" in err["reason"] and "expired" in err["reason"], err
    status, listed = call(broker.admin_url, "GET", f"{P}/{dlq}/letterbox/deadLetters?reason=expired")
    assert status == 200 and len(listed) == 5
    status, listed = call(broker.admin_url, "GET", f"{P}/{dlq}/letterbox/deadLetters?reason=terminated")
    assert status == 200 and listed == []
