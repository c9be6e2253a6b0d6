"""The browser side of the web UI tests: Debian's headless Chromium driven by Selenium, explicit
waits (never a fixed sleep), the console's messages, screenshots under tests/artifacts/, and the
number formats of web/js/format.js to compare what a page shows with what the API returned."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT_S = 30.0
NONE = "—"


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    for p in (CHROMIUM, CHROMEDRIVER):
        if not Path(p).exists():
            return f"{p} is not installed (apt-get install chromium chromium-driver)"
    return None


def start_chrome() -> WebDriver:
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1600", "--force-prefers-reduced-motion", "--lang=en-US"):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(WAIT_S)
    return driver


ROWS_JS = """
return [...document.querySelectorAll(arguments[0] + " tbody tr")].map((tr) => {
  const row = {};
  for (const td of tr.cells) {
    const m = /(?:^| )col-([a-z_]+)/.exec(td.className);
    if (!m) continue;
    row[m[1]] = td.innerText.trim();
    const a = td.querySelector("a[href]");
    if (a) row[m[1] + "_href"] = a.href;
  }
  return row;
});
"""


class Page:
    """One browser tab on the site at base: open, find, wait, read the console, screenshot."""

    def __init__(self, driver: WebDriver, base: str) -> None:
        self.d = driver
        self.base = base

    def open(self, path: str) -> None:
        self.d.get(self.base + path)

    def use_key(self, key: str) -> None:
        """Gives this tab an API key, as the submit page keeps one (web/js/api.js): its owner's
        private objects read with it."""
        self.d.get(self.base + "/")
        self.d.execute_script("sessionStorage.setItem('kforge.apiKey', arguments[0])", key)

    def forget_key(self) -> None:
        """Drops the tab's API key (the next test reads as a stranger)."""
        if self.d.current_url.startswith(self.base):
            self.d.execute_script("sessionStorage.clear()")

    @property
    def path(self) -> str:
        return self.d.execute_script("return location.pathname + location.search")

    def wait(self, cond: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        """Polls cond (a stale element counts as not yet) until it returns something truthy."""

        def attempt(_: WebDriver) -> Any:
            try:
                return cond()
            except StaleElementReferenceException:
                return None

        return WebDriverWait(self.d, timeout, poll_frequency=0.1).until(attempt, f"waited for {what}")

    def find(self, css: str, within: WebElement | None = None) -> WebElement:
        return (within or self.d).find_element(By.CSS_SELECTOR, css)

    def all(self, css: str, within: WebElement | None = None) -> list[WebElement]:
        return (within or self.d).find_elements(By.CSS_SELECTOR, css)

    def wait_for(self, css: str, what: str | None = None, timeout: float = WAIT_S) -> WebElement:
        return self.wait(lambda: next(iter(self.all(css)), None), what or css, timeout)

    def wait_text(self, css: str, text: str, timeout: float = WAIT_S) -> WebElement:
        """The first element matching css whose text contains text."""

        def got() -> WebElement | None:
            return next((e for e in self.all(css) if text in e.text), None)

        return self.wait(got, f"{css} to show {text!r}", timeout)

    def texts(self, css: str, within: WebElement | None = None) -> list[str]:
        return [e.text for e in self.all(css, within)]

    def rows(self, css: str) -> list[dict[str, str]]:
        """The rows of the table at css, read at once: {column: text} by each cell's col-NAME
        class, and {NAME_href: href} for a cell's first link."""
        return self.d.execute_script(ROWS_JS, css)

    def facts(self, css: str) -> dict[str, str]:
        """A fact list (<dl> of <div><dt><dd>) as {label: text}, once it is there."""
        return self.d.execute_script(
            "return Object.fromEntries([...arguments[0].querySelectorAll(':scope > div')]"
            ".map((d) => [d.querySelector('dt').innerText.trim(), d.querySelector('dd').innerText.trim()]))",
            self.wait_for(css),
        )

    def click(self, css: str) -> None:
        el = self.wait_for(css)
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
        el.click()

    def mark(self) -> None:
        """Marks the document: marked() stays true until the page is loaded again."""
        self.d.execute_script("window.__kforgeTestMark = true")

    def marked(self) -> bool:
        return bool(self.d.execute_script("return window.__kforgeTestMark === true"))

    def console(self) -> list[dict[str, Any]]:
        """The console's entries since the last call."""
        try:
            return self.d.get_log("browser")
        except WebDriverException:
            return []

    def shot(self, name: str) -> Path:
        """A screenshot of the whole page in tests/artifacts/web-NAME.png."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"web-{name}.png"
        height = self.d.execute_script("return Math.max(document.body.scrollHeight, 900)")
        self.d.set_window_size(1280, min(int(height) + 140, 6000))
        self.d.save_screenshot(str(path))
        self.d.set_window_size(1280, 1600)
        return path


def severe(entries: list[dict[str, Any]], allowed: list[str]) -> list[dict[str, Any]]:
    """The SEVERE entries whose message matches none of the allowed patterns."""
    return [
        e
        for e in entries
        if e.get("level") == "SEVERE" and not any(re.search(p, e.get("message", "")) for p in allowed)
    ]


# ---- the formats of web/js/format.js, checked against the API's numbers ------------------------

NUMBER = re.compile(r"[−-]?\d[\d,]*(?:\.\d+)?")


def shown_number(text: str) -> float:
    m = NUMBER.search(text)
    assert m, f"no number in {text!r}"
    return float(m.group(0).replace("−", "-").replace(",", ""))


def assert_speedup(text: str, value: float | None) -> None:
    """text shows value as format.js's speedup(): two decimals and ×, or the dash for none."""
    if value is None:
        assert text.strip() == NONE, text
        return
    assert re.fullmatch(r"\d+\.\d\d×", text.strip()), text
    assert math.isclose(shown_number(text), value, abs_tol=0.005 + 1e-9), (text, value)


def assert_percent(text: str, fraction: float | None) -> None:
    """text shows fraction as format.js's percent(): one decimal at most, then %."""
    if fraction is None:
        assert text.strip() == NONE, text
        return
    assert re.fullmatch(r"\d+(?:\.\d)?%", text.strip()), text
    assert math.isclose(shown_number(text), fraction * 100, abs_tol=0.05 + 1e-9), (text, fraction)


def assert_ms(text: str, value: float | None) -> None:
    """text shows milliseconds as format.js's ms(): "1.23 s", "30.2 ms", "456 µs"."""
    if value is None:
        assert text.strip() == NONE, text
        return
    m = re.fullmatch(r"(\d+)(?:\.(\d+))? (s|ms|µs)", text.strip())
    assert m, text
    scale = {"s": 1000.0, "ms": 1.0, "µs": 0.001}[m.group(3)]
    decimals = len(m.group(2) or "")
    shown = float(m.group(0).split(" ")[0]) * scale
    assert math.isclose(shown, value, abs_tol=0.5 * 10**-decimals * scale + 1e-9), (text, value)


def reward_text(r: int | None) -> str:
    if r is None:
        return NONE
    return f"−{-r}" if r < 0 else str(r)


def text_or_none(x: Any) -> str:
    return NONE if x is None or x == "" else str(x)
