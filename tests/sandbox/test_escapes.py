"""Escape attempts from each profile: each fails, and the test proves it from the outside."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jailtest import ATTACK, PROFILES, JailRun, run_jail

DENIED = {"EPERM", "EACCES", "ENOSYS", "EROFS", "ENOENT", "ESRCH", "ECONNREFUSED", "ENODATA"}


def assert_blocked(r: JailRun, allowed_errnos: set[str] = DENIED) -> None:
    assert r.report.get("error") is None, r.report
    lines = r.lines()
    assert lines and lines[-1] == "BLOCKED", r.out + r.err
    assert r.rc == 0, (r.rc, r.out, r.err)
    for line in lines[:-1]:
        what, _, errno_name = line.rpartition(": ")
        if what == "" or line.startswith("content"):
            continue
        assert errno_name in allowed_errnos, line


@pytest.fixture()
def victim(outside: Path):
    """A process outside every jail that writes down any signal it gets and holds a secret in
    memory; yields (process, address of the secret, flag file)."""
    flag = outside / "signalled"
    code = (
        "import ctypes, signal, sys, time\n"
        f"flag = {str(flag)!r}\n"
        "def h(n, f):\n"
        "    open(flag, 'a').write(str(n) + '\\n')\n"
        "for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, h)\n"
        "buf = ctypes.create_string_buffer(b'KFORGE-MEMORY-SECRET-0123456789')\n"
        "print(ctypes.addressof(buf), flush=True)\n"
        "time.sleep(120)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    addr = int(p.stdout.readline())
    yield p, addr, flag
    p.kill()
    p.wait()


@pytest.mark.parametrize("profile", PROFILES)
def test_connect_to_a_loopback_port_opened_outside(profile: str, ws: Path) -> None:
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.settimeout(0.3)
    port = tcp.getsockname()[1]
    abstract = f"kforge-jail-test-{os.getpid()}-{profile}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract)
    unix.listen(8)
    unix.settimeout(0.3)
    try:
        assert_blocked(run_jail(ws, str(ATTACK), "connect", "127.0.0.1", str(port), profile=profile))
        assert_blocked(run_jail(ws, str(ATTACK), "abstract", abstract, profile=profile))
        for listener in (tcp, unix):  # proof: nothing ever arrived
            with pytest.raises(socket.timeout):
                listener.accept()
    finally:
        tcp.close()
        unix.close()


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("family", [17, 40, 38, 9])  # AF_PACKET, AF_VSOCK, AF_ALG, AF_X25
def test_socket_families_outside_the_namespace_are_refused(profile: str, family: int, ws: Path) -> None:
    assert_blocked(run_jail(ws, str(ATTACK), "socket", str(family), profile=profile), {"EPERM"})


@pytest.mark.parametrize("profile", PROFILES)
def test_read_a_file_outside_the_view(profile: str, ws: Path, outside: Path) -> None:
    secret = outside / "secret.txt"
    secret.write_text("KFORGE-FILE-SECRET\n")
    secret.chmod(0o644)
    targets = [str(secret), "/etc/shadow", str(Path(__file__).resolve()), "/root/.bashrc"]
    r = run_jail(ws, str(ATTACK), "read", *targets, profile=profile)
    assert_blocked(r)
    assert "KFORGE-FILE-SECRET" not in r.out + r.err
    assert secret.read_text() == "KFORGE-FILE-SECRET\n"  # it was there all along


@pytest.mark.parametrize("profile", PROFILES)
def test_write_outside_the_workspace(profile: str, ws: Path, outside: Path, tmp_path: Path) -> None:
    ro = tmp_path / "readonly"
    ro.mkdir()
    (ro / "keep.txt").write_text("original\n")
    targets = [
        str(outside / "escape.txt"),
        str(ro / "keep.txt"),
        str(ro / "new.txt"),
        "/usr/kforge-escape",
        "/etc/kforge-escape",
        "/kforge-escape",
        "/proc/sys/kernel/hostname",
        "/sys/kernel/kforge-escape",
    ]
    r = run_jail(ws, str(ATTACK), "write", *targets, profile=profile, ro=[ro])
    assert_blocked(r)
    assert not (outside / "escape.txt").exists()
    assert (ro / "keep.txt").read_text() == "original\n"
    assert not (ro / "new.txt").exists()
    for p in ("/usr/kforge-escape", "/etc/kforge-escape", "/kforge-escape"):
        assert not Path(p).exists()
    # the workspace's parent exists inside only as an empty tmpfs directory: writing there
    # works but reaches nothing outside
    sibling = ws.parent / "sibling.txt"
    r = run_jail(ws, "sh", "-c", f"echo x > {sibling}; echo x > ok.txt", profile=profile)
    assert r.rc == 0, r.err
    assert not sibling.exists()
    assert (ws / "ok.txt").read_text() == "x\n"


@pytest.mark.parametrize("profile", PROFILES)
def test_signal_a_process_outside(profile: str, ws: Path, victim) -> None:
    p, _, flag = victim
    assert_blocked(run_jail(ws, str(ATTACK), "kill", str(p.pid), profile=profile))
    # kill -1 reaches every process the jail can see: none outside
    r = run_jail(ws, "sh", "-c", "kill -TERM -1; kill -USR1 -1; true", profile=profile)
    assert r.report.get("error") is None
    time.sleep(0.2)
    assert p.poll() is None
    assert not flag.exists()


@pytest.mark.parametrize("profile", PROFILES)
def test_ptrace_a_process_outside(profile: str, ws: Path, victim) -> None:
    p, _, _ = victim
    assert_blocked(run_jail(ws, str(ATTACK), "ptrace", str(p.pid), profile=profile))
    status = Path(f"/proc/{p.pid}/status").read_text()
    assert "TracerPid:\t0" in status
    assert p.poll() is None


@pytest.mark.parametrize("profile", PROFILES)
def test_read_another_process_memory(profile: str, ws: Path, victim) -> None:
    p, addr, _ = victim
    r = run_jail(ws, str(ATTACK), "memory", str(p.pid), hex(addr), profile=profile)
    assert_blocked(r)
    assert "KFORGE-MEMORY-SECRET" not in r.out


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    "attack", ["mount", "unshare", "setns", "bpf", "io_uring", "userfaultfd", "perf", "keyctl"]
)
def test_privileged_syscalls_are_refused(profile: str, attack: str, ws: Path) -> None:
    r = run_jail(ws, str(ATTACK), attack, profile=profile)
    # refused by the jail (EPERM; clone3 says ENOSYS so that glibc falls back to clone),
    # not merely missing: /dev/userfaultfd is absent from the view
    assert_blocked(r, {"EPERM", "ENOSYS", "ENOENT"} if attack == "userfaultfd" else {"EPERM", "ENOSYS"})


@pytest.mark.parametrize("profile", PROFILES)
def test_setuid_binaries_give_nothing(profile: str, ws: Path) -> None:
    for owner in (0, 65534):
        suid = ws / f"suid-{owner}"
        shutil.copy(ATTACK, suid)
        if os.geteuid() == 0:
            os.chown(suid, owner, owner)
        suid.chmod(0o6755)
        r = run_jail(ws, f"./{suid.name}", "ids", profile=profile)
        assert r.rc == 0, r.err
        assert "uid=1000 euid=1000 gid=1000 egid=1000" in r.out, r.out
        assert "CapEff:\t0000000000000000" in r.out
        assert "CapPrm:\t0000000000000000" in r.out
        assert "CapBnd:\t0000000000000000" in r.out
        assert "NoNewPrivs:\t1" in r.out
        assert "cwd_nosuid=1" in r.out
    # the host's own setuid programs (mount, su) are as powerless
    r = run_jail(ws, "sh", "-c", "mount -t tmpfs none /tmp; echo rc=$?", profile=profile)
    assert "rc=0" not in r.out


@pytest.mark.parametrize("profile", PROFILES)
def test_no_setuid_file_is_left_for_the_host(profile: str, ws: Path) -> None:
    # run as host root, a set-user-ID file in the workspace would be root's on the host
    r = run_jail(ws, str(ATTACK), "suid", str(ws), profile=profile)
    assert_blocked(r, {"EPERM", "ENOSYS"})
    r = run_jail(
        ws, "sh", "-c", "cp /bin/true t && chmod 4755 t; chmod g+s .; install -m 6755 t u", profile=profile
    )
    for p in [ws, *ws.rglob("*")]:
        assert not p.lstat().st_mode & 0o6000, f"{p} has mode {oct(p.lstat().st_mode)}"
