"""Tests of the agent's non-judge tools (workers/agent/tools*.c) through build/agent-probes/tools_probe.

Each test makes a real workspace (model.py read-only, a folder `outside` beside it holding a
secret), runs one tool call per probe run, with the real kforge-jail for bash, and checks the
answer and the files on disk. The session builds the probe (make is a no-op when it is up to
date; KFORGE_BUILD=DIR tests another build) and fails, naming the jail's message, when the jail
cannot run here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve()
PROBE = BUILD / "agent-probes" / "tools_probe"
JAIL = BUILD / "kforge-jail"
BUILD_LOCK = Path("/tmp/kforge-build.lock")
MODEL = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
SECRET = "the judge's secret seed 8231\n"
CUT_NOTE = re.compile(r"\[\.\.\. (\d+) bytes cut \.\.\.\]")


@pytest.fixture(scope="session", autouse=True)
def built() -> None:
    """Builds the probe (under the shared build lock) and checks that the jail runs here."""
    with open(BUILD_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        p = subprocess.run(
            ["make", "-s", "-C", str(ROOT / "workers"), f"BUILD={BUILD}", str(PROBE)],
            capture_output=True,
            text=True,
        )
    if p.returncode != 0:
        pytest.fail(f"building {PROBE} failed:\n{p.stdout}\n{p.stderr}")
    if not JAIL.exists():
        pytest.fail(f"{JAIL} is missing: make build")
    p = subprocess.run(
        [str(JAIL), "--profile", "shell", "--workdir", "/tmp", "--", "/bin/true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if p.returncode != 0:
        pytest.fail(f"kforge-jail cannot run on this machine (exit {p.returncode}): {p.stderr.strip()}")


@dataclass
class Env:
    ws: Path
    outside: Path

    def call(
        self,
        tool: str,
        args: Any,
        *,
        readonly: tuple[str, ...] = ("model.py",),
        max_output: int | None = None,
        bash_timeout: float | None = None,
        max_file_bytes: int | None = None,
        bash_disk: int | None = None,
        jail: Path = JAIL,
        raw: bool = False,
    ) -> dict[str, Any]:
        """One kf_tool_run; args is JSON-encoded unless raw (then passed as given)."""
        argv = [str(PROBE), "--workspace", str(self.ws), "--jail", str(jail)]
        for name in readonly:
            argv += ["--readonly", name]
        if max_output is not None:
            argv += ["--max-output", str(max_output)]
        if bash_timeout is not None:
            argv += ["--bash-timeout", str(bash_timeout)]
        if max_file_bytes is not None:
            argv += ["--max-file-bytes", str(max_file_bytes)]
        if bash_disk is not None:
            argv += ["--bash-disk", str(bash_disk)]
        argv += [tool, args if raw else json.dumps(args)]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert set(r) == {"text", "is_error", "malformed", "full_bytes", "truncated", "seconds", "rc"}
        return r

    def ok(self, tool: str, args: Any, **kw: Any) -> str:
        r = self.call(tool, args, **kw)
        assert r["rc"] == 0 and not r["is_error"] and not r["malformed"], r["text"]
        return r["text"]

    def err(self, tool: str, args: Any, **kw: Any) -> str:
        r = self.call(tool, args, **kw)
        assert r["rc"] == 0 and r["is_error"] and not r["malformed"], r
        return r["text"]

    def bash(self, command: str, **kw: Any) -> str:
        return self.ok("bash", {"command": command}, **kw)


@pytest.fixture()
def env(tmp_path: Path) -> Env:
    """A workspace with model.py (mode 0644), and a folder with a secret beside it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model.py").write_text(MODEL)
    (ws / "model.py").chmod(0o644)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    return Env(ws, outside)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_model_intact(env: Env) -> None:
    p = env.ws / "model.py"
    assert not p.is_symlink() and p.is_file()
    assert p.read_text() == MODEL
    assert p.stat().st_mode & 0o7777 == 0o644


# ---- normal use ----


