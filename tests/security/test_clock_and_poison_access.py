"""Who may read and move the broker's clock (super users only, even a tenant's admin
is refused) and read a subscription's poison suspects (consume on the topic), on a
broker with token authentication and authorization, with a manual clock."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.conftest import BrokerProcess
from tests.security.conftest import Secured, secure_env

SUSPECTS = "/admin/v2/persistent/acme/orders/t/subscription/s/letterbox/poison-suspects"


@pytest.fixture(scope="module")
def manual(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    secret = os.urandom(32)
    env = {**secure_env(secret), "LETTERBOX_CLOCK": "manual", "LETTERBOX_ALLOW_TEST_CLOCK": "1"}
    b = BrokerProcess(tmp_path_factory.mktemp("clock-secured") / "data", env=env).start()
    yield Secured(b, secret)
    assert b.stop() == 0, b.log()


def test_only_super_users_read_or_move_the_clock(manual: Secured) -> None:
    assert manual.admin("PUT", "/admin/v2/tenants/acme", {"adminRoles": ["acme-admin"]})[0] == 204
    status, state = manual.admin("GET", "/admin/v2/letterbox/clock")
    assert status == 200 and state["clock"] == "manual"
    for role in ("acme-admin", "nobody"):
        status, reply = manual.admin("POST", "/admin/v2/letterbox/clock/advance?ms=1000", role=role)
        assert status == 403 and "super user" in reply["reason"], (role, reply)
        assert manual.admin("GET", "/admin/v2/letterbox/clock", role=role)[0] == 403
    assert manual.admin("POST", "/admin/v2/letterbox/clock/advance?ms=1000", role=None)[0] == 401
    assert manual.admin("GET", "/admin/v2/letterbox/clock")[1]["nowMs"] == state["nowMs"], \
        "a refused advance moved the clock"
    status, moved = manual.admin("POST", "/admin/v2/letterbox/clock/advance?ms=1000")
    assert status == 200 and moved["nowMs"] == state["nowMs"] + 1000


def test_poison_suspects_need_consume_on_the_topic(manual: Secured) -> None:
    if manual.admin("GET", "/admin/v2/tenants/acme")[0] == 404:
        assert manual.admin("PUT", "/admin/v2/tenants/acme", {"adminRoles": ["acme-admin"]})[0] == 204
    assert manual.admin("PUT", "/admin/v2/namespaces/acme/orders")[0] == 204
    assert manual.admin("PUT", "/admin/v2/persistent/acme/orders/t")[0] == 204
    assert manual.admin("PUT", "/admin/v2/persistent/acme/orders/t/subscription/s")[0] == 204
    assert manual.admin("POST", "/admin/v2/namespaces/acme/orders/permissions/reader", ["consume"])[0] == 204
    assert manual.admin("POST", "/admin/v2/namespaces/acme/orders/permissions/writer", ["produce"])[0] == 204
    status, body = manual.admin("GET", SUSPECTS, role="reader")
    assert status == 200 and body["suspects"] == [], body
    status, reply = manual.admin("GET", SUSPECTS, role="writer")
    assert status == 403 and "writer" in reply["reason"]
