"""The channel's tensors on the cuda backend: device arenas beside the files of kforge_harness.wire.

``Transport`` is what the judge and the runner use to encode and decode the tensors of a message:
with a Unix socket (kforge_harness.devshare) device tensors travel in one shared arena per
encoded value and never leave the GPU; without one, or when an arena cannot be made, they go
through files as before. The message carries ``"arenas"``: the token and size of each
descriptor sent ahead of it on the socket, in order.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

from kforge_harness.shared import tensors
from kforge_harness.wire import (
    _DTYPES,
    ChannelError,
    ChannelTampered,
    decode_value,
    dtype_name,
    encode_value,
)


class Transport:
    """How one side of the channel moves tensors: files in the transfer directory, or, with
    ``sock`` (the Unix socket of kforge_harness.devshare), device tensors through one shared
    arena per encoded value. Arenas this side sent stay alive until ``release()`` (call it once
    the peer has answered: it has copied them by then); arenas received are copied out and
    unmapped inside ``decode``."""

    def __init__(self, xfer_dir: str, sock: Any = None, timeout: float = 60.0) -> None:
        self.xfer = xfer_dir
        self.sock = sock
        self.timeout = timeout
        self.sent: list[Any] = []
        self.token = int.from_bytes(os.urandom(6), "little") << 8

    def encode(self, prefix: str, value: Any, counter: list[int], arenas: list[dict[str, int]]) -> Any:
        """Encodes ``value``; a description of any arena it used is appended to ``arenas`` (put
        that list in the message as ``"arenas"``) and its descriptor is already sent."""
        devs = [t for t in tensors(value) if t.is_cuda] if self.sock is not None else []
        if not devs:
            return encode_value(self.xfer, prefix, value, counter)
        from kforge_harness import devshare

        offsets, size = devshare.layout(devs)
        try:
            arena = devshare.Arena.create(size)
        except devshare.DevShareError:
            return encode_value(self.xfer, prefix, value, counter)  # out of device memory: files
        self.sent.append(arena)
        mem = arena.bytes()
        where: dict[int, dict[str, Any]] = {}
        for t, off in zip(devs, offsets):
            src = t.detach()
            devshare.view(mem, off, src.dtype, list(src.shape)).copy_(src)
            where[id(t)] = {
                "arena": len(arenas),
                "offset": off,
                "dtype": dtype_name(src.dtype),
                "shape": list(src.shape),
            }
        torch.cuda.synchronize()  # the copies are done before the peer reads
        self.token += 1
        devshare.send_fd(self.sock, self.token, arena.size, arena.fd)
        arenas.append({"token": self.token, "size": arena.size})
        return _encode_with(self.xfer, prefix, value, counter, where)

    def release(self) -> None:
        for arena in self.sent:
            arena.close()
        self.sent.clear()

    def decode_all(
        self,
        msg: dict[str, Any],
        encs: list[Any],
        max_bytes: int | None = None,
        device: torch.device | None = None,
    ) -> list[Any]:
        """Decodes the values ``encs`` of ``msg``, whose ``"arenas"`` say which descriptors to
        expect on the socket; device tensors come out as private copies."""
        mapped = self.open_arenas(msg.get("arenas"), max_bytes)
        try:
            views = [a.bytes() for a in mapped]
            return [_decode_with(self.xfer, e, max_bytes, device, views) for e in encs]
        finally:
            for a in mapped:
                a.close()

    def discard(self, msg: dict[str, Any], max_bytes: int | None = None) -> None:
        """Takes the descriptors of ``msg``'s arenas off the socket and closes them unread: a
        reply whose values are not wanted (the reference was not finite) still sent them, and
        the next reply's would otherwise come out of sequence."""
        for a in self.open_arenas(msg.get("arenas"), max_bytes):
            a.close()

    def open_arenas(self, arenas: Any, max_bytes: int | None = None) -> list[Any]:
        if arenas is None or arenas == []:
            return []
        if self.sock is None or not isinstance(arenas, list) or len(arenas) > 8:
            raise ChannelTampered("unexpected arenas")
        from kforge_harness import devshare

        out: list[Any] = []
        try:
            for a in arenas:
                if (
                    not isinstance(a, dict)
                    or not isinstance(a.get("token"), int)
                    or not isinstance(a.get("size"), int)
                ):
                    raise ChannelTampered("bad arena description")
                if max_bytes is not None and a["size"] > max_bytes + (2 << 20):
                    raise ChannelTampered(f"arena of {a['size']} bytes exceeds the limit")
                fd, size = devshare.recv_fd(self.sock, a["token"], self.timeout)
                if size != a["size"]:
                    os.close(fd)
                    raise ChannelTampered("arena size disagrees with its descriptor")
                out.append(devshare.Arena.open(fd, size))
        except devshare.DevShareError as e:
            for m in out:
                m.close()
            raise ChannelTampered(str(e)) from e
        except ChannelError:
            for m in out:
                m.close()
            raise
        return out