def test_write_then_read_back(env: Env) -> None:
    content = "// ünïcode ✓\n__global__ void k(float *x) { x[0] = 1.0f; }\n"
    text = env.ok("write_file", {"path": "kernels/sub/k.cu", "content": content})
    assert text == f"created kernels/sub/k.cu ({len(content.encode())} bytes)"
    assert (env.ws / "kernels" / "sub" / "k.cu").read_text() == content
    r = env.call("read_file", {"path": "kernels/sub/k.cu"})
    assert r["text"] == content and not r["truncated"] and r["full_bytes"] == len(content.encode())
    assert env.ok("write_file", {"path": "kernels/sub/k.cu", "content": "x\n"}).startswith("replaced")
    assert env.ok("read_file", {"path": "./kernels/sub/../sub/k.cu"}) == "x\n"
    assert not [
        p.name for p in (env.ws / "kernels" / "sub").iterdir() if p.name != "k.cu"
    ]  # no temp file left
    assert env.ok("read_file", {"path": "model.py"}) == MODEL


def test_write_keeps_mode_and_limits_size(env: Env) -> None:
    (env.ws / "run.sh").write_text("echo 1\n")
    (env.ws / "run.sh").chmod(0o755)
    env.ok("write_file", {"path": "run.sh", "content": "echo 2\n"})
    assert (env.ws / "run.sh").stat().st_mode & 0o777 == 0o755
    text = env.err("write_file", {"path": "big.txt", "content": "x" * 101}, max_file_bytes=100)
    assert "101 bytes" in text and "at most 100" in text
    assert not (env.ws / "big.txt").exists()


def test_edit_exactly_once(env: Env) -> None:
    (env.ws / "a.cpp").write_text("int a = 1;\nint b = 2;\nint c = 2;\n")
    text = env.ok("edit_file", {"path": "a.cpp", "old": "int b = 2;", "new": "int b = 3;"})
    assert "line 2" in text
    assert (env.ws / "a.cpp").read_text() == "int a = 1;\nint b = 3;\nint c = 2;\n"
    before = (env.ws / "a.cpp").read_text()
    text = env.err("edit_file", {"path": "a.cpp", "old": "int z", "new": "x"})
    assert "matched 0 times" in text
    text = env.err("edit_file", {"path": "a.cpp", "old": "int ", "new": "long "})
    assert "matched 3 times" in text
    (env.ws / "b.txt").write_text("aa aa\n")
    assert "matched 2 times" in env.err("edit_file", {"path": "b.txt", "old": "aa", "new": "b"})
    assert (env.ws / "a.cpp").read_text() == before
    assert (env.ws / "b.txt").read_text() == "aa aa\n"
    assert "old is empty" in env.err("edit_file", {"path": "a.cpp", "old": "", "new": "x"})
    assert "no such file" in env.err("edit_file", {"path": "nope.cpp", "old": "a", "new": "b"})


def test_glob_doublestar_sorted(env: Env) -> None:
    for rel in ["kernels/b.cu", "kernels/a.cu", "kernels/x/deep/c.cu", "top.cu", "kernels/h.cuh", "z/q.cpp"]:
        p = env.ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("//\n")
    assert env.ok("glob", {"pattern": "**/*.cu"}).splitlines() == [
        "kernels/a.cu",
        "kernels/b.cu",
        "kernels/x/deep/c.cu",
        "top.cu",
    ]
    assert env.ok("glob", {"pattern": "kernels/*.cu"}).splitlines() == ["kernels/a.cu", "kernels/b.cu"]
    assert env.ok("glob", {"pattern": "kernels/?.cu*"}).splitlines() == [
        "kernels/a.cu",
        "kernels/b.cu",
        "kernels/h.cuh",
    ]
    assert env.ok("glob", {"pattern": "[kz]*/[!ab]*"}).splitlines() == [
        "kernels/h.cuh",
        "kernels/x/",
        "z/q.cpp",
    ]
    everything = env.ok("glob", {"pattern": "**"}).splitlines()
    assert everything == sorted(everything) and "kernels/x/deep/" in everything and "model.py" in everything
    assert env.ok("glob", {"pattern": "*.nothing"}).startswith("no paths match")
    assert "'..'" in env.err("glob", {"pattern": "../*"})
    assert "relative" in env.err("glob", {"pattern": "/etc/*"})


def test_glob_caps_its_list(env: Env) -> None:
    d = env.ws / "many"
    d.mkdir()
    for i in range(1100):
        (d / f"f{i:04d}.txt").write_text("")
    lines = env.ok("glob", {"pattern": "many/*"}, max_output=1 << 20).splitlines()
    assert lines[:2] == ["many/f0000.txt", "many/f0001.txt"] and len(lines) == 1001
    assert "1100 paths match; the first 1000 shown" in lines[-1]


