"""The local stack of `kforge up` is locked down (docs/security.md, "Services and secrets"), and
`kforge status` / `kforge up` notice and restart what died.

One stack for the module (`kforge up --cpu` in a folder under /tmp, which PostgreSQL's own user
can reach); the tests run in file order: the last ones kill parts of it and convert it back from
an older kforge's var/.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from servicekit import CLI, PG_BIN, ROOT, wait_until

PSQL = shutil.which("psql") or str(PG_BIN / "psql")


class LocalStack:
    """`kforge up --cpu --port 0` in var, and the files it wrote."""

    def __init__(self, var: Path) -> None:
        self.var = var
        # the programs read no KFORGE_* of the test run's environment: only what `up` gives them
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KFORGE_")}
        self.up_out = self.cli("up", "--var", str(var), "--port", "0", "--cpu", check=True)

    def cli(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(
            [str(CLI), *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=180
        )
        if check:
            assert p.returncode == 0, f"kforge {' '.join(args)} exited {p.returncode}:\n{p.stdout}{p.stderr}"
        return p

    def up(self) -> subprocess.CompletedProcess[str]:
        return self.cli("up", "--var", str(self.var), check=True)

    def status(self) -> subprocess.CompletedProcess[str]:
        return self.cli("status", "--var", str(self.var))

    def stack_env(self) -> dict[str, str]:
        lines = (self.var / "stack.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def pg_password(self) -> str:
        return (self.var / "secrets" / "pgpass").read_text().strip().rsplit(":", 1)[1]

    def redis_password(self) -> str:
        return (self.var / "secrets" / "redis-password").read_text().strip()

    def redis_port(self) -> int:
        url = self.stack_env()["KFORGE_REDIS_URL"]  # redis://127.0.0.1:PORT?password_file=...
        return int(url.split("127.0.0.1:", 1)[1].split("?", 1)[0])

    def pid(self, name: str) -> int:
        return int((self.var / "run" / f"{name}.pid").read_text())

    def log_files(self) -> list[Path]:
        return sorted((self.var / "log").glob("*.log"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child of `kforge up` is a zombie until init reaps it
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def psql(
    dsn: str, sql: str, env: dict[str, str], user: str | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [PSQL, dsn, "-X", "-w", "-At", "-c", sql]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)


def redis_lines(port: int, *commands: str, host: str = "127.0.0.1") -> list[str]:
    """Each command in the inline protocol on one connection; the first line of each reply."""
    with socket.create_connection((host, port), timeout=5) as s:
        f = s.makefile("rb")
        out = []
        for c in commands:
            s.sendall((c + "\r\n").encode())
            out.append(f.readline().decode().strip())
        return out


def listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp{,6} writes them) listening on port."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.rsplit(":", 1)
            if state == "0A" and int(hexport, 16) == port:
                found.append(addr)
    return found


def outside_address() -> str | None:
    """An address of this host that is not loopback, or None (no route out)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet leaves for a UDP connect
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


@pytest.fixture(scope="module")
def local() -> Iterator[LocalStack]:
    if os.geteuid() != 0:
        pytest.skip("needs root: PostgreSQL runs as its own user, and another uid tries the socket")
    # under /tmp itself: PostgreSQL's user must pass through every folder above var/
    var = Path(tempfile.mkdtemp(prefix="kforge-sec-"))
    s = LocalStack(var)
    yield s
    down = s.cli("down", "--var", str(var))
    assert down.returncode == 0, down.stderr
    shutil.rmtree(var, ignore_errors=True)