def answer_devprobe(transport: Transport, msg: dict[str, Any]) -> dict[str, Any]:
    """The peer's side of ``connect_devshare``: imports the judge's probe arena and checks its
    bytes. No probe: the judge has no arenas. Either way a failed probe drops the socket, and
    tensors go through files from then on."""
    if msg.get("probe") is None:
        transport.sock = None
        return {"dev": False}
    from kforge_harness import devshare

    try:
        (probe,) = transport.decode_all(msg, [msg["probe"]])
        ok = probe.is_cuda and int(probe.sum()) == msg.get("sum")
    except (ChannelError, devshare.DevShareError, RuntimeError, OSError) as e:
        transport.sock = None
        return {"dev": False, "error": f"{type(e).__name__}: {e}"}
    if not ok:
        transport.sock = None
    return {"dev": bool(ok)}


def connect_devshare(
    transport: Transport, conn: Any, token: int, request: Callable[[dict[str, Any]], dict[str, Any]]
) -> str:
    """The judge's side of the device channel with a peer (a runner) whose connection is
    ``conn``: proves it with a probe arena, through ``request`` (one round trip on the command
    channel). Returns what the verdict says of the transfer: ``"device"``, or ``"files (why)"``,
    in which case ``transport.sock`` is None and ``conn`` is closed."""
    from kforge_harness import devshare

    transport.sock = conn
    if not devshare.available():
        # no arenas in this process: the peer is told to drop its end of the channel
        request({"cmd": "devprobe", "probe": None, "arenas": []})
        transport.sock = None
        conn.close()
        return "files (no device arenas in the judge)"
    probe = devshare.probe_tensor(token)
    arenas: list[dict[str, int]] = []
    enc = transport.encode("probe_", probe.cuda(), [0], arenas)
    reply = request({"cmd": "devprobe", "probe": enc, "arenas": arenas, "sum": int(probe.sum())})
    if reply.get("dev") is True and arenas:
        return "device"
    transport.sock = None
    conn.close()
    return f"files ({str(reply.get('error', 'device probe failed'))[:200]})"


def _encode_with(xfer_dir: str, prefix: str, value: Any, counter: list[int], where: dict[int, Any]) -> Any:
    if isinstance(value, torch.Tensor) and id(value) in where:
        return {"dev": where[id(value)]}
    if isinstance(value, (list, tuple)):
        items = [_encode_with(xfer_dir, prefix, v, counter, where) for v in value]
        return {"tuple": items} if isinstance(value, tuple) else {"list": items}
    return encode_value(xfer_dir, prefix, value, counter)


def _decode_with(
    xfer_dir: str, enc: Any, max_bytes: int | None, device: torch.device | None, arenas: list[torch.Tensor]
) -> Any:
    if isinstance(enc, dict) and len(enc) == 1 and "dev" in enc:
        from kforge_harness import devshare

        d = enc["dev"]
        if not isinstance(d, dict):
            raise ChannelError("bad device tensor descriptor")
        k, off, dtype, shape = d.get("arena"), d.get("offset"), d.get("dtype"), d.get("shape")
        if not isinstance(k, int) or not 0 <= k < len(arenas) or not isinstance(off, int):
            raise ChannelError("bad device tensor descriptor")
        if dtype not in _DTYPES:
            raise ChannelError(f"bad dtype {dtype!r}")
        if not isinstance(shape, list) or not all(isinstance(s, int) and 0 <= s < 1 << 40 for s in shape):
            raise ChannelError("bad shape")
        try:
            src = devshare.view(arenas[k], off, _DTYPES[dtype], shape)
        except (devshare.DevShareError, RuntimeError) as e:
            raise ChannelError(f"bad device tensor: {e}") from e
        if max_bytes is not None and src.numel() * src.element_size() > max_bytes:
            raise ChannelError("tensor exceeds the limit")
        return src.to(device or src.device, copy=True)  # a private copy: the arena is unmapped next
    if isinstance(enc, dict) and len(enc) == 1 and ("list" in enc or "tuple" in enc):
        ((kind, body),) = enc.items()
        if not isinstance(body, list):
            raise ChannelError("bad sequence encoding")
        items = [_decode_with(xfer_dir, v, max_bytes, device, arenas) for v in body]
        return tuple(items) if kind == "tuple" else items
    return decode_value(xfer_dir, enc, max_bytes, device)