def test_grep_lines_and_path(env: Env) -> None:
    (env.ws / "kernels").mkdir()
    (env.ws / "kernels" / "b.cu").write_text("float y;\n__global__ void k2() {}\n")
    (env.ws / "kernels" / "a.cu").write_text("__global__ void k1() {}\nint x;\n__global__ void k3() {}\n")
    (env.ws / "kernels" / "blob.bin").write_bytes(b"\x00\x01__global__ void nope()\n")
    (env.ws / "notes.txt").write_text("no kernels here\n")
    text = env.ok("grep", {"pattern": "__global__ void k[0-9]"})
    assert text.splitlines() == [
        "kernels/a.cu:1:__global__ void k1() {}",
        "kernels/a.cu:3:__global__ void k3() {}",
        "kernels/b.cu:2:__global__ void k2() {}",
        "[skipped 1 binary file]",
    ]
    assert env.ok("grep", {"pattern": "^(int|float) ", "path": "kernels/"}).splitlines()[:2] == [
        "kernels/a.cu:2:int x;",
        "kernels/b.cu:1:float y;",
    ]
    assert (
        env.ok("grep", {"pattern": "k2", "path": "kernels/b.cu"})
        == "kernels/b.cu:2:__global__ void k2() {}\n"
    )
    assert env.ok("grep", {"pattern": "class +Model", "path": "."}).splitlines() == [
        "model.py:4:class Model(torch.nn.Module):",
        "[skipped 1 binary file]",
    ]
    assert env.ok("grep", {"pattern": "zzz"}).startswith("no lines match")
    assert "invalid regular expression" in env.err("grep", {"pattern": "(unclosed"})
    assert "outside the workspace" in env.err("grep", {"pattern": "seed", "path": "../outside"})


# ---- escapes ----


def test_absolute_and_dotdot_refused(env: Env) -> None:
    assert "absolute paths are not allowed" in env.err("read_file", {"path": "/etc/passwd"})
    assert "absolute paths are not allowed" in env.err(
        "write_file", {"path": str(env.ws / "x"), "content": "x"}
    )
    (env.ws / "kernels").mkdir()
    for path in ["../outside/secret.txt", "kernels/../../outside/secret.txt", "./../outside/secret.txt"]:
        text = env.err("read_file", {"path": path})
        assert "outside the workspace" in text and "seed" not in text
    for path in ["../outside/new.txt", "../evil.txt", "a/../../evil.txt"]:
        assert "outside the workspace" in env.err("write_file", {"path": path, "content": "x"})
    assert sorted(p.name for p in env.outside.iterdir()) == ["secret.txt"]
    assert not (env.ws.parent / "evil.txt").exists() and not (env.ws / "a").exists()
    assert "outside the workspace" in env.err(
        "edit_file", {"path": "../outside/secret.txt", "old": "seed", "new": "x"}
    )
    assert (env.outside / "secret.txt").read_text() == SECRET


def test_symlink_to_etc_passwd_made_by_bash(env: Env) -> None:
    before = sha256(Path("/etc/passwd"))
    env.bash(f"ln -s /etc/passwd pw && ln -s {env.outside}/secret.txt sec && ln -s ../outside/secret.txt rel")
    for link in ["pw", "sec", "rel"]:
        assert (env.ws / link).is_symlink()
        text = env.err("read_file", {"path": link})
        assert "outside the workspace" in text and "root:" not in text and "seed" not in text
        text = env.err("write_file", {"path": link, "content": "pwned\n"})
        assert "symbolic link leading outside the workspace" in text
        assert "refused" in env.err("edit_file", {"path": link, "old": "root", "new": "pwned"})
        assert (env.ws / link).is_symlink()
    assert sha256(Path("/etc/passwd")) == before
    assert (env.outside / "secret.txt").read_text() == SECRET
    # a link inside the workspace is read through, but never written through
    env.bash("ln -s model.py alias")
    assert env.ok("read_file", {"path": "alias"}) == MODEL
    assert "symbolic link" in env.err("write_file", {"path": "alias", "content": "x"})
    assert_model_intact(env)


