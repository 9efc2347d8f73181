"""The console on a broker with token and basic authentication and authorization on: the sign-in view
appears, a refused token shows the broker's reason, the super user's token opens the dead letter
topic view and redrives through it, a namespace reader sees the dead letters but gets a readable
403 when it tries to redrive; credentials live in sessionStorage and Log out forgets them."""
from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pulsar
import pytest

from tests.conftest import BrokerProcess
from tests.console.browser import Browser
from tests.console.dead_letters import live_dead_letters, make_dead_letters
from tests.console.test_console_dead_letters import confirm, dlq_hash, open_page
from tests.security.conftest import SUPER_USER, Secured, secure_env

AUTH_KEY = "letterbox.console.auth"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    secret = os.urandom(32)
    home: Path = tmp_path_factory.mktemp("console-secured")
    htpasswd = home / ".htpasswd"
    htpasswd.write_text(f"alice:{bcrypt.hashpw(b'alice-pw', bcrypt.gensalt(5)).decode()}\n")
    env = {**secure_env(secret), "LETTERBOX_AUTHENTICATION_PROVIDERS": "token,basic",
           "LETTERBOX_BASIC_AUTH_CONF": str(htpasswd), "LETTERBOX_SUPER_USER_ROLES": f"{SUPER_USER},alice"}
    b = BrokerProcess(home / "data", env=env).start()
    yield Secured(b, secret)
    assert b.stop() == 0, b.log()


@pytest.fixture(scope="module")
def dlq(secured: Secured) -> str:
    token = secured.token(SUPER_USER)
    client = pulsar.Client(secured.broker.url, authentication=pulsar.AuthenticationToken(token),
                           operation_timeout_seconds=10,
                           logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"))
    try:
        topic = f"persistent://public/default/secure-{uuid.uuid4().hex[:6]}"
        name = make_dead_letters(client, secured.broker.admin_url, topic, "billing", nacked=4, terminated=1,
                                 token=token)
    finally:
        client.close()
    status, _ = secured.admin("POST", "/admin/v2/namespaces/public/default/permissions/reader", ["consume"])
    assert status == 204
    return name


def sign_in(page: Browser, token: str) -> None:
    page.one("#login-token").clear()
    page.one("#login-token").send_keys(token)
    page.one("#login-submit").click()


def stored(page: Browser) -> str | None:
    value = page.driver.execute_script(f"return sessionStorage.getItem('{AUTH_KEY}')")
    return None if value is None else str(value)


def test_sign_in_refused_token_then_super_user(page: Browser, secured: Secured, dlq: str) -> None:
    page.allowed_errors = ("status of 401",)  # type: ignore[attr-defined]
    broker = secured.broker
    open_page(page, broker, dlq_hash(dlq))
    page.one("#login-form")
    assert not page.css("#login-status .error"), "a first visit is no error"
    sign_in(page, "not-a-token")
    text = page.wait_text("#login-status .error", "401")
    assert "credentials refused" in text and "Authentication required" in text, text
    assert stored(page) is None
    forged = Secured(broker, b"another key, another signature!!").token(SUPER_USER)
    sign_in(page, forged)
    page.wait(lambda: "signature" in page.text_of("#login-status").lower(), what="the signature is refused")
    sign_in(page, secured.token(SUPER_USER))
    page.wait_text("#live-count", "5")  # back on the page asked for, with its data
    assert "Bearer " in (stored(page) or "")
    assert "signed in" in page.text_of("#who")
    from selenium.webdriver.support.ui import Select

    Select(page.one("#reason-filter")).select_by_value("terminated")
    page.wait_text("#list-count", "of 1")
    page.one("#redrive-filtered").click()
    confirm(page, "Redrive 1 message(s)")
    page.wait_text("#redrive-status", "finished: 1 moved")
    assert len(live_dead_letters(broker.admin_url, dlq, secured.token(SUPER_USER))) == 4
    page.one("#logout").click()
    page.one("#login-form")
    assert stored(page) is None


def test_reader_sees_dead_letters_and_a_readable_403(page: Browser, secured: Secured, dlq: str) -> None:
    page.allowed_errors = ("status of 401", "status of 403")  # type: ignore[attr-defined]
    open_page(page, secured.broker, "#/login")
    sign_in(page, secured.token("reader"))
    # the reader may not list tenants: the landing page says so and offers to open a namespace
    page.wait_text("#failing-limited", "needs a super user")
    page.one("#open-namespace").send_keys("public/default")
    page.one("#open-namespace").submit()
    page.one(f"tr[data-topic='{dlq}'] a.dlq-link").click()
    page.wait_text("#list-count", "of 4")
    page.one("#purge-filtered").click()
    text = page.wait_text("#action-errors .error", "Not allowed (403)")
    assert "reader" in text and "tenant public" in text, text
    assert len(live_dead_letters(secured.broker.admin_url, dlq, secured.token(SUPER_USER))) == 4
    # back on the landing page: what is failing in the namespace it opened; redrive tasks are not its to see
    page.driver.execute_script("location.hash = '#/'")
    row = page.one(f"#failing-dlqs tr.failing-dlq[data-topic='{dlq}']")
    assert row.find_element("css selector", "td.live").text == "4"
    assert "needs a tenant admin" in page.text_of("#no-redrives")
    assert "public/default" in page.text_of("#failing-limited")


def test_sign_in_with_user_and_password(page: Browser, secured: Secured, dlq: str) -> None:
    from selenium.webdriver.support.ui import Select

    page.allowed_errors = ("status of 401",)  # type: ignore[attr-defined]
    open_page(page, secured.broker, "#/login")
    Select(page.one("#login-kind")).select_by_value("basic")
    page.one("#login-user").send_keys("alice")
    page.one("#login-password").send_keys("wrong")
    page.one("#login-submit").click()
    text = page.wait_text("#login-status .error", "401")
    assert "credentials refused" in text, text
    page.one("#login-password").clear()
    page.one("#login-password").send_keys("alice-pw")
    page.one("#login-submit").click()
    page.one("#failing-dlqs")  # alice is a super user: what is failing in every namespace
    assert not page.css("#failing-limited")
    assert (stored(page) or "").count("Basic ") == 1
    assert "signed in (alice)" in page.text_of("#who")
    open_page(page, secured.broker, dlq_hash(dlq))  # a reload keeps the tab's credentials
    live = live_dead_letters(secured.broker.admin_url, dlq, secured.token(SUPER_USER))
    page.wait_text("#list-count", f"of {len(live)}")
