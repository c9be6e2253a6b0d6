"""Fixtures of the service tests: real PostgreSQL, Redis, kforge-server, kforge-worker.

One PostgreSQL cluster serves the session; each test module gets its own database, Redis and
server (`stack`), so a module's leftover jobs never reach another module's workers. Tests keep
apart inside a module by unique data (each task source carries a fresh UUID comment). Workers
are started per test (`workers`) and stopped when it ends. When a test fails, the tails of the
stack's logs (server, workers, Redis, PostgreSQL) are added to its report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from servicekit import PgCluster, Process, Stack, missing_binaries, tail

HERE = Path(__file__).parent
# Tests that need nothing but files (the OpenAPI document against the registry).
STATIC = {"test_spec_is_valid", "test_error_names_match_registry", "test_contract_routes_in_spec"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = missing_binaries()
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"the service is not built yet: missing {', '.join(missing)} (make build)")
    for item in items:
        if HERE in Path(str(item.path)).parents and item.originalname not in STATIC:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    seen: set[Path] = set()
    for value in getattr(item, "funcargs", {}).values():
        for obj in value if isinstance(value, (list, tuple)) else [value]:
            for path in getattr(obj, "log_files", lambda: [])():
                if path not in seen and path.exists():
                    seen.add(path)
                    rep.sections.append((f"log {path}", tail(path)))


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The session's PostgreSQL: each stack creates its own database in it."""
    c = PgCluster()
    c.start()
    yield c
    c.close()


@pytest.fixture(scope="module")
def stack(pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """This module's database, Redis, API key and server (rate limit off, the LIMITS of servicekit)."""
    s = Stack(pg_cluster, tmp_path_factory.mktemp("stack"))
    yield s
    s.close()


@pytest.fixture()
def workers(stack: Stack) -> Iterator[Callable[..., Process]]:
    """start(**settings) starts a cpu worker on the module's stack; all stop when the test ends."""
    started: list[Process] = []

    def start(**settings: Any) -> Process:
        w = stack.worker(**settings)
        started.append(w)
        return w

    start.log_files = lambda: [w.log for w in started]  # type: ignore[attr-defined]
    yield start
    for w in started:
        w.stop(timeout=20)