def test_symlinked_directory(env: Env) -> None:
    env.bash(f"ln -s {env.outside} od && ln -s /etc etc")
    assert "outside the workspace" in env.err("read_file", {"path": "od/secret.txt"})
    assert "outside the workspace" in env.err("read_file", {"path": "etc/passwd"})
    assert "outside the workspace" in env.err("write_file", {"path": "od/new.txt", "content": "x"})
    assert "outside the workspace" in env.err("write_file", {"path": "od/sub/new.txt", "content": "x"})
    assert sorted(p.name for p in env.outside.iterdir()) == ["secret.txt"]
    listing = env.ok("glob", {"pattern": "**"}).splitlines()
    assert "od" in listing and not any(p.startswith("od/") or p.startswith("etc/") for p in listing)
    assert env.ok("grep", {"pattern": "seed|root"}).startswith("no lines match")
    assert "outside the workspace" in env.err("grep", {"pattern": "seed", "path": "od"})


def test_readonly_writes_refused(env: Env) -> None:
    for path in ["model.py", "./model.py", "kernels/../model.py", ".//model.py"]:
        (env.ws / "kernels").mkdir(exist_ok=True)
        text = env.err("write_file", {"path": path, "content": "class Model: pass\n"})
        assert "model.py is read-only" in text
        text = env.err("edit_file", {"path": path, "old": "x * 2", "new": "x * 3"})
        assert "model.py is read-only" in text
    # nor through links inside the workspace that lead back to its top
    env.bash("ln -s . self && ln -s .. kernels/up")
    for path in ["self/model.py", "kernels/up/model.py", "self/kernels/up/self/model.py"]:
        assert "model.py is read-only" in env.err("write_file", {"path": path, "content": "x"})
    assert_model_intact(env)
    # a read-only name that does not exist yet cannot be created either
    assert "ref/data.txt is read-only" in env.err(
        "write_file", {"path": "ref/data.txt", "content": "x"}, readonly=("model.py", "ref/data.txt")
    )


@pytest.mark.parametrize(
    "command",
    [
        "echo x > model.py",
        "echo x >> model.py",
        "rm -f model.py",
        "mv model.py moved.py",
        "chmod 777 model.py",
        "cp /dev/null model.py",
        "ln -sf /etc/passwd model.py",
        "truncate -s 0 model.py",
        "python3 -c \"open('model.py', 'w').write('hacked')\"",
    ],
)
def test_bash_cannot_change_model(env: Env, command: str) -> None:
    text = env.bash(command)
    assert text.startswith("exit status ") and not text.startswith("exit status 0\n"), text
    assert_model_intact(env)
    assert not (env.ws / "moved.py").exists()


def test_readonly_restored_when_bash_goes_around(env: Env) -> None:
    """A read-only file below a folder: the bind mount alone does not hold (the folder can be
    renamed), so the call restores it and says so."""
    (env.ws / "ref").mkdir()
    (env.ws / "ref" / "data.txt").write_text("original\n")
    (env.ws / "ref" / "data.txt").chmod(0o640)
    ro = ("model.py", "ref/data.txt", "ghost.py")
    text = env.bash(
        "mv ref ref2 && mkdir ref && echo evil > ref/data.txt && echo boo > ghost.py", readonly=ro
    )
    assert "ref/data.txt is read-only: restored" in text
    assert "ghost.py is read-only: removed" in text
    assert (env.ws / "ref" / "data.txt").read_text() == "original\n"
    assert (env.ws / "ref" / "data.txt").stat().st_mode & 0o777 == 0o640
    assert not (env.ws / "ghost.py").exists()
    # the folder replaced by a link out of the workspace: restored inside, nothing written out
    text = env.bash(f"mv ref ref3 && ln -s {env.outside} ref", readonly=ro)
    assert "ref/data.txt is read-only: restored" in text
    assert not (env.ws / "ref").is_symlink() and (env.ws / "ref" / "data.txt").read_text() == "original\n"
    assert sorted(p.name for p in env.outside.iterdir()) == ["secret.txt"]
    # nothing changed: no note
    assert "read-only" not in env.bash("cat ref/data.txt", readonly=ro)


def test_bash_no_network(env: Env) -> None:
    text = env.bash("echo > /dev/tcp/1.1.1.1/53")
    assert not text.startswith("exit status 0\n") and "unreachable" in text.lower()
    text = env.bash(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\" && echo CONNECTED"
    )
    assert not text.startswith("exit status 0\n") and "CONNECTED" not in text


