"""The channel's framing: JSON messages over a pipe, and its errors (kforge_harness.wire adds
the tensors). Free of PyTorch, so the judge can start its runner before importing it.

A message is a 4-byte big-endian length and a UTF-8 JSON object. Every message carries ``seq``,
which must match the request's, so that stray or forged writes desynchronise the channel and
are detected.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import sys
import time
from typing import Any, Callable, NoReturn

MAX_MESSAGE = 64 << 20

# Bound at import, before any candidate code runs in the runner: patching json or os later
# does not change what this module sends or reads.
_dumps = json.dumps
_loads = json.loads
_write = os.write
_read = os.read
_select = select.select
_pack = struct.pack
_unpack = struct.unpack
_exit = os._exit


class ChannelError(Exception):
    """The peer broke the protocol: closed, timed out, or sent something malformed."""


class ChannelTimeout(ChannelError):
    """No complete message arrived in time."""


class ChannelTampered(ChannelError):
    """The peer sent something malformed or out of sequence: a forged message."""


class ChannelClosed(ChannelError):
    """The peer closed its end: it exited or died."""


def send(fd: int, msg: dict[str, Any]) -> None:
    data = _dumps(msg, allow_nan=True).encode()
    buf = _pack(">I", len(data)) + data
    view = memoryview(buf)
    while view:
        n = _write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks = []
    while n > 0:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("timed out waiting for the peer")
            ready, _, _ = _select([fd], [], [], left)
            if not ready:
                raise ChannelTimeout("timed out waiting for the peer")
        chunk = _read(fd, min(n, 1 << 20))
        if not chunk:
            raise ChannelClosed("the peer closed the channel")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(fd: int, timeout: float | None = None) -> dict[str, Any]:
    deadline = None if timeout is None else time.monotonic() + timeout
    (size,) = _unpack(">I", _read_exact(fd, 4, deadline))
    if size > MAX_MESSAGE:
        raise ChannelError(f"message of {size} bytes is too large")
    try:
        msg = _loads(_read_exact(fd, size, deadline))
    except (ValueError, UnicodeDecodeError) as e:
        raise ChannelError(f"malformed message: {e}") from e
    if not isinstance(msg, dict):
        raise ChannelError("message is not an object")
    return msg


def clear(xfer_dir: str) -> None:
    """Removes every tensor file left in the transfer directory (the channel's FIFOs stay)."""
    for name in os.listdir(xfer_dir):
        if name.endswith(".fifo"):
            continue
        try:
            os.unlink(os.path.join(xfer_dir, name))
        except OSError:
            pass


def quit_now() -> NoReturn:
    """Ends a runner at once: the judge has what it needs, and an interpreter's orderly teardown
    with PyTorch loaded costs a second or more of every evaluation's wall time."""
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(0)


def serve(cmd_fd: int, reply_fd: int, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> NoReturn:
    """A runner's command loop (the candidate's and the task's): answers each command with
    ``answer(msg)``, echoing its ``seq`` and ``nonce``, until the channel closes or ``exit``
    comes, then quits."""
    while True:
        try:
            msg = recv(cmd_fd)
        except ChannelError:
            quit_now()
        if msg.get("cmd") == "exit":
            quit_now()
        reply = answer(msg)
        reply["seq"] = msg.get("seq")
        reply["nonce"] = msg.get("nonce")
        send(reply_fd, reply)


def connect_unix(path: str | None) -> socket.socket | None:
    """A runner's end of the device channel: the judge's Unix socket at ``path``, or None when
    there is none or it cannot be reached."""
    if not path:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock
