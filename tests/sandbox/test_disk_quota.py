"""The disk quota (--disk, --disk-files): the supervisor walks the writable paths and kills a
command that makes them hold more than the quota, with limit "disk" in the report and one
line on kforge-jail's stderr; what is not on the host's disk through those paths (a sparse
file's holes, a symlink's target, the jail's /tmp) does not count."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from jailtest import JAIL, PROFILES, SETUP_EXIT, owned_dir, run_jail

QUOTA_MIB = 32
# Past the quota a writer adds its write rate x (10 ms + twice the walk's time) before the kill
# (sandbox/README.md, Disk quota): a few MiB here for a workdir of one file; the margin is for
# a loaded CI machine.
OVERSHOOT_MIB = 128
LINE = "kforge-jail: limit disk: the writable paths held more than"


def held(d: Path) -> int:
    """Bytes allocated under d, as the quota counts them (symlinks not followed)."""
    total = 0
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def python(script: str) -> list[str]:
    return ["python3", "-c", script]


@pytest.mark.parametrize("profile", PROFILES)
def test_a_fast_writer_is_killed_past_the_quota(profile: str, ws: Path) -> None:
    # 512 MiB from /dev/zero as fast as dd goes (--fsize above it: only the quota can stop it)
    cmd = ["dd", "if=/dev/zero", "of=big", "bs=1M", "count=512", "status=none"]
    r = run_jail(ws, *cmd, profile=profile, opts=["--disk", str(QUOTA_MIB), "--fsize", "1024"])
    assert r.report["limit"] == "disk", r.report
    assert r.rc == 137 and r.report["signal"] == 9
    assert r.err.splitlines()[-1] == f"{LINE} {QUOTA_MIB} MiB", r.err
    assert r.report["disk_kib"] > QUOTA_MIB * 1024
    assert held(ws) < (QUOTA_MIB + OVERSHOOT_MIB) << 20, held(ws) >> 20


def test_many_small_files_are_killed_past_disk_files(ws: Path) -> None:
    # --disk-files alone: a quota on entries only
    script = "for i in range(200000):\n    open(f'f{i}', 'w').close()\nprint('all made')"
    r = run_jail(ws, *python(script), opts=["--disk-files", "500"])
    assert r.report["limit"] == "disk", r.report
    assert r.rc == 137 and "all made" not in r.out
    assert r.err.splitlines()[-1] == f"{LINE} 500 entries", r.err
    assert r.report["disk_files"] > 500
    assert len(os.listdir(ws)) < 500 + 50000


def test_a_sparse_file_larger_than_the_quota_is_not_killed(ws: Path) -> None:
    script = "import time\nwith open('sparse', 'wb') as f:\n    f.truncate(512 << 20)\ntime.sleep(0.3)"
    r = run_jail(ws, *python(script), opts=["--disk", "16", "--fsize", "1024"])
    assert (r.rc, r.report["limit"]) == (0, None), (r.report, r.err)
    assert (ws / "sparse").stat().st_size == 512 << 20
    assert r.report["disk_kib"] < 16 * 1024 and r.report["disk_files"] == 1
    assert "kforge-jail" not in r.err


def test_a_command_under_the_quota_exits_normally(ws: Path) -> None:
    cmd = "dd if=/dev/zero of=data bs=1M count=4 status=none && sleep 0.3 && echo done"
    r = run_jail(ws, "sh", "-c", cmd, opts=["--disk", "16"])
    assert (r.rc, r.report["limit"], r.out, r.err) == (0, None, "done\n", ""), r.report
    assert 4 * 1024 <= r.report["disk_kib"] < 16 * 1024
    assert r.report["disk_files"] == 1


def test_without_a_quota_nothing_is_measured(ws: Path) -> None:
    r = run_jail(ws, "true")
    assert r.rc == 0 and r.report["disk_kib"] is None and r.report["disk_files"] is None


def test_symlinks_to_big_host_files_are_not_followed(ws: Path, outside: Path) -> None:
    with open(outside / "big", "wb") as f:
        f.write(b"\1" * (64 << 20))
    (ws / "file-link").symlink_to(outside / "big")
    (ws / "dir-link").symlink_to(outside)
    r = run_jail(ws, "sleep", "0.3", opts=["--disk", "16"])
    assert (r.rc, r.report["limit"]) == (0, None), (r.report, r.err)
    assert r.report["disk_kib"] < 1024 and r.report["disk_files"] == 2


def test_the_jails_tmp_is_not_counted(ws: Path) -> None:
    cmd = "dd if=/dev/zero of=/tmp/x bs=1M count=64 status=none && sleep 0.3"
    r = run_jail(ws, "sh", "-c", cmd, opts=["--disk", "16", "--tmp-size", "128"])
    assert (r.rc, r.report["limit"]) == (0, None), (r.report, r.err)


def test_what_was_there_before_counts(ws: Path) -> None:
    """A folder holding 8 MiB under a 16 MiB quota has 8 MiB of room, not 16."""
    with open(ws / "old", "wb") as f:
        f.write(b"\1" * (8 << 20))
    r = run_jail(
        ws,
        *python("open('new', 'wb').write(b'\\2' * (12 << 20)); import time; time.sleep(3)"),
        opts=["--disk", "16"],
    )
    assert r.report["limit"] == "disk" and r.rc == 137, r.report
    assert r.err.splitlines()[-1] == f"{LINE} 16 MiB", r.err


def test_a_folder_already_over_may_shrink_but_not_grow(ws: Path) -> None:
    """A workspace left over its quota (a command killed for it overshoots) is not a dead end:
    the next command may clean it up, but not add to it."""
    with open(ws / "old", "wb") as f:
        f.write(b"\1" * (24 << 20))
    r = run_jail(ws, "sh", "-c", "rm old && echo cleaned", opts=["--disk", "16"])
    assert r.rc == 0 and r.report["limit"] is None and "cleaned" in r.out, (r.report, r.err)
    with open(ws / "old", "wb") as f:
        f.write(b"\1" * (24 << 20))
    r = run_jail(
        ws,
        *python("open('more', 'wb').write(b'\\2' * (8 << 20)); import time; time.sleep(3)"),
        opts=["--disk", "16"],
    )
    assert r.report["limit"] == "disk" and r.rc == 137, r.report


def test_an_rw_path_counts_too(ws: Path, tmp_path: Path) -> None:
    rw = tmp_path / "rw"
    rw.mkdir()
    cmd = f"dd if=/dev/zero of={rw}/big bs=1M count=256 status=none"
    r = run_jail(ws, "sh", "-c", cmd, rw=[rw], opts=["--disk", "16"])
    assert r.report["limit"] == "disk" and r.rc == 137, r.report
    assert held(rw) < (16 + OVERSHOOT_MIB) << 20


@pytest.mark.parametrize("how", ["unlinked", "tmpfile", "mapped"])
def test_unlinked_files_the_command_still_holds_count(how: str, ws: Path) -> None:
    """Written, then unlinked (or made nameless with O_TMPFILE, or only mapped): no walk sees
    them, but they hold the disk until the jail ends."""
    if os.geteuid() != 0:
        pytest.skip("following the jail's descriptors and mappings needs root")
    script = f"""
