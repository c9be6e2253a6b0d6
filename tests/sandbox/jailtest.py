"""Helpers and fixtures for the kforge-jail tests: the binary, its helpers, running the jail.

The session builds sandbox/ (a no-op when it is up to date), so the tests always run the
current jail and the helpers of tests/sandbox/helpers (attack, bomb).
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve()  # e.g. a sanitizer build
JAIL = BUILD / "kforge-jail"
HELPERS = BUILD / "sandbox-tests"
ATTACK = HELPERS / "attack"
BOMB = HELPERS / "bomb"
SETUP_EXIT = 125
PROFILES = ("build", "shell", "run")
TEST_USER = "kforge-jail-test"


@dataclass
class JailRun:
    rc: int
    out: str
    err: str
    report: dict[str, Any]

    def lines(self) -> list[str]:
        return self.out.splitlines()


@pytest.fixture(scope="session", autouse=True)
def built() -> None:
    # KFORGE_JAIL_PREBUILT=1: test a build made elsewhere (a GPU host without libseccomp-dev)
    if os.environ.get("KFORGE_JAIL_PREBUILT") != "1":
        subprocess.run(["make", "-s", "-C", str(ROOT / "sandbox"), f"BUILD={BUILD}"], check=True)
    assert JAIL.exists() and ATTACK.exists() and BOMB.exists()


def run_jail(
    workdir: Path,
    *cmd: str,
    profile: str = "shell",
    ro: Sequence[str | Path] = (),
    rw: Sequence[str | Path] = (),
    opts: Sequence[str] = (),
    user: str | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    report: Path | None = None,
) -> JailRun:
    """Runs kforge-jail (as user, through runuser, when given) and returns what it did."""
    report_dir = None
    if report is None:
        report_dir = tempfile.mkdtemp(prefix="kforge-report-")
        os.chmod(report_dir, 0o777)
        report = Path(report_dir) / "report.json"
    argv: list[str] = [str(JAIL), "--profile", profile, "--workdir", str(workdir)]
    argv += ["--ro", str(HELPERS)]
    for p in ro:
        argv += ["--ro", str(p)]
    for p in rw:
        argv += ["--rw", str(p)]
    argv += ["--report", str(report), *opts, "--", *cmd]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, env=env)
        text = report.read_text() if report.exists() else "{}"
        return JailRun(
            p.returncode,
            p.stdout.decode(errors="replace"),
            p.stderr.decode(errors="replace"),
            json.loads(text),
        )
    finally:
        if report_dir is not None:
            shutil.rmtree(report_dir, ignore_errors=True)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    """An empty workspace."""
    d = tmp_path / "ws"
    d.mkdir()
    return d


@pytest.fixture()
def outside() -> Iterator[Path]:
    """A directory outside any jail's view, readable by everyone (so that only the jail, and
    not file permissions, keeps a jailed user from it)."""
    d = Path(tempfile.mkdtemp(prefix="kforge-outside-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture()
def bombs_alone() -> Iterator[None]:
    """Holds a machine-wide lock for the test: tests that run the bomb helper take it, so that
    one test's check that no bomb outlived its jail (jail_processes) never sees the bombs of
    another test running at the same time in another pytest worker."""
    with open(os.path.join(tempfile.gettempdir(), "kforge-test-bombs.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def jail_processes(exe: Path) -> list[int]:
    """Host pids whose executable is exe (to prove a bomb left nothing behind)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "exe") == str(exe):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def unprivileged_user() -> str | None:
    """Creates (once) and returns an unprivileged test user, or None when that is impossible."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    try:
        pwd.getpwnam(TEST_USER)
        return TEST_USER
    except KeyError:
        pass
    if shutil.which("useradd") is None:
        return None
    r = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER],
        capture_output=True,
    )
    return TEST_USER if r.returncode == 0 else None


@pytest.fixture(scope="session")
def unpriv() -> str:
    """The unprivileged user; skips when there is none or user namespaces are refused to it."""
    user = unprivileged_user()
    if user is None:
        pytest.skip("needs root to create an unprivileged test user (useradd, runuser)")
    d = Path(tempfile.mkdtemp(prefix="kforge-unpriv-probe-"))
    try:
        info = pwd.getpwnam(user)
        os.chown(d, info.pw_uid, info.pw_gid)
        r = run_jail(d, "true", user=user)
        if r.rc == SETUP_EXIT and "clone" in r.err:
            pytest.skip(f"unprivileged user namespaces are not allowed here: {r.err.strip()}")
        assert r.rc == 0, r.err
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return user


def owned_dir(user: str, prefix: str) -> Path:
    """A new directory under /tmp owned by user."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    info = pwd.getpwnam(user)
    os.chown(d, info.pw_uid, info.pw_gid)
    os.chmod(d, 0o755)
    return d
