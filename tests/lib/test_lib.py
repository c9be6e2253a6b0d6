"""Tests of lib/ (libkforge.a) against a throwaway PostgreSQL and Redis.

The checks themselves are in lib_test.c (built by lib/Makefile into build/lib-tests/lib_test);
this file starts the servers on free ports, runs its modes and stops and restarts the servers
under it for the outage test. KFORGE_BUILD=DIR tests another build (e.g. a sanitizer one).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve()
LIB_TEST = BUILD / "lib-tests" / "lib_test"
# PostgreSQL's binaries, found as `kforge up` finds them (cli/stack.c)
PG_BIN = Path(
    os.environ.get("KFORGE_PG_BIN")
    or subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
)
GEN_ERRORS = ROOT / "lib" / "gen_errors.sh"
ERRORS_TSV = ROOT / "lib" / "errors.tsv"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def as_postgres(cmd: list[str]) -> list[str]:
    """initdb and postgres refuse root: run them as the postgres user when we are root."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}")


@dataclass
class Postgres:
    root: Path
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def uri(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        cmd = [str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-N"]
        subprocess.run(as_postgres(cmd), check=True, capture_output=True)

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        cmd = [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"), "-w"]
        subprocess.run(as_postgres([*cmd, "start"]), check=True, capture_output=True)

    def stop(self) -> None:
        cmd = [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]
        subprocess.run(as_postgres(cmd), check=True, capture_output=True)


@dataclass
class Redis:
    root: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/3"

    def start(self) -> None:
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        cmd += ["--appendonly", "no", "--dir", str(self.root)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    subprocess.run(["make", "-s", "-C", str(ROOT / "lib"), f"BUILD={BUILD}"], check=True)
    assert LIB_TEST.exists()


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    root = Path(tempfile.mkdtemp(prefix="kf-lib-pg-"))
    server = Postgres(root)
    try:
        server.init()
        server.start()
        yield server
    finally:
        subprocess.run(
            as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(server.data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def redis() -> Iterator[Redis]:
    root = Path(tempfile.mkdtemp(prefix="kf-lib-redis-"))
    server = Redis(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def run_mode(*args: str, timeout_s: float = 60) -> str:
    res = subprocess.run([str(LIB_TEST), *args], capture_output=True, text=True, timeout=timeout_s)
    assert res.returncode == 0, f"lib_test {args[0]} failed:\n{res.stdout}\n{res.stderr}"
    assert "FAIL" not in res.stdout
    return res.stdout


def oks(out: str) -> set[str]:
    return {line[3:] for line in out.splitlines() if line.startswith("ok ")}


def test_unit() -> None:
    out = run_mode("unit")
    expected = {"config_defaults", "config_table", "config_env", "log", "errors", "util", "buf"}
    expected |= {"jspec_good", "jspec_bad", "jspec_body", "jspec_nested"}
    assert expected <= oks(out), out


def test_db(pg: Postgres) -> None:
    out = run_mode("db", pg.uri)
    assert {"db_basic", "db_open_errors", "db_tx", "db_reconnect", "db_pool"} <= oks(out), out


def test_db_conninfo_form(pg: Postgres) -> None:
    out = run_mode("db", pg.conninfo)
    assert "db_tx" in oks(out), out


def test_db_socket_uri(pg: Postgres) -> None:
    """A URI with query parameters (a Unix socket): the library appends its own with '&'."""
    out = run_mode("db", f"postgresql:///postgres?host={pg.root}&port={pg.port}&user=postgres")
    assert "db_basic" in oks(out), out


def test_queue(redis: Redis) -> None:
    out = run_mode("queue", redis.url, "127.0.0.1", str(redis.port))
    assert {"queue_stream", "queue_dead", "queue_rate", "queue_heartbeats", "queue_open_errors"} <= oks(out)


def read_until(stream: IO[str], word: str, log: list[str]) -> None:
    for line in stream:
        log.append(line)
        if line.strip() == word:
            return
    raise AssertionError(f"lib_test ended before {word!r}:\n{''.join(log)}")


def test_outage(pg: Postgres, redis: Redis) -> None:
    """Both servers stop under an open connection and come back: calls fail fast, then work."""
    proc = subprocess.Popen(
        [str(LIB_TEST), "outage", pg.conninfo, redis.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    log: list[str] = []
    try:
        read_until(proc.stdout, "up", log)
        pg.stop()
        redis.stop()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        read_until(proc.stdout, "down", log)
        pg.start()
        redis.start()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        rest, _ = proc.communicate(timeout=30)
        log.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(log)
    assert proc.returncode == 0, out
    assert {"outage_down", "outage_again"} <= oks(out), out


def test_gen_errors_names() -> None:
    res = subprocess.run(["sh", str(GEN_ERRORS), "--names", str(ERRORS_TSV)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    rows = [
        line.split("\t") for line in ERRORS_TSV.read_text().splitlines() if line and not line.startswith("#")
    ]
    assert res.stdout.split() == [r[1] for r in rows]
    header = (BUILD / "gen" / "kf_errors.h").read_text()
    for code, name, _, _ in rows:
        assert f"KF_E_{name.upper()} = {code}," in header


def test_gen_errors_rejects_duplicates(tmp_path: Path) -> None:
    tsv = tmp_path / "errors.tsv"
    tsv.write_text("1000\tnot_found\t404\tx\n1000\tagain\t404\ty\n")
    res = subprocess.run(
        ["sh", str(GEN_ERRORS), str(tsv), str(tmp_path / "gen")], capture_output=True, text=True
    )
    assert res.returncode != 0 and "duplicate" in res.stderr
    assert not (tmp_path / "gen" / "kf_errors.h").exists()


def frame_functions(stderr: str) -> list[str]:
    """The functions of the report's frames in lib_test, resolved by addr2line."""
    offsets = re.findall(r"lib_test\(\+(0x[0-9a-f]+)\)", stderr)
    if not offsets:
        return []
    res = subprocess.run(
        ["addr2line", "-f", "-e", str(LIB_TEST), *offsets], capture_output=True, text=True, timeout=30
    )
    return res.stdout.splitlines()[0::2]


@pytest.mark.parametrize("kind,where", [("null", "crash_null"), ("overflow", "crash_overflow")])
def test_crash_report(kind: str, where: str) -> None:
    """A fault leaves its signal and a call stack that addr2line resolves to the faulting
    function, and the process still dies of the signal (exit status, core dump unchanged)."""
    res = subprocess.run([str(LIB_TEST), "crash", kind], capture_output=True, text=True, timeout=60)
    if "AddressSanitizer" in res.stderr:  # a sanitizer build: its own report stands
        assert "SEGV" in res.stderr or "stack-overflow" in res.stderr, res.stderr
        return
    assert res.returncode == -signal.SIGSEGV, (res.returncode, res.stderr)
    assert "lib_test: crashed with SIGSEGV at address 0x" in res.stderr, res.stderr
    assert "end of call stack" in res.stderr, res.stderr
    functions = frame_functions(res.stderr)
    assert where in functions, (functions, res.stderr)