def test_bash_no_gpu_nodes(env: Env) -> None:
    text = env.bash("ls /dev; ls /dev/nvidia* /dev/dri 2>&1; test -e /dev/nvidiactl")
    assert text.startswith("exit status 1\n")
    listing = text.split("--- stdout ---\n")[1]
    assert "nvidia0" not in listing and "nvidiactl\n" not in listing.replace("/dev/nvidiactl", "")
    assert "null" in listing


def test_bash_cannot_read_outside(env: Env) -> None:
    secret = env.outside / "secret.txt"
    text = env.bash(f"cat {secret}; ls {env.outside}; cat {env.ws}/../outside/secret.txt")
    assert "seed" not in text and "No such file" in text
    assert not text.startswith("exit status 0\n")


def test_bash_exit_status_and_sections(env: Env) -> None:
    r = env.call("bash", {"command": "echo out; echo err >&2; exit 3"})
    assert r["rc"] == 0 and not r["is_error"] and not r["malformed"]
    assert r["text"] == "exit status 3\n--- stdout ---\nout\n--- stderr ---\nerr\n"
    assert env.bash("true") == "exit status 0\n(no output)\n"
    assert env.bash("pwd") == f"exit status 0\n--- stdout ---\n{env.ws}\n"
    env.bash("mkdir -p kernels && printf 'int main(){}' > kernels/m.cpp")
    assert env.ok("read_file", {"path": "kernels/m.cpp"}) == "int main(){}"
    # bytes that are not UTF-8 come back as U+FFFD
    assert env.bash("printf 'a\\377b\\n'") == "exit status 0\n--- stdout ---\na\ufffdb\n"


def test_bash_time_limit(env: Env) -> None:
    r = env.call("bash", {"command": "echo started; sleep 100"}, bash_timeout=1)
    assert r["rc"] == 0 and not r["is_error"]
    assert r["text"].startswith("killed: time limit of 1 s\n"), r["text"]
    assert "started" in r["text"]


def test_bash_disk_quota_kills(env: Env) -> None:
    """The workspace holds at most the quota during a bash call: a command filling it is
    killed, the agent is told why, and the workspace stays usable."""
    r = env.call(
        "bash",
        {"command": "for i in $(seq 100); do head -c 4M /dev/zero > f$i; done; echo done"},
        bash_disk=32,
    )
    assert r["rc"] == 0 and not r["is_error"]
    assert r["text"].startswith("killed: the workspace passed its disk quota of 32 MiB\n"), r["text"]
    held = sum(f.stat().st_blocks * 512 for f in env.ws.glob("f*"))
    assert held < 96 << 20, held  # the quota plus what a fast writer adds between two looks
    assert env.bash("rm -f f*; echo ok", bash_disk=32).endswith("ok\n")


def test_bash_output_limit_kills(env: Env) -> None:
    r = env.call("bash", {"command": "yes; echo never"}, max_output=4096)
    assert r["text"].startswith("killed: output limit of 1024 KiB reached")
    assert r["truncated"] and r["full_bytes"] > 1024 * 1024 and len(r["text"].encode()) <= 4096


def test_output_cut_head_and_tail(env: Env) -> None:
    body = "".join(f"line {i:05d}\n" for i in range(10000))  # 110000 bytes
    (env.ws / "big.txt").write_text(body)
    r = env.call("read_file", {"path": "big.txt"}, max_output=1000)
    assert r["truncated"] and r["full_bytes"] == len(body)
    text = r["text"]
    assert len(text.encode()) <= 1000
    m = CUT_NOTE.search(text)
    assert m is not None
    head, tail = text[: m.start()], text[m.end() :]
    assert body.startswith(head) and body.endswith(tail.lstrip("\n"))
    assert len(head) + int(m.group(1)) + len(tail.lstrip("\n")) == len(body)
    assert head.startswith("line 00000\n") and tail.endswith("line 09999\n")
    # bash: the same cut, the exit status kept at the top
    r = env.call("bash", {"command": "seq 1 100000"}, max_output=300)
    expected = "exit status 0\n--- stdout ---\n" + "".join(f"{i}\n" for i in range(1, 100001))
    assert r["truncated"] and r["full_bytes"] == len(expected)
    assert r["text"].startswith("exit status 0\n--- stdout ---\n1\n2\n") and r["text"].endswith(
        "99999\n100000\n"
    )
    assert CUT_NOTE.search(r["text"]) and len(r["text"]) <= 300
    # multi-byte characters are never split
    (env.ws / "wide.txt").write_text("é" * 5000)
    r = env.call("read_file", {"path": "wide.txt"}, max_output=501)
    assert r["truncated"] and "\ufffd" not in r["text"] and r["full_bytes"] == 10000


