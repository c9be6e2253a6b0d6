"""The real parts of the service for its tests: a PostgreSQL cluster, Redis, the server, workers.

Every class here starts real processes on free ports in its own temporary directory and stops
them again. conftest.py turns them into fixtures; bench/service_bench.sh starts the same pieces
through `build/kforge up`. Nothing here waits on a fixed sleep for an outcome: waits poll a
condition and carry a generous deadline only so that a broken build fails instead of hanging.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve()  # another build: a sanitizer one
SERVER = BUILD / "kforge-server"
WORKER = BUILD / "kforge-worker"
CLI = BUILD / "kforge"
JAIL = BUILD / "kforge-jail"
PYTHON = ROOT / ".venv" / "bin" / "python"
HARNESS_DIR = ROOT / "workers" / "harness"
# PostgreSQL's binaries, found as `kforge up` finds them (cli/stack.c)
PG_BIN = Path(
    os.environ.get("KFORGE_PG_BIN")
    or subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
)
EXAMPLES = ROOT / "examples"
CASES = ROOT / "tests" / "harness" / "cases"

# The limits every test server runs with, so that the bad-input tests do not depend on defaults.
LIMITS = {
    "max_body_bytes": 262144,
    "max_files": 8,
    "max_file_bytes": 65536,
    "max_source_bytes": 65536,
    "wait_max_s": 60,
}
FINISHED = {"succeeded", "failed", "cancelled", "dead"}
# A job of one example on the cpu backend takes seconds; the deadlines only catch hangs.
JOB_DEADLINE_S = 240.0


def missing_binaries() -> list[str]:
    """The programs of the service that are not built yet (relative to the repository)."""
    return [str(p) for p in (SERVER, WORKER, CLI, JAIL) if not os.access(p, os.X_OK)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, n: int = 6000) -> str:
    try:
        data = path.read_bytes()
    except OSError as e:
        return f"({e})"
    return data[-n:].decode("utf-8", "replace")


def wait_until(cond: Callable[[], Any], deadline_s: float, what: str, every_s: float = 0.1) -> Any:
    """Polls cond until it returns something truthy; AssertionError naming `what` at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what} after {deadline_s:.0f} s")
        time.sleep(every_s)


