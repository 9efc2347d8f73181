"""Headless Debian Chromium driven by selenium for the console tests: start it, read its console
log (JS errors fail the test), wait for elements, save screenshots."""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# without the background-networking flags this machine refuses Chromium's connections
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000")


def missing_reason() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            return (f"{path} is missing: install Debian's chromium and chromium-driver "
                    "(`make test` does: apt-get install chromium chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -e '.[dev]'"
    return None


class Browser:
    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="console-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self.profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(30)

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    def errors(self, allow: tuple[str, ...] = ()) -> list[str]:
        """SEVERE entries of the page's console since the last call: JS errors, console.error
        and failed loads; entries containing one of `allow` (e.g. an expected 401) pass."""
        out = []
        for entry in self.driver.get_log("browser"):
            if entry.get("level") != "SEVERE":
                continue
            message = str(entry.get("message", ""))
            if any(a in message for a in allow):
                continue
            out.append(f"[{entry.get('source')}] {message}")
        return out

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(path))
        return path

    def wait(self, predicate: Any, timeout: float = 15.0, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                value = predicate()
                if value:
                    return value
            except Exception as exc:  # stale elements while the page re-renders
                last = exc
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}" + (f" (last error: {last})" if last else ""))

    def css(self, selector: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector: str, timeout: float = 15.0) -> Any:
        return self.wait(lambda: (self.css(selector) or [None])[0], timeout, f"element {selector}")

    def text_of(self, selector: str) -> str:
        return str(self.one(selector).text)

    def wait_text(self, selector: str, needle: str, timeout: float = 15.0) -> str:
        return str(self.wait(lambda: needle in self.one(selector).text and self.one(selector).text,
                             timeout, f"{needle!r} in {selector}"))
