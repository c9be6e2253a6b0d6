"""Resource bombs: each is stopped by its limit, the host is unharmed, and the report names the
limit that fired."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from jailtest import BOMB, PROFILES, jail_processes, run_jail


@pytest.fixture(autouse=True)
def _alone(bombs_alone: None) -> None:
    """Every test here runs a bomb and then checks that none survived (see bombs_alone)."""


def host_is_fine() -> None:
    assert jail_processes(BOMB) == [], "a bomb outlived its jail"
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


@pytest.mark.parametrize("profile", PROFILES)
def test_fork_bomb_stopped_by_pids(profile: str, ws: Path) -> None:
    r = run_jail(ws, str(BOMB), "fork", profile=profile, opts=["--pids", "64", "--time", "2"])
    if r.report["pids"] == "none":  # root, no delegated cgroup, a kernel before 6.14
        pytest.skip(f"no way to limit processes of host root here: {r.report['notes']}")
    assert r.report["limit"] == "pids", r.report
    assert r.report["signal"] == 9 and r.rc == 137
    assert r.report["pids"] in ("cgroup", "rlimit", "pid_max")
    host_is_fine()


@pytest.mark.parametrize("profile", PROFILES)
def test_memory_bomb_stopped_by_memory(profile: str, ws: Path) -> None:
    r = run_jail(ws, str(BOMB), "mem", profile=profile, opts=["--mem", "256", "--time", "30"])
    assert r.report["limit"] == "memory", r.report
    assert r.rc != 0
    assert r.report["memory"] in ("cgroup", "rlimit")
    assert r.report["maxrss_kib"] <= 300 * 1024  # it never got past its limit
    assert r.report["wall_ms"] < 30000  # stopped by memory, not by the clock
    host_is_fine()


@pytest.mark.parametrize("profile", PROFILES)
def test_disk_filler_stopped_by_fsize(profile: str, ws: Path) -> None:
    r = run_jail(ws, str(BOMB), "disk", "big.bin", profile=profile, opts=["--fsize", "16"])
    assert r.report["limit"] == "fsize", r.report
    assert r.report["signal"] == 25 and r.rc == 128 + 25  # SIGXFSZ
    assert (ws / "big.bin").stat().st_size <= 16 << 20
    host_is_fine()


@pytest.mark.parametrize("profile", PROFILES)
def test_tmp_filler_stopped_by_the_tmpfs_size(profile: str, ws: Path) -> None:
    r = run_jail(ws, str(BOMB), "disk", "/tmp/big.bin", profile=profile, opts=["--tmp-size", "8"])
    assert r.rc == 4 and "No space left on device" in r.err, (r.rc, r.err)
    assert r.report["limit"] is None  # a full tmpfs is an error, not a kill
    host_is_fine()


@pytest.mark.parametrize("profile", PROFILES)
def test_infinite_loop_stopped_by_the_wall_clock(profile: str, ws: Path) -> None:
    t0 = time.monotonic()
    r = run_jail(ws, str(BOMB), "spin", profile=profile, opts=["--time", "1"])
    elapsed = time.monotonic() - t0
    assert r.report["limit"] == "time", r.report
    assert r.rc == 137 and r.report["signal"] == 9
    assert 1000 <= r.report["wall_ms"] < 3000
    assert elapsed < 5
    host_is_fine()


@pytest.mark.parametrize("profile", PROFILES)
def test_infinite_loop_stopped_by_cpu_time(profile: str, ws: Path) -> None:
    r = run_jail(ws, str(BOMB), "spin", profile=profile, opts=["--cpu", "1", "--time", "20"])
    assert r.report["limit"] == "cpu", r.report
    assert r.report["signal"] in (24, 9)  # SIGXCPU at the soft limit, SIGKILL at the hard one
    assert r.report["wall_ms"] < 10000
    host_is_fine()


@pytest.mark.parametrize("profile", PROFILES)
def test_output_flood_stopped_by_the_output_limit(profile: str, ws: Path) -> None:
    r = run_jail(ws, str(BOMB), "flood", profile=profile, opts=["--output-limit", "64"])
    assert r.report["limit"] == "output", r.report
    assert r.report["truncated"] is True
    assert len(r.out) == 64 * 1024  # captured up to the limit, exactly
    assert r.err == ""  # and the jail printed nothing of its own
    host_is_fine()


def test_background_processes_die_with_the_command(ws: Path) -> None:
    r = run_jail(ws, str(BOMB), "background")
    assert r.rc == 0 and r.report["limit"] is None
    time.sleep(0.1)
    host_is_fine()


def test_the_wall_clock_kills_the_whole_tree(ws: Path) -> None:
    script = f"{BOMB} spin & {BOMB} spin & sleep 100"
    r = run_jail(ws, "sh", "-c", script, opts=["--time", "1"])
    assert r.report["limit"] == "time"
    host_is_fine()


def test_the_command_is_not_blocked_by_a_slow_reader(ws: Path) -> None:
    # 8 MiB through the pipes, more than any pipe buffer: the supervisor keeps reading
    r = run_jail(ws, "sh", "-c", "head -c 8388608 /dev/zero | tr '\\0' x", opts=["--output-limit", "16384"])
    assert r.rc == 0 and r.report["limit"] is None
    assert len(r.out) == 8 << 20