def test_read_file_refusals(env: Env) -> None:
    (env.ws / "huge.bin").write_bytes(b"a" * (4 * 1024 * 1024 + 1))
    assert "read_file reads files up to 4194304 bytes" in env.err("read_file", {"path": "huge.bin"})
    (env.ws / "lib.so").write_bytes(b"\x7fELF\x00\x00\x01")
    assert "binary file" in env.err("read_file", {"path": "lib.so"})
    assert "folder" in env.err("read_file", {"path": "."})
    assert "no such file" in env.err("read_file", {"path": "missing.py"})
    env.bash("mkfifo pipe")
    r = env.call("read_file", {"path": "pipe"})  # must not block
    assert r["is_error"] and "FIFO" in r["text"]
    assert "FIFO" in env.err("write_file", {"path": "pipe", "content": "x"})
    (env.ws / "empty.txt").write_text("")
    assert env.ok("read_file", {"path": "empty.txt"}) == "(empty.txt is empty)"


# ---- malformed calls, definitions ----


def test_malformed_calls(env: Env) -> None:
    cases = [
        ("no_such_tool", {"path": "x"}, 'unknown tool "no_such_tool"'),
        ("read_file", {}, 'missing argument "path"'),
        ("read_file", {"path": "model.py", "mode": "r"}, 'unexpected argument "mode"'),
        ("write_file", {"path": "a", "content": 3}, 'argument "content" must be a string, not a number'),
        ("edit_file", {"path": "a", "old": "x"}, 'missing argument "new"'),
        ("grep", {"pattern": "x", "path": None}, 'argument "path" must be a string, not null'),
        ("bash", {"cmd": "ls"}, 'unexpected argument "cmd"'),
        ("glob", ["**"], "the arguments are an array"),
    ]
    for tool, args, message in cases:
        r = env.call(tool, args)
        assert r["malformed"] and r["rc"] == 0, r
        assert message in r["text"], r["text"]
    r = env.call("write_file", "{not json", raw=True)  # the model's arguments did not parse: NULL
    assert r["malformed"] and "not valid JSON" in r["text"]
    assert 'write_file takes {"path": string, "content": string}' in r["text"]
    r = env.call("grep", {})
    assert 'grep takes {"pattern": string, "path"?: string}' in r["text"]
    assert not (env.ws / "a").exists()


def test_jail_missing_is_internal(env: Env) -> None:
    r = env.call("bash", {"command": "true"}, jail=env.ws / "no-jail")
    assert r["rc"] == -1 and r["is_error"] and "jail binary is missing" in r["text"]


def test_definitions() -> None:
    p = subprocess.run([str(PROBE), "--definitions"], capture_output=True, text=True, timeout=30, check=True)
    defs = json.loads(p.stdout)
    shapes = {
        "bash": ({"command"}, {"command"}),
        "read_file": ({"path"}, {"path"}),
        "write_file": ({"path", "content"}, {"path", "content"}),
        "edit_file": ({"path", "old", "new"}, {"path", "old", "new"}),
        "glob": ({"pattern"}, {"pattern"}),
        "grep": ({"pattern", "path"}, {"pattern"}),
    }
    assert [d["function"]["name"] for d in defs] == list(shapes)
    for d in defs:
        assert d["type"] == "function"
        fn = d["function"]
        assert isinstance(fn["description"], str) and fn["description"]
        schema = fn["parameters"]
        jsonschema.Draft202012Validator.check_schema(schema)
        props, required = shapes[fn["name"]]
        assert schema["type"] == "object" and set(schema["properties"]) == props
        assert set(schema["required"]) == required and schema["additionalProperties"] is False
        assert all(v["type"] == "string" and v["description"] for v in schema["properties"].values())
        v = jsonschema.Draft202012Validator(schema)
        assert v.is_valid({k: "x" for k in props})
        assert v.is_valid({k: "x" for k in required})
        assert not v.is_valid({**{k: "x" for k in props}, "extra": "x"})
        assert not v.is_valid({k: 1 for k in props})
