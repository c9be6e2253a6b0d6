"""The jail run by an unprivileged user (through runuser): the same view, the same refusals, and
limits that hold without root (RLIMIT_NPROC counts in the jail's user namespace)."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from jailtest import ATTACK, BOMB, PROFILES, jail_processes, owned_dir, run_jail


@pytest.fixture()
def uws(unpriv: str) -> Iterator[Path]:
    d = owned_dir(unpriv, "kforge-unpriv-ws-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("profile", PROFILES)
def test_identity_and_capabilities(profile: str, unpriv: str, uws: Path) -> None:
    r = run_jail(uws, str(ATTACK), "ids", profile=profile, user=unpriv)
    assert r.rc == 0, r.err
    assert "uid=1000 euid=1000" in r.out and "CapEff:\t0000000000000000" in r.out
    assert "NoNewPrivs:\t1" in r.out


def test_a_secret_the_user_could_read_outside_is_absent_inside(unpriv: str, uws: Path, outside: Path) -> None:
    secret = outside / "secret.txt"
    secret.write_text("KFORGE-UNPRIV-SECRET\n")
    secret.chmod(0o644)
    # outside the jail, this user can read it: only the jail keeps it away
    plain = subprocess.run(
        ["runuser", "-u", unpriv, "--", "cat", str(secret)], capture_output=True, text=True
    )
    assert "KFORGE-UNPRIV-SECRET" in plain.stdout
    r = run_jail(uws, str(ATTACK), "read", str(secret), user=unpriv)
    assert r.lines()[-1] == "BLOCKED" and "KFORGE-UNPRIV-SECRET" not in r.out


def test_loopback_and_writes_outside(unpriv: str, uws: Path, outside: Path) -> None:
    outside.chmod(0o777)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.settimeout(0.3)
    try:
        r = run_jail(uws, str(ATTACK), "connect", "127.0.0.1", str(tcp.getsockname()[1]), user=unpriv)
        assert r.lines()[-1] == "BLOCKED"
        with pytest.raises(socket.timeout):
            tcp.accept()
    finally:
        tcp.close()
    r = run_jail(uws, str(ATTACK), "write", str(outside / "x"), "/usr/x", user=unpriv)
    assert r.lines()[-1] == "BLOCKED" and not (outside / "x").exists()


@pytest.mark.parametrize("attack", ["mount", "unshare", "setns", "bpf", "io_uring", "perf", "keyctl"])
def test_privileged_syscalls(attack: str, unpriv: str, uws: Path) -> None:
    r = run_jail(uws, str(ATTACK), attack, user=unpriv)
    assert r.lines()[-1] == "BLOCKED", r.out + r.err


@pytest.mark.usefixtures("bombs_alone")
def test_fork_bomb_stopped_by_rlimit_nproc(unpriv: str, uws: Path) -> None:
    r = run_jail(uws, str(BOMB), "fork", user=unpriv, opts=["--pids", "32", "--time", "2"])
    assert r.report["limit"] == "pids", r.report
    assert r.report["pids"] in ("cgroup", "rlimit")
    assert jail_processes(BOMB) == []


@pytest.mark.usefixtures("bombs_alone")
def test_memory_bomb_and_output_flood(unpriv: str, uws: Path) -> None:
    r = run_jail(uws, str(BOMB), "mem", user=unpriv, opts=["--mem", "128"])
    assert r.report["limit"] == "memory", r.report
    r = run_jail(uws, str(BOMB), "flood", user=unpriv, opts=["--output-limit", "32"])
    assert r.report["limit"] == "output" and len(r.out) == 32 * 1024


def test_gxx_builds_as_the_user(unpriv: str, uws: Path) -> None:
    src = uws / "k.cpp"
    src.write_text('extern "C" int add(int a, int b) { return a + b; }\n')
    shutil.chown(src, unpriv, unpriv)
    r = run_jail(uws, "g++", "-shared", "-fPIC", "-o", "libk.so", "k.cpp", profile="build", user=unpriv)
    assert r.rc == 0, r.err
    assert (uws / "libk.so").stat().st_uid == Path(uws).stat().st_uid