import mmap, os, time
how, size = {how!r}, 64 << 20
if how == "tmpfile":
    fd = os.open(".", os.O_RDWR | os.O_TMPFILE, 0o600)
else:
    fd = os.open("x", os.O_RDWR | os.O_CREAT, 0o600)
    os.unlink("x")
if how == "mapped":
    os.ftruncate(fd, size)
    m = mmap.mmap(fd, size)
    os.close(fd)
    for i in range(0, size, 1 << 20):
        m[i : i + (1 << 20)] = b"\\1" * (1 << 20)
else:
    for i in range(64):
        os.write(fd, b"\\1" * (1 << 20))
time.sleep(2)
print("survived")
"""
    r = run_jail(ws, *python(script), opts=["--disk", "16"])
    assert r.report["limit"] == "disk" and r.rc == 137, (r.report, r.err)
    assert "survived" not in r.out
    assert os.listdir(ws) == []


def test_a_command_that_ends_over_its_quota_is_reported(ws: Path) -> None:
    """It may end before a walk catches it: the walk after the end does, and the exit status
    stays the command's own."""
    cmd = "dd if=/dev/zero of=big bs=1M count=48 status=none"
    r = run_jail(ws, "sh", "-c", cmd, opts=["--disk", "16"])
    assert r.report["limit"] == "disk", r.report
    assert r.rc in (0, 137)
    assert r.err.splitlines()[-1] == f"{LINE} 16 MiB", r.err


def test_inotify_is_refused_under_a_quota(ws: Path) -> None:
    """With inotify a command would see the walk open its directories, and move what it wrote
    behind it."""
    script = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.inotify_init1(0)\n"
        "print('ok' if fd >= 0 else os.strerror(ctypes.get_errno()))"
    )
    assert run_jail(ws, *python(script)).out == "ok\n"
    r = run_jail(ws, *python(script), opts=["--disk", "16"])
    assert r.rc == 0 and r.out == os.strerror(errno.ENOSYS) + "\n", (r.out, r.err)


def test_a_tree_too_deep_to_walk_counts_as_over(ws: Path) -> None:
    r = run_jail(ws, "sh", "-c", "mkdir -p $(printf 'd/%.0s' $(seq 130)) && sleep 2", opts=["--disk", "16"])
    assert r.report["limit"] == "disk" and r.rc == 137, r.report
    assert r.err.splitlines()[-1].startswith(
        "kforge-jail: limit disk: the writable paths could not be measured"
    )
    assert "could not be read" in r.report["notes"]


@pytest.mark.parametrize(
    "script",
    [
        "mkdir -p a/b && chmod 000 a && sleep 2",  # neither listed nor searched
        "mkdir a && exec 3>a/f && chmod 400 a && echo x >&3 && sleep 2",  # listed, not searched
    ],
)
def test_a_directory_hidden_from_the_supervisor_counts_as_over(script: str, unpriv: str) -> None:
    """Run as the caller's own uid, the command can chmod a directory so that the supervisor
    (that uid too, without root's DAC override) cannot look into it: fail closed."""
    d = owned_dir(unpriv, "kforge-disk-")
    try:
        r = run_jail(d, "sh", "-c", script, user=unpriv, opts=["--disk", "16"])
        assert r.report["limit"] == "disk" and r.rc == 137, r.report
        assert "could not be measured" in r.err.splitlines()[-1]
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(d)], check=False)
        shutil.rmtree(d, ignore_errors=True)


def test_an_unprivileged_caller_has_the_quota_too(unpriv: str) -> None:
    d = owned_dir(unpriv, "kforge-disk-")
    try:
        cmd = "dd if=/dev/zero of=big bs=1M count=256 status=none"
        r = run_jail(d, "sh", "-c", cmd, user=unpriv, opts=["--disk", "16"])
        assert r.report["limit"] == "disk" and r.rc == 137, r.report
        assert r.err.splitlines()[-1] == f"{LINE} 16 MiB", r.err
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("value", ["-1", "x", ""])
def test_a_bad_quota_is_a_jail_failure(value: str, ws: Path) -> None:
    p = subprocess.run(
        [str(JAIL), "--profile", "shell", "--workdir", str(ws), "--disk", value, "--", "true"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == SETUP_EXIT and p.stderr.startswith("kforge-jail: bad value for --disk"), p.stderr
