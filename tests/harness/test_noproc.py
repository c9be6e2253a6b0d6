"""The runner's process filter (kforge_harness.noproc), in a child interpreter of its own: every
way to make a process or replace the program fails once it is installed; threads, PyTorch's
among them, still run. The hacks that try it from a candidate are in test_hacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kforge_harness.candidate import Candidate

HARNESS = Path(__file__).resolve().parents[2] / "workers" / "harness"

PROBE = r"""
import ctypes, json, os, subprocess, sys, threading
from kforge_harness import noproc
out = {"left": noproc.children(), "forbid": noproc.forbid()}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, fn):
    try:
        r = fn()
    except OSError as e:
        out[name] = f"refused:{e.errno}"
        return
    if r == 0:
        os._exit(0)  # a child that got through
    out[name] = f"allowed:{r}"

attempt("fork", os.fork)
attempt("posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
attempt("subprocess", lambda: subprocess.run(["/bin/true"]).returncode or 1)
attempt("execv", lambda: os.execv("/bin/true", ["true"]))
def raw(nr, *args):
    r = libc.syscall(nr, *args)
    if r < 0:
        raise OSError(ctypes.get_errno(), "")
    return r
attempt("vfork", lambda: raw(58))
attempt("clone_process", lambda: raw(56, 17, 0, 0, 0, 0))  # SIGCHLD, no CLONE_THREAD
attempt("clone3", lambda: raw(435, 0, 0))
attempt("x32_fork", lambda: raw(0x40000000 + 57))
t = threading.Thread(target=lambda: out.__setitem__("thread", "ran"))
t.start(); t.join()
import torch
x = torch.randn(256, 256)
out["torch"] = bool(torch.isfinite(x @ x).all())
print(json.dumps(out))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp")
def test_no_way_to_a_new_process_once_forbidden():
    p = subprocess.run(
        [sys.executable, "-c", PROBE], env={"PYTHONPATH": str(HARNESS), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["left"] == [] and r["forbid"] is None, r
    for way in ("fork", "posix_spawn", "subprocess", "execv", "vfork", "clone_process", "x32_fork"):
        assert r[way] == "refused:1", (way, r)  # EPERM
    assert r["clone3"] == "refused:38", r  # ENOSYS: glibc falls back to clone, refused above
    assert r["thread"] == "ran" and r["torch"] is True, r


@pytest.mark.parametrize(
    "name",
    [
        "fast.so",
        "fast.cpython-311-x86_64-linux-gnu.so",
        "lib.so.1",
        "m.pyc",
        "hook.pth",
        "pkg.zip",
        "x.egg",
        "w.whl",
        "p.pyd",
    ],
)
def test_every_importable_binary_in_the_candidate_is_found(tmp_path: Path, name: str):
    (tmp_path / "model_new.py").write_text("")
    (tmp_path / "helper.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / name).write_bytes(b"\0")
    c = Candidate(str(tmp_path), "native", str(tmp_path / "model_new.py"), [])
    sources, binaries = c.python_files()
    assert sorted(Path(s).name for s in sources) == ["helper.py", "model_new.py"]
    assert [Path(b).name for b in binaries] == [name]
