"""The channel between judge and runner: JSON messages over a pipe (kforge_harness.framing),
tensors through files.

Tensors travel as raw little-endian bytes in files under a transfer directory
(tmpfs when the host has one), described in the message by ``{"file", "dtype", "shape"}``:
nothing is unpickled, so the judge never runs code that the runner sent.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from kforge_harness.framing import (  # noqa: F401 - the channel's names, re-exported
    MAX_MESSAGE,
    ChannelClosed,
    ChannelError,
    ChannelTampered,
    ChannelTimeout,
    clear,
    connect_unix,
    quit_now,
    recv,
    send,
    serve,
)

_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    name = _NAMES.get(dtype)
    if name is None:
        raise ValueError(f"unsupported dtype {dtype}")
    return name


def put_tensor(xfer_dir: str, name: str, t: torch.Tensor) -> dict[str, Any]:
    """Writes ``t`` (any device) to ``xfer_dir/name`` through a shared mapping of the file, so a
    device tensor is copied once, straight into the page cache. Returns its descriptor."""
    path = os.path.join(xfer_dir, name)
    src = t.detach()
    numel = src.numel()
    with open(path, "wb") as f:
        f.truncate(numel * src.element_size())
    if numel:
        mapped = torch.from_file(path, shared=True, size=numel, dtype=src.dtype)
        mapped.copy_(src.reshape(-1))
        del mapped
    return {"file": name, "dtype": dtype_name(src.dtype), "shape": list(src.shape)}


def get_tensor(
    xfer_dir: str, desc: Any, max_bytes: int | None = None, device: torch.device | None = None
) -> torch.Tensor:
    """Reads a tensor described by ``desc`` onto ``device`` (a private copy on the CPU by
    default) and removes its file. Raises ChannelError on anything malformed."""
    if not isinstance(desc, dict):
        raise ChannelError("tensor descriptor is not an object")
    name, dtype, shape = desc.get("file"), desc.get("dtype"), desc.get("shape")
    if not isinstance(name, str) or "/" in name or name.startswith(".") or not name:
        raise ChannelError("bad tensor file name")
    if dtype not in _DTYPES:
        raise ChannelError(f"bad dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(s, int) and 0 <= s < 1 << 40 for s in shape):
        raise ChannelError("bad shape")
    tdtype = _DTYPES[dtype]
    numel = 1
    for s in shape:
        numel *= s
    nbytes = numel * torch.empty((), dtype=tdtype).element_size()
    if max_bytes is not None and nbytes > max_bytes:
        raise ChannelError(f"tensor of {nbytes} bytes exceeds the limit of {max_bytes}")
    path = os.path.join(xfer_dir, name)
    try:
        if os.path.getsize(path) != nbytes:
            raise ChannelError("tensor file has the wrong size")
    except OSError as e:
        raise ChannelError(f"tensor file missing: {e}") from e
    target = device or torch.device("cpu")
    if numel == 0:
        out = torch.empty(shape, dtype=tdtype, device=target)
    else:
        mapped = torch.from_file(path, shared=True, size=numel, dtype=tdtype)
        out = torch.empty(shape, dtype=tdtype, device=target)
        out.view(-1).copy_(mapped)
        del mapped
    try:
        os.unlink(path)
    except OSError:
        pass
    return out


def encode_value(xfer_dir: str, prefix: str, value: Any, counter: list[int]) -> Any:
    """Encodes a nest of tensors, numbers, strings, lists and tuples for the wire."""
    if isinstance(value, torch.Tensor):
        counter[0] += 1
        return {"tensor": put_tensor(xfer_dir, f"{prefix}{counter[0]}.bin", value)}
    if isinstance(value, (list, tuple)):
        items = [encode_value(xfer_dir, prefix, v, counter) for v in value]
        return {"tuple": items} if isinstance(value, tuple) else {"list": items}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise ValueError(f"cannot send a value of type {type(value).__name__}")


def decode_value(
    xfer_dir: str, enc: Any, max_bytes: int | None = None, device: torch.device | None = None
) -> Any:
    """Decodes what ``encode_value`` made, tensors onto ``device``; their files are removed."""
    if not isinstance(enc, dict) or len(enc) != 1:
        raise ChannelError("bad value encoding")
    ((kind, body),) = enc.items()
    if kind == "tensor":
        return get_tensor(xfer_dir, body, max_bytes, device)
    if kind in ("list", "tuple"):
        if not isinstance(body, list):
            raise ChannelError("bad sequence encoding")
        items = [decode_value(xfer_dir, v, max_bytes, device) for v in body]
        return tuple(items) if kind == "tuple" else items
    if kind == "value":
        if body is None or isinstance(body, (bool, int, float, str)):
            return body
    raise ChannelError("bad value encoding")
