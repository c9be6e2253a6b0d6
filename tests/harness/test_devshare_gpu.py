"""kforge_harness.devshare on a GPU: an arena made in one process, mapped in another through its
descriptor, holds the same bytes both ways; bad descriptors are refused."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "workers" / "harness"

pytestmark = pytest.mark.gpu

CHILD = textwrap.dedent(
    """
    import socket, sys, torch
    from kforge_harness import devshare
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    torch.empty(1, device="cuda")
    fd, size = devshare.recv_fd(sock, 7, 60)
    a = devshare.Arena.open(fd, size)
    got = devshare.view(a.bytes(), 0, torch.float32, [1024, 1024])
    print(float(got.double().sum()), flush=True)
    # write back through an arena of our own
    b = devshare.Arena.create(size)
    devshare.view(b.bytes(), 0, torch.float32, [1024, 1024]).copy_(got * 2)
    torch.cuda.synchronize()
    devshare.send_fd(sock, 8, b.size, b.fd)
    sock.recv(1)  # the parent has copied it
    a.close(); b.close()
    """
)


def test_arena_crosses_processes(tmp_path):
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(HARNESS))
    from kforge_harness import devshare

    assert devshare.available()
    path = str(tmp_path / "dev.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    env = dict(os.environ, PYTHONPATH=str(HARNESS))
    child = subprocess.Popen([sys.executable, "-c", CHILD, path], env=env, stdout=subprocess.PIPE, text=True)
    conn, _ = listener.accept()
    x = torch.randn(1024, 1024, device="cuda")
    a = devshare.Arena.create(x.numel() * 4)
    devshare.view(a.bytes(), 0, torch.float32, [1024, 1024]).copy_(x)
    torch.cuda.synchronize()
    devshare.send_fd(conn, 7, a.size, a.fd)
    fd, size = devshare.recv_fd(conn, 8, 60)
    b = devshare.Arena.open(fd, size)
    back = devshare.view(b.bytes(), 0, torch.float32, [1024, 1024]).clone()
    conn.send(b"x")
    printed = float(child.stdout.readline())
    assert child.wait(timeout=60) == 0
    assert abs(printed - float(x.double().sum())) <= 1e-6 * float(x.abs().double().sum())
    assert torch.equal(back, x * 2)
    a.close()
    b.close()


def test_foreign_descriptor_is_refused(tmp_path):
    pytest.importorskip("torch")
    sys.path.insert(0, str(HARNESS))
    from kforge_harness import devshare

    assert devshare.available()
    f = tmp_path / "plain"
    f.write_bytes(b"\0" * 4096)
    fd = os.open(f, os.O_RDONLY)
    with pytest.raises(devshare.DevShareError):
        devshare.Arena.open(fd, 2 << 20)  # a plain file is not an allocation
    with pytest.raises(devshare.DevShareError):
        devshare.Arena.open(os.open(f, os.O_RDONLY), 0)  # nor is a size of 0