def descendants(pid: int) -> list[int]:
    """The pids below pid (from /proc), deepest last; the caller started pid."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _as_postgres(cmd: list[str]) -> list[str]:
    """initdb refuses root: run PostgreSQL's programs as the postgres user when we are root."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class PgCluster:
    """A PostgreSQL 15 cluster in a temporary directory, reached only through its socket in run/.

    It trusts every connection (no passwords for tests to carry), which is safe only because no
    TCP listens and the directory above run/ is mode 0700 (root and postgres alone pass)."""

    def __init__(self) -> None:
        # Under /tmp itself: pytest's own temporary directories are closed to the postgres user.
        self.root = Path(tempfile.mkdtemp(prefix="kforge-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "run"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self.sock.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.sock, "postgres", "postgres")
        self._run(
            [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        )

    def _run(self, cmd: list[str]) -> str:
        p = subprocess.run(_as_postgres(cmd), capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): {p.stderr[-2000:]}\n{tail(self.log)}")
        return p.stdout

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.sock} -c listen_addresses='' -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-o", opts, "start"]
        )

    def stop(self, mode: str = "fast") -> None:
        """mode immediate: like a crash (no shutdown checkpoint, clients cut off)."""
        self._run([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def createdb(self, name: str) -> str:
        self._run(
            [str(PG_BIN / "createdb"), "-h", str(self.sock), "-p", str(self.port), "-U", "postgres", name]
        )
        return self.url(name)

    def url(self, db: str) -> str:
        return f"postgresql:///{db}?host={self.sock}&port={self.port}&user=postgres"

    def close(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


class Redis:
    """redis-server without persistence on a free port; kill() and start() keep the port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log = root / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        cmd += ["--dir", str(self.root), "--logfile", str(self.log)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.ping, 20, "redis-server to answer PING")

    def ping(self) -> bool:
        try:
            return self.command("PING") == "+PONG"
        except OSError:
            return False

    def command(self, *args: str) -> str:
        """One command in the inline protocol; the first line of the reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall((" ".join(args) + "\r\n").encode())
            return s.makefile("rb").readline().decode().strip()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()


class Process:
    """A kforge program started by the tests, its stdout and stderr in files under its root."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], root: Path) -> None:
        self.name = name
        root.mkdir(parents=True, exist_ok=True)
        self.log = root / f"{name}.stderr"
        self.out = root / f"{name}.stdout"
        self._err = open(self.log, "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=self._err, start_new_session=True
        )
        self.pid = self.proc.pid
        self.first_line: str | None = None
        self._line = threading.Event()
        self._drain = threading.Thread(target=self._read_stdout, daemon=True)
        self._drain.start()
        self.returncode: int | None = None

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        with open(self.out, "wb") as f:
            for raw in self.proc.stdout:
                f.write(raw)
                f.flush()
                if self.first_line is None:
                    self.first_line = raw.decode("utf-8", "replace").rstrip("\n")
                    self._line.set()
        self._line.set()

    def wait_first_line(self, timeout: float) -> str:
        if not self._line.wait(timeout) or self.first_line is None:
            raise AssertionError(f"{self.name} printed nothing on stdout:\n{tail(self.log)}")
        return self.first_line

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill_hard(self) -> None:
        """SIGKILL to the process and everything below it, as a crashed host would."""
        below = descendants(self.pid)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.returncode = self.proc.wait(10)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then SIGKILL after timeout; the exit code (negative: killed by that signal)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill_hard()
                self.returncode = -signal.SIGKILL
                return self.returncode
        # whatever the program left behind in its group (a harness, a jail) goes too
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.returncode is None:
            self.returncode = self.proc.returncode
        self._err.close()
        return self.returncode


LISTEN = re.compile(r"^kforge-server: listening on (http://\S+?):(\d+)/?$")


class Server(Process):
    def __init__(self, env: dict[str, str], root: Path, name: str = "server") -> None:
        super().__init__(name, [str(SERVER), "--port", "0"], env, root)
        line = self.wait_first_line(30)
        m = LISTEN.match(line)
        assert m, (
            f"the server's first stdout line is {line!r}, not 'kforge-server: listening on http://HOST:PORT'"
        )
        host = m.group(1).split("//", 1)[1]
        if host in ("0.0.0.0", "[::]", "::"):
            host = "127.0.0.1"
        self.url = f"http://{host}:{m.group(2)}"


class Api:
    """requests against one server, with the key on writes and reads (key=None: anonymous)."""

    def __init__(self, url: str, key: str | None) -> None:
        self.url = url
        self.key = key
        self.s = requests.Session()

    def headers(self, key: str | None | bool = True, extra: dict[str, str] | None = None) -> dict[str, str]:
        h: dict[str, str] = {}
        k = self.key if key is True else key
        if k:
            h["Authorization"] = f"Bearer {k}"
        h.update(extra or {})
        return h

    def get(
        self, path: str, key: str | None | bool = True, timeout: float = 10, **kw: Any
    ) -> requests.Response:
        return self.s.get(
            self.url + path, headers=self.headers(key, kw.pop("headers", None)), timeout=timeout, **kw
        )

    def post(
        self, path: str, body: Any = None, key: str | None | bool = True, timeout: float = 10, **kw: Any
    ) -> requests.Response:
        headers = self.headers(key, kw.pop("headers", None))
        if body is not None and "data" not in kw:
            kw["data"] = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        return self.s.post(self.url + path, headers=headers, timeout=timeout, **kw)

    def job(self, job_id: str) -> dict[str, Any]:
        r = self.get(f"/v1/jobs/{job_id}")
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()

    def wait_job(
        self, job_id: str, deadline_s: float = JOB_DEADLINE_S, watch: list[Process] | None = None
    ) -> dict[str, Any]:
        """Polls the job until it finished; fails early when a watched process died."""

        def done() -> dict[str, Any] | None:
            for p in watch or []:
                assert p.alive(), f"{p.name} died ({p.proc.returncode}):\n{tail(p.log)}"
            j = self.job(job_id)
            return j if j["status"] in FINISHED else None

        return wait_until(done, deadline_s, f"job {job_id} to finish", every_s=0.2)

    def events(
        self,
        job_id: str,
        last_event_id: int | None = None,
        deadline_s: float = JOB_DEADLINE_S,
        silence_s: float = 30,
    ) -> Iterator[dict[str, Any]]:
        """The job's server-sent events as they come: {"id","event","data"} each; ends with the
        stream. AssertionError when the stream is still open after deadline_s, or says nothing
        (not even its 15 s keepalive) for silence_s."""
        headers = self.headers(True, {"Accept": "text/event-stream"})
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        end = time.monotonic() + deadline_s
        still_open = f"the event stream of {job_id} (Last-Event-ID {last_event_id}) is still open"
        url = self.url + f"/v1/jobs/{job_id}/events"
        with self.s.get(url, headers=headers, stream=True, timeout=(5, silence_s)) as r:
            assert r.status_code == 200, (r.status_code, r.text)
            assert r.headers.get("Content-Type", "").startswith("text/event-stream"), r.headers
            ev: dict[str, Any] = {}
            lines = r.iter_lines(decode_unicode=False)
            while True:
                try:
                    raw = next(lines)
                except StopIteration:
                    return
                except requests.ConnectionError as e:
                    raise AssertionError(f"{still_open} and silent after {silence_s} s") from e
                assert time.monotonic() < end, f"{still_open} after {deadline_s} s"
                line = raw.decode("utf-8")
                if not line:
                    if ev:
                        if "data" in ev:
                            ev["data"] = json.loads(ev["data"])
                        yield ev
                    ev = {}
                elif line.startswith(":"):
                    continue
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    ev[field] = ev[field] + "\n" + value if field in ev else value


def psql(url: str, sql: str) -> str:
    p = subprocess.run(
        ["psql", url, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def cli(env: dict[str, str], *args: str) -> str:
    p = subprocess.run([str(CLI), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"kforge {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}"
    return p.stdout


class Stack:
    """One database on a cluster, one Redis, the server with a key; workers on demand."""

    def __init__(self, cluster: PgCluster, root: Path, **settings: Any) -> None:
        self.cluster = cluster
        self.root = root
        self.db = "kforge_" + uuid.uuid4().hex[:12]
        self.database_url = cluster.createdb(self.db)
        self.redis = Redis(root / "redis")
        self.redis.start()
        self.settings = {**LIMITS, "rate_limit": 0, "default_backend": "cpu", **settings}
        self.processes: list[Process] = []
        cli(self.env(), "migrate")
        # the operator's key, as `kforge up` makes it: it sees every owner's objects
        self.key = cli(self.env(), "keys", "create", "--name", "test", "--scope", "admin").strip()
        assert re.fullmatch(r"kf_[0-9a-f]{8}_[0-9a-f]{40}", self.key), f"keys create printed {self.key!r}"
        self.server = self.start_server()
        self.api = Api(self.server.url, self.key)

    def env(self, **settings: Any) -> dict[str, str]:
        """The environment of a kforge program: this stack's database and Redis and settings."""
        e = dict(os.environ)
        e.update(
            KFORGE_DATABASE_URL=self.database_url,
            KFORGE_REDIS_URL=self.redis.url,
            KFORGE_PYTHON=str(PYTHON),
            KFORGE_HARNESS_DIR=str(HARNESS_DIR),
            KFORGE_JAIL=str(JAIL),
            KFORGE_MIGRATIONS=str(ROOT / "migrations"),
            KFORGE_LOG_LEVEL="debug",
        )
        for name, value in {**self.settings, **settings}.items():
            e["KFORGE_" + name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
        return e

    def start_server(self, **settings: Any) -> Server:
        s = Server(self.env(**settings), self.root, name=f"server{len(self.processes)}")
        self.processes.append(s)
        return s

    def worker(self, **settings: Any) -> Process:
        """A cpu worker with its own var directory; settings such as lease_s=4 become KFORGE_*."""
        n = len(self.processes)
        var = self.root / f"worker{n}-var"
        var.mkdir(parents=True)
        env = self.env(var=str(var), **{"worker_name": f"test-worker-{n}-{uuid.uuid4().hex[:6]}", **settings})
        env["KFORGE_CACHE"] = str(self.root / "harness-cache")
        w = Process(f"worker{n}", [str(WORKER), "--cpu"], env, self.root)
        self.processes.append(w)
        return w

    def psql(self, sql: str) -> str:
        return psql(self.database_url, sql)

    def counts(self) -> dict[str, int]:
        tables = ("tasks", "jobs", "job_events", "candidates", "evaluations", "baselines")
        row = self.psql("SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in tables))
        return dict(zip(tables, map(int, row.split("|"))))

    def log_files(self) -> list[Path]:
        return [p.log for p in self.processes] + [self.redis.log, self.cluster.log]

    def close(self) -> None:
        for p in reversed(self.processes):
            p.stop(timeout=15)
        self.redis.close()


# ---- request bodies -------------------------------------------------------------------------


def candidate_files(path: Path) -> dict[str, str]:
    """A candidate folder as the API's {name: content}."""
    return {
        str(f.relative_to(path)): f.read_text()
        for f in sorted(path.rglob("*"))
        if f.is_file() and "__pycache__" not in f.parts
    }


def example_task(name: str) -> str:
    return (EXAMPLES / "tasks" / f"{name}.py").read_text()


def evaluation_body(task_source: str, files: dict[str, str], **extra: Any) -> dict[str, Any]:
    """POST /v1/evaluations on the cpu backend, fast: no torch.compile baseline, 0.2 s budget."""
    body: dict[str, Any] = {
        "task": {"source": task_source},
        "candidate": {"format": "native", "files": files},
        "backend": "cpu",
        "options": {"no_compile": True, "budget_s": 0.2},
    }
    body.update(extra)
    return body


def unique_task(tag: str = "") -> str:
    """A valid task whose source no other test uses (a comment makes its sha256 new)."""
    return example_task("sum_dim") + f"\n# test task {tag} {uuid.uuid4()}\n"


def failing_files() -> dict[str, str]:
    """A candidate that fails at once (a compile error in g++): its job ends in about a second."""
    return candidate_files(CASES / "compile_error")


def assert_error(r: requests.Response, names: str | set[str]) -> dict:
    """The error shape of lib/README.md with a registry name, the registry's code and HTTP status,
    and the request id in both the header and the body; returns the error object."""
    allowed = {names} if isinstance(names, str) else names
    reg = registry()
    rid = r.headers.get("X-Request-Id")
    assert rid, (r.status_code, r.headers)
    assert r.headers.get("Content-Type", "").startswith("application/json"), (
        r.status_code,
        r.headers,
        r.text[:500],
    )
    body = r.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert err.get("name") in allowed, (r.status_code, err, allowed)
    code, http = reg[err["name"]]
    assert r.status_code == http, (r.status_code, err)
    assert err["code"] == code, (err, code)
    assert isinstance(err.get("message"), str) and err["message"], err
    assert err.get("request_id") == rid, (err, rid)
    assert set(err) <= {"code", "name", "message", "field", "request_id"}, err
    return err


@functools.cache
def registry() -> dict[str, tuple[int, int]]:
    """lib/errors.tsv: name -> (code, http status)."""
    out: dict[str, tuple[int, int]] = {}
    for line in (ROOT / "lib" / "errors.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        code, name, http = line.split("\t")[:3]
        out[name] = (int(code), int(http))
    return out