def test_postgres_socket_is_closed_to_other_users(local: LocalStack) -> None:
    sock_dir = local.var / "run" / "pg"
    st = sock_dir.stat()
    assert st.st_mode & 0o777 == 0o700, oct(st.st_mode)
    assert st.st_uid == pwd.getpwnam("postgres").pw_uid
    sockets = list(sock_dir.glob(".s.PGSQL.*[0-9]"))
    assert len(sockets) == 1 and sockets[0].stat().st_mode & 0o077 == 0, sockets
    dsn = local.stack_env()["KFORGE_DATABASE_URL"]
    p = psql(dsn, "SELECT 1", local.env, user="nobody")
    assert p.returncode != 0, p.stdout
    assert "Permission denied" in p.stderr, p.stderr
    # and no TCP: the socket is the only way in
    p = psql(dsn, "SHOW listen_addresses", local.env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "", p.stdout


def test_postgres_asks_for_the_password(local: LocalStack) -> None:
    dsn = local.stack_env()["KFORGE_DATABASE_URL"]
    assert local.pg_password() not in dsn
    no_file = dsn.split("&passfile=", 1)[0]
    env = {**local.env, "PGPASSFILE": "/nonexistent"}
    p = psql(no_file, "SELECT 1", env)
    assert p.returncode != 0 and "no password supplied" in p.stderr, (p.returncode, p.stderr)
    p = psql(no_file, "SELECT 1", {**env, "PGPASSWORD": "not-" + local.pg_password()})
    assert p.returncode != 0 and "password authentication failed" in p.stderr, p.stderr
    p = psql(dsn, "SELECT current_user", local.env)  # the stack's own URL: its password file
    assert p.returncode == 0 and p.stdout.strip() == "kforge", p.stderr


def test_redis_asks_for_the_password(local: LocalStack) -> None:
    port = local.redis_port()
    assert local.redis_password() not in local.stack_env()["KFORGE_REDIS_URL"]
    no_auth, wrong = redis_lines(port, "PING", "AUTH not-the-password")
    assert no_auth.startswith("-NOAUTH"), no_auth
    assert wrong.startswith("-WRONGPASS"), wrong
    assert redis_lines(port, f"AUTH {local.redis_password()}", "PING") == ["+OK", "+PONG"]


def test_redis_listens_on_loopback_only(local: LocalStack) -> None:
    port = local.redis_port()
    assert listening(port) == ["0100007F"], listening(port)  # 127.0.0.1, no IPv6, no 0.0.0.0
    addr = outside_address()
    if addr is not None:
        with pytest.raises(OSError):
            redis_lines(port, "PING", host=addr)


def test_secrets_are_the_service_users_alone(local: LocalStack) -> None:
    var = local.var
    assert var.stat().st_mode & 0o066 == 0, oct(var.stat().st_mode)  # nobody else lists it
    for d in (var / "secrets", var / "redis", var / "pg"):
        assert d.stat().st_mode & 0o777 == 0o700, (d, oct(d.stat().st_mode))
    files = [var / "api-key", var / "stack.env", *(var / "secrets").iterdir(), *local.log_files()]
    assert {f.name for f in (var / "secrets").iterdir()} >= {"pgpass", "redis-password", "redis.conf"}
    for f in files:
        st = f.stat()
        assert st.st_mode & 0o777 == 0o600, (f, oct(st.st_mode))
        assert st.st_uid == os.geteuid() or f.name == "postgres.log", (f, st.st_uid)


def test_passwords_reach_no_command_line_environment_or_log(local: LocalStack) -> None:
    secrets = [local.pg_password(), local.redis_password(), (local.var / "api-key").read_text().strip()]
    assert all(len(s) >= 32 for s in secrets), secrets
    programs = [local.pid("server"), local.pid("worker-cpu"), local.pid("redis")]
    programs.append(int((local.var / "pg" / "postmaster.pid").read_text().split()[0]))
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes().decode("utf-8", "replace")
            environ = (
                (d / "environ").read_bytes().decode("utf-8", "replace") if int(d.name) in programs else ""
            )
        except OSError:
            continue
        for s in secrets[:2]:
            assert s not in cmdline, f"a password in the command line of pid {d.name}"
            assert s not in environ, f"a password in the environment of pid {d.name}"
    for f in [local.var / "stack.env", *local.log_files()]:
        text = f.read_text(errors="replace")
        assert not any(s in text for s in secrets), f"a secret in {f}"


def test_status_fails_when_the_worker_dies_and_up_restarts_it(local: LocalStack) -> None:
    p = local.status()  # `kforge up` returned once the worker's heartbeat came
    assert p.returncode == 0, p.stdout
    old = local.pid("worker-cpu")
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not alive(old), 10, f"worker {old} to die")
    p = local.status()
    assert p.returncode == 1, p.stdout
    assert f"not ready: worker-cpu (pid {old}) is not running" in p.stdout, p.stdout
    url = local.stack_env()["KFORGE_URL"]
    p = local.up()
    assert p.stdout.strip() == url, p.stdout  # the running server is kept, on its URL
    assert "worker-cpu" in p.stderr and "starting it" in p.stderr, p.stderr
    new = local.pid("worker-cpu")
    assert new != old and alive(new)
    p = local.status()
    assert p.returncode == 0, p.stdout


def test_up_restarts_a_dead_server_redis_and_postgres(local: LocalStack) -> None:
    url, port = local.stack_env()["KFORGE_URL"], local.redis_port()
    pg = int((local.var / "pg" / "postmaster.pid").read_text().split()[0])
    dead = [local.pid("server"), local.pid("redis"), pg]
    for pid in dead:
        os.kill(pid, signal.SIGKILL)
    for pid in dead:
        wait_until(lambda pid=pid: not alive(pid), 10, f"pid {pid} to die")
    p = local.status()
    assert p.returncode == 1 and "not ready: the server does not answer" in p.stdout, p.stdout
    p = local.up()
    assert p.stdout.strip() == url, (p.stdout, p.stderr)
    for what in ("PostgreSQL was not running", "Redis was not running", "kforge-server"):
        assert what in p.stderr, p.stderr
    assert local.redis_port() == port
    assert redis_lines(port, "PING")[0].startswith("-NOAUTH")  # the new Redis has its password too
    p = local.status()
    assert p.returncode == 0, p.stdout


def test_up_locks_down_an_older_var(local: LocalStack) -> None:
    """A var/ of an older kforge: trust rules, no secrets/, world-readable files, run/ owned by
    postgres. `kforge up` converts it: the same API key, a password for every connection."""
    var = local.var
    key = (var / "api-key").read_text().strip()
    assert local.cli("down", "--var", str(var)).returncode == 0
    hba = var / "pg" / "pg_hba.conf"
    hba.write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
    shutil.rmtree(var / "secrets")
    shutil.chown(var / "run", "postgres", "postgres")
    for p, mode in ((var, 0o755), (var / "run", 0o755), (var / "api-key", 0o644), (var / "stack.env", 0o644)):
        p.chmod(mode)
    p = local.up()
    assert "older kforge" in p.stderr, p.stderr
    assert (var / "api-key").read_text().strip() == key
    assert (var / "run").stat().st_uid == os.geteuid()
    for f in (var / "api-key", var / "stack.env", var / "secrets" / "pgpass"):
        assert f.stat().st_mode & 0o777 == 0o600, (f, oct(f.stat().st_mode))
    assert hba.read_text().startswith("# kforge up")
    dsn = local.stack_env()["KFORGE_DATABASE_URL"]
    p = psql(dsn.split("&passfile=", 1)[0], "SELECT 1", {**local.env, "PGPASSFILE": "/nonexistent"})
    assert p.returncode != 0 and "no password supplied" in p.stderr, p.stderr
    assert psql(dsn, "SELECT 1", local.env).stdout.strip() == "1"
    p = local.status()
    assert p.returncode == 0, p.stdout
