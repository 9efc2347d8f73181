"""Fixtures of the console's browser tests: one headless Chromium per module, a check of the page's
console log after every test, and a screenshot of the page when a test fails (its path is added to
the failure report)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.console.browser import Browser, missing_reason


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    b = Browser()
    yield b
    b.quit()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Browser]:
    """The module's browser; after the test, any JS error on the console fails it. A test that
    expects some failed loads (a refused token) lists their text in `browser.allowed_errors`."""
    browser.errors()  # drop what earlier tests left
    browser.allowed_errors = ()  # type: ignore[attr-defined]
    yield browser
    errors = browser.errors(allow=browser.allowed_errors)  # type: ignore[attr-defined]
    if errors:
        shot = screenshot_path(request.node, "console-errors")
        browser.screenshot(shot)
        raise AssertionError(f"errors on the browser console (screenshot: {shot}):\n" + "\n".join(errors))


SCREENSHOTS = "console-screenshots"


def screenshot_path(item: pytest.Item, when: str) -> Path:
    base = Path(item.config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    return base / SCREENSHOTS / f"{item.name}-{when}.png"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    browser = getattr(item, "funcargs", {}).get("page")
    if report.failed and isinstance(browser, Browser):
        path = screenshot_path(item, report.when)
        try:
            browser.screenshot(path)
            report.sections.append(("console screenshot", f"saved to {path}"))
        except Exception as exc:  # the browser itself may be what failed
            report.sections.append(("console screenshot", f"could not be saved: {exc}"))
