"""The jail's contract: exit status, report, errors, the view, the environment, record mode,
and the library used from several threads."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from jailtest import ATTACK, HELPERS, JAIL, PROFILES, SETUP_EXIT, run_jail


def test_exit_status_and_report(ws: Path) -> None:
    r = run_jail(ws, "sh", "-c", "exit 7")
    assert r.rc == 7
    assert r.report["exit"] == 7 and r.report["signal"] is None and r.report["limit"] is None
    assert isinstance(r.report["wall_ms"], int) and r.report["error"] is None
    assert r.out == "" and r.err == ""  # the jail prints nothing of its own


def test_killed_by_a_signal_is_128_plus_signal(ws: Path) -> None:
    r = run_jail(ws, "sh", "-c", "kill -TERM $$")
    assert r.rc == 128 + 15 and r.report["signal"] == 15 and r.report["limit"] is None


def test_stdout_and_stderr_are_the_commands(ws: Path) -> None:
    r = run_jail(ws, "sh", "-c", "echo out; echo err >&2")
    assert (r.rc, r.out, r.err) == (0, "out\n", "err\n")
    assert r.report["stdout_bytes"] == 4 and r.report["stderr_bytes"] == 4


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--profile", "shell", "--workdir", "/nonexistent/ws", "--", "true"], "workdir"),
        (["--profile", "nope", "--workdir", "/tmp", "--", "true"], "--profile"),
        (["--profile", "shell", "--", "true"], "--workdir"),
        (["--profile", "shell", "--workdir", "/tmp"], "no command"),
        (["--profile", "build", "--gpu", "0", "--workdir", "/tmp", "--", "true"], "--gpu"),
        (["--profile", "shell", "--workdir", "/tmp", "--ro", "/nonexistent", "--", "true"], "nonexistent"),
        (["--profile", "shell", "--workdir", "/tmp", "--time", "-1", "--", "true"], "--time"),
    ],
)
def test_jail_failures_exit_125_with_one_line(args: list[str], reason: str) -> None:
    p = subprocess.run([str(JAIL), *args], capture_output=True, text=True)
    assert p.returncode == SETUP_EXIT
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kforge-jail: ") and reason in lines[0], p.stderr


def test_jail_failure_report_says_error(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    p = subprocess.run(
        [str(JAIL), "--profile", "shell", "--workdir", "/nonexistent", "--report", str(report), "--", "true"],
        capture_output=True,
    )
    assert p.returncode == SETUP_EXIT
    data = json.loads(report.read_text())
    assert data["exit"] == SETUP_EXIT and "workdir" in data["error"]


def test_missing_command_is_127_like_a_shell(ws: Path) -> None:
    r = run_jail(ws, "no-such-command-kforge")
    assert r.rc == 127 and r.report["error"] is None
    assert "no-such-command-kforge" in r.err


def test_gpu_nodes_required_for_gpu(ws: Path) -> None:
    if Path("/dev/nvidiactl").exists():
        pytest.skip("this host has a GPU")
    r = run_jail(ws, "true", profile="run", opts=["--gpu", "0"])
    assert r.rc == SETUP_EXIT and "/dev/nvidia" in r.err


@pytest.mark.parametrize("profile", PROFILES)
def test_the_view(profile: str, ws: Path) -> None:
    script = (
        "echo root=$(ls / | tr '\\n' ' '); echo dev=$(ls /dev | tr '\\n' ' '); "
        "echo id=$(id -u):$(id -g) host=$(hostname) cwd=$(pwd); "
        "echo net=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '); "
        "echo procs=$(ls /proc | grep -c '^[0-9]'); "
        "touch /rootfile 2>/dev/null && echo rootwritable; "
        "touch /tmp/t && echo tmpwritable; touch ws-file && echo wswritable; "
        "ls /home /root /var /opt 2>/dev/null | wc -l"
    )
    # the folders above the helpers (bound read-only by run_jail) hold nothing else
    chain = [p for p in HELPERS.parents if str(p) not in ("/", "/tmp")]
    for parent in chain:
        script += f"; echo chain={parent}:$(ls -A {parent} | tr '\\n' ' ')"
    r = run_jail(ws, "sh", "-c", script, profile=profile)
    assert r.rc == 0, r.err
    out = dict(line.split("=", 1) for line in r.lines() if "=" in line)
    root = set(out["root"].split())
    assert {"usr", "etc", "proc", "sys", "dev", "tmp", "bin", "lib"} <= root
    assert not root & {"root", "home", "var", "opt", "boot", "srv", "mnt"}
    listed = [line.split("=", 1)[1] for line in r.lines() if line.startswith("chain=")]
    child = {str(p): c for p, c in zip(HELPERS.parents, (HELPERS, *HELPERS.parents))}
    assert listed == [f"{p}:{Path(child[str(p)]).name}" for p in chain]
    assert set(out["dev"].split()) <= {
        "null",
        "zero",
        "full",
        "random",
        "urandom",
        "shm",
        "fd",
        "stdin",
        "stdout",
        "stderr",
    }
    assert out["id"].split(" ")[0] == "1000:1000"
    assert "host=kforge" in r.out and f"cwd={ws}" in r.out
    assert out["net"].split() == ["lo"]
    assert int(out["procs"]) <= 6  # the jail's own processes only
    assert "rootwritable" not in r.out
    assert "tmpwritable" in r.out and "wswritable" in r.out
    assert r.lines()[-1 - len(chain)] == "0"


def test_environment_is_not_inherited(ws: Path) -> None:
    env = dict(os.environ, KFORGE_HOST_SECRET="hunter2", PASSTHROUGH="yes")
    r = run_jail(ws, "env", env=env, opts=["--env", "PASSTHROUGH", "--env", "EXTRA=1"])
    assert "hunter2" not in r.out
    assert "PASSTHROUGH=yes" in r.out and "EXTRA=1" in r.out
    assert "HOME=/tmp" in r.out and "PATH=" in r.out


def test_stdin_is_dev_null_unless_given(ws: Path, tmp_path: Path) -> None:
    assert run_jail(ws, "cat").out == ""
    f = tmp_path / "in.txt"
    f.write_text("from stdin\n")
    assert run_jail(ws, "cat", opts=["--stdin", str(f)]).out == "from stdin\n"


def test_rw_paths_are_writable_and_ro_paths_are_not(ws: Path, tmp_path: Path) -> None:
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    script = f"echo a > {rw}/a && echo ok1; echo b > {ro}/b 2>/dev/null || echo refused2; cat {ro}/../rw/a"
    r = run_jail(ws, "sh", "-c", script, ro=[ro], rw=[rw])
    assert "ok1" in r.out and "refused2" in r.out
    assert (rw / "a").read_text() == "a\n" and not (ro / "b").exists()


def test_seccomp_denies_with_eperm_by_default(ws: Path) -> None:
    r = run_jail(ws, str(ATTACK), "syscall", "206", "1", "0")  # io_setup: not on any list
    assert r.lines()[0] == "206: EPERM"


def test_record_mode_writes_down_what_the_list_lacks(ws: Path, tmp_path: Path) -> None:
    rec = tmp_path / "record.txt"
    r = run_jail(ws, str(ATTACK), "syscall", "206", "1", "0", opts=["--record", str(rec)])
    assert r.rc in (0, 1), r.err
    names = [line.split("\t")[0] for line in rec.read_text().splitlines()]
    assert "io_setup" in names
    assert "read" not in names and "write" not in names  # allowed ones are not reported


@pytest.mark.usefixtures("bombs_alone")  # its fork bomb must not meet another test's bomb count
def test_host_uid_runs_the_command_as_another_host_user(ws: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("--host-uid needs root")
    os.chown(ws, 65534, 65534)
    r = run_jail(
        ws,
        "sh",
        "-c",
        f"id -u; echo x > f; {HELPERS}/bomb fork",
        opts=["--host-uid", "65534", "--host-gid", "65534", "--pids", "32", "--time", "2"],
    )
    assert r.lines()[0] == "1000"
    assert (ws / "f").stat().st_uid == 65534
    assert r.report["limit"] == "pids" and r.report["pids"] in ("cgroup", "rlimit")


def test_library_from_several_threads(ws: Path) -> None:
    p = subprocess.run(
        [str(HELPERS / "lib_client"), str(ws), "6"], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stdout + p.stderr
    lines = sorted(p.stdout.splitlines())
    assert lines == [f"{i} exit={i} signal=0 limit=none out=out-{i} err=err-{i}" for i in range(6)]
