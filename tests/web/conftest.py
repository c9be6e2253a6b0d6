"""Fixtures of the web UI tests: one seeded site for the whole run (sitekit.py), one headless
Chromium, and `page`, a tab on the site that fails its test when the browser's console logged an
error (a SEVERE entry) that the test did not expect. When a test fails, the tails of the stack's
logs are added to its report, as in tests/service."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "service"))  # servicekit

from servicekit import PgCluster, missing_binaries, tail  # noqa: E402
from sitekit import Site  # noqa: E402
from webkit import Page, browser_missing, severe, start_chrome  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "console_allows(*patterns): console errors matching a pattern do not fail the test"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = missing_binaries()
    why = f"the service is not built yet: missing {', '.join(missing)} (make build)" if missing else None
    why = why or browser_missing()
    if not why:
        return
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    site = getattr(item, "funcargs", {}).get("site")
    if rep.failed and isinstance(site, Site):
        for path in site.log_files():
            if path.exists():
                rep.sections.append((f"log {path}", tail(path)))


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The seeded stack; its jobs wait for the first test that starts the worker."""
    cluster = PgCluster()
    cluster.start()
    s = None
    try:
        s = Site(cluster, tmp_path_factory.mktemp("web-stack"))
        yield s
    finally:
        if s is not None:
            s.close()
        cluster.close()


@pytest.fixture(scope="session")
def chrome() -> Iterator[Any]:
    driver = start_chrome()
    yield driver
    driver.quit()


@pytest.fixture()
def page(chrome: Any, site: Site, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A tab on the site. The test fails on console errors, but for those matching a pattern
    of its `console_allows` marker (e.g. the 403 a bad key is answered with)."""
    chrome.get("about:blank")  # leave the last test's page; its console entries are dropped
    p = Page(chrome, site.url)
    p.console()
    yield p
    marker = request.node.get_closest_marker("console_allows")
    allowed = list(marker.args) if marker else []
    entries = p.console()
    p.forget_key()
    errors = severe(entries, allowed)
    assert not errors, f"errors in the browser console: {errors}"
