"""Fixtures of the console's browser tests: one headless Chromium per module, a check of the page's
console log after every test, a screenshot of the page when a test fails (its path is added to
the failure report), and `shot`: a screenshot of each view a test checks, kept as a test artifact
in $LETTERBOX_CONSOLE_SCREENSHOTS (default: console-screenshots/ under pytest's base temporary
directory), recorded as the test's `console screenshot` property (junit XML) and listed at the end
of the run."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
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
SCREENSHOTS_ENV = "LETTERBOX_CONSOLE_SCREENSHOTS"
SAVED = pytest.StashKey[list[Path]]()


def screenshots_dir(config: pytest.Config) -> Path:
    given = os.environ.get(SCREENSHOTS_ENV)
    if given:
        return Path(given).resolve()
    return Path(config._tmp_path_factory.getbasetemp()) / SCREENSHOTS  # type: ignore[attr-defined]


def screenshot_path(item: pytest.Item, when: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in item.name)
    return screenshots_dir(item.config) / f"{safe}-{when}.png"


@pytest.fixture
def shot(page: Browser, request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """shot("landing") saves the page as <dir>/<test>-landing.png, a real PNG, and records it."""

    def save(label: str) -> Path:
        path = browser_shot(page, screenshot_path(request.node, label))
        request.node.user_properties.append(("console screenshot", str(path)))
        request.config.stash.setdefault(SAVED, []).append(path)
        return path

    return save


def browser_shot(browser: Browser, path: Path) -> Path:
    browser.screenshot(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, f"{path} is not a real screenshot"
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    saved = config.stash.get(SAVED, [])
    if saved:
        terminalreporter.section(f"console screenshots: {len(saved)} in {saved[0].parent}")
        for path in saved:
            terminalreporter.line(str(path))


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
