"""Buffers the judge shares with one subject for a whole timing phase (kforge_harness.windows).

A timed call's inputs and outputs do not travel in messages: each side maps the same buffer once,
at the start of the phase, and every call reuses it. The judge makes every buffer and hands it to
the subject: on cuda a device arena (kforge_harness.devshare) through the subject's device
channel; on the cpu a file in the subject's transfer directory (tmpfs without the jail), which
the subject maps with ``torch.from_file(shared=True)`` (in its folder ``shared/``). The judge never maps a file that a
subject can truncate: it reads and writes those with ``pread`` and ``pwrite`` (a truncated file
is then a short read, an error, never a SIGBUS in the judge).

A ``Layout`` is where each tensor of a value lies in a buffer (offset, dtype, shape), from a
value the judge already holds (the reference's inputs or outputs on the main shape); the subject
gets it in the message and checks every view against its buffer's size.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from kforge_harness import devshare
from kforge_harness.wire import _DTYPES, ChannelError, dtype_name

ALIGN = devshare.ALIGN
# the buffers' files, in a folder of the transfer directory's (framing.clear empties its top level
# between commands)
FOLDER = "shared"


def tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


class Layout:
    """Offsets, dtypes and shapes of a value's tensors in one buffer; ``size`` is the buffer's."""

    def __init__(self, entries: list[tuple[int, torch.dtype, list[int]]]) -> None:
        self.entries = entries
        end = max((o + _nbytes(d, s) for o, d, s in entries), default=0)
        self.size = max(ALIGN, (end + ALIGN - 1) // ALIGN * ALIGN)

    @classmethod
    def of(cls, value: Any) -> Layout:
        entries, off = [], 0
        for t in tensors(value):
            entries.append((off, t.dtype, list(t.shape)))
            off += (t.numel() * t.element_size() + ALIGN - 1) // ALIGN * ALIGN
        return cls(entries)

    def describe(self) -> list[list[Any]]:
        return [[o, dtype_name(d), s] for o, d, s in self.entries]

    @classmethod
    def parse(cls, desc: Any, size: int) -> Layout:
        """A layout from a message, every tensor inside ``size`` bytes; ChannelError otherwise."""
        if not isinstance(desc, list) or len(desc) > 256:
            raise ChannelError("bad layout")
        entries = []
        for e in desc:
            if not (isinstance(e, list) and len(e) == 3 and isinstance(e[0], int) and e[1] in _DTYPES):
                raise ChannelError("bad layout entry")
            shape = e[2]
            if not isinstance(shape, list) or not all(isinstance(s, int) and 0 <= s < 1 << 40 for s in shape):
                raise ChannelError("bad layout shape")
            off, dtype = e[0], _DTYPES[e[1]]
            if off < 0 or off % ALIGN or off + _nbytes(dtype, shape) > size:
                raise ChannelError("layout outside its buffer")
            entries.append((off, dtype, shape))
        return cls(entries)

    def matches(self, value: Any) -> bool:
        ts = tensors(value)
        return len(ts) == len(self.entries) and all(
            type(t) is torch.Tensor and t.dtype == d and list(t.shape) == s
            for t, (_o, d, s) in zip(ts, self.entries)
        )


def template(value: Any, counter: list[int] | None = None) -> Any:
    """``value``'s structure with each tensor replaced by its index among ``tensors(value)``:
    what a subject needs besides the buffer to rebuild the arguments (ints, floats and the like
    travel as they are)."""
    counter = [0] if counter is None else counter
    if isinstance(value, torch.Tensor):
        counter[0] += 1
        return {"t": counter[0] - 1}
    if isinstance(value, (list, tuple)):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {kind: [template(v, counter) for v in value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    raise ChannelError(f"cannot share a value of type {type(value).__name__}")


def rebuild(tpl: Any, views: list[torch.Tensor], depth: int = 0) -> Any:
    """The value that ``template`` described, its tensors taken from ``views``."""
    if depth > 8 or not isinstance(tpl, dict) or len(tpl) != 1:
        raise ChannelError("bad template")
    ((kind, body),) = tpl.items()
    if kind == "t":
        if not isinstance(body, int) or not 0 <= body < len(views):
            raise ChannelError("bad template tensor")
        return views[body]
    if kind in ("list", "tuple"):
        if not isinstance(body, list) or len(body) > 256:
            raise ChannelError("bad template sequence")
        items = [rebuild(b, views, depth + 1) for b in body]
        return tuple(items) if kind == "tuple" else items
    if kind == "v" and (body is None or isinstance(body, (bool, int, float, str))):
        return body
    raise ChannelError("bad template")


def _nbytes(dtype: torch.dtype, shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n * torch.empty((), dtype=dtype).element_size()


class Buffer:
    """The judge's side of one shared buffer. ``kind`` is ``arena`` (device memory mapped here
    too) or ``file`` (a file in the subject's transfer directory, read and written by offset
    through the descriptor the judge made it with: never opened again by its path, which the
    subject could have replaced with a link or a FIFO)."""

    def __init__(self, kind: str, size: int, arena: Any = None, fd: int = -1) -> None:
        self.kind, self.size, self.arena, self.fd = kind, size, arena, fd

    @classmethod
    def make(
        cls, transport: Any, name: str, size: int, arenas: list[dict[str, int]]
    ) -> tuple[Buffer, dict[str, Any]]:
        """A buffer of ``size`` bytes for the subject behind ``transport`` and its description
        for the message (an arena's descriptor goes ahead on the device channel and is listed in
        ``arenas``, as kforge_harness.transport does)."""
        if transport.sock is not None:
            arena = devshare.Arena.create(size)
            transport.token += 1
            devshare.send_fd(transport.sock, transport.token, arena.size, arena.fd)
            arenas.append({"token": transport.token, "size": arena.size})
            return cls("arena", arena.size, arena=arena), {"arena": len(arenas) - 1, "size": arena.size}
        os.makedirs(os.path.join(transport.xfer, FOLDER), exist_ok=True)
        path = os.path.join(transport.xfer, FOLDER, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return cls("file", size, fd=fd), {"file": name, "size": size}

    def view(self, layout: Layout, device: torch.device) -> list[torch.Tensor]:
        """The layout's tensors: views of an arena; copies read from a file (on ``device``)."""
        if self.kind == "arena":
            mem = self.arena.bytes()
            return [devshare.view(mem, o, d, s) for o, d, s in layout.entries]
        out = []
        for o, d, s in layout.entries:
            n = _nbytes(d, s)
            data = os.pread(self.fd, n, o)
            if len(data) != n:
                raise ChannelError("a shared file was cut short")
            t = (
                torch.frombuffer(bytearray(data), dtype=torch.uint8)
                if n
                else torch.empty(0, dtype=torch.uint8)
            )
            out.append(t.view(d).view(s).to(device))
        return out

    def write(self, layout: Layout, values: list[torch.Tensor]) -> None:
        """Writes ``values`` at the layout's places (a device copy into an arena)."""
        if self.kind == "arena":
            for dst, src in zip(self.view(layout, torch.device("cuda")), values):
                dst.copy_(src)
            return
        for (o, _d, _s), v in zip(layout.entries, values):
            data = v.detach().contiguous().cpu().view(-1).view(torch.uint8).numpy().tobytes()
            os.pwrite(self.fd, data, o)

    def copy_from(self, other: Buffer, nbytes: int) -> None:
        """The first ``nbytes`` of ``other`` into this buffer: a device copy between arenas,
        else through the judge's memory."""
        if self.kind == "arena" and other.kind == "arena":
            self.arena.bytes()[:nbytes].copy_(other.arena.bytes()[:nbytes])
            return
        if other.kind == "arena":
            data = other.arena.bytes()[:nbytes].cpu().numpy().tobytes()
        else:
            data = os.pread(other.fd, nbytes, 0)
            if len(data) != nbytes:
                raise ChannelError("a shared file was cut short")
        if self.kind == "arena":
            self.arena.bytes()[:nbytes].copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
            return
        os.pwrite(self.fd, data, 0)

    def probe(self) -> None:
        """Reads a byte of an arena in the judge's own CUDA context and waits for it. The GPU
        runs one context at a time: while the subject's context holds it (until its queued work
        ends, or its time slice does) the read waits, so a window that ends with the probe holds
        the device work the subject left running."""
        if self.kind == "arena":
            self.arena.bytes()[:1].cpu()

    def close(self) -> None:
        if self.arena is not None:
            self.arena.close()
            self.arena = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Mapped:
    """The subject's side of one buffer, mapped for the whole phase."""

    def __init__(self, mem: torch.Tensor, keep: Any = None) -> None:
        self.mem = mem
        self.keep = keep  # the arena, for closing

    @classmethod
    def open(cls, desc: Any, transport: Any, fds: list[Any]) -> Mapped:
        """The buffer that ``desc`` (from Buffer.make) describes: an arena among ``fds`` (opened
        from the message's ``arenas``), or a file of the transfer directory."""
        if not isinstance(desc, dict) or not isinstance(desc.get("size"), int) or desc["size"] <= 0:
            raise ChannelError("bad buffer description")
        if "arena" in desc:
            k = desc["arena"]
            if not isinstance(k, int) or not 0 <= k < len(fds) or fds[k].size < desc["size"]:
                raise ChannelError("bad arena reference")
            return cls(fds[k].bytes()[: desc["size"]], fds[k])
        name = desc.get("file")
        if not isinstance(name, str) or "/" in name or name.startswith("."):
            raise ChannelError("bad buffer file")
        path = os.path.join(transport.xfer, FOLDER, name)
        if os.path.getsize(path) < desc["size"]:
            raise ChannelError("buffer file shorter than said")
        return cls(torch.from_file(path, shared=True, size=desc["size"], dtype=torch.uint8))

    def views(self, layout: Layout) -> list[torch.Tensor]:
        return [devshare.view(self.mem, o, d, s) for o, d, s in layout.entries]

    def close(self) -> None:
        self.mem = torch.empty(0, dtype=torch.uint8)
        if self.keep is not None:
            self.keep.close()
            self.keep = None
