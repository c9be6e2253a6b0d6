"""Device memory shared between the judge and the runner, passed as a file descriptor.

On the cuda backend the channel's tensors are hundreds of MB to GB (an elementwise task sized
for an H200 moves 3 GiB in and 3 GiB out per call). Through files they cross the host twice
each way; here they never leave the GPU. The sender allocates an *arena* with the CUDA driver's
virtual memory API (``cuMemCreate`` with a POSIX file-descriptor handle), copies the tensors
into it, and passes the descriptor over a Unix socket (SCM_RIGHTS) beside the command FIFOs;
the receiver imports it, maps it, and copies every tensor out into memory of its own before
using it. So:

* an arena holds only what was sent: never another tensor of the sender's (PyTorch's own IPC
  shares whole cached blocks, which may hold the judge's reference outputs);
* what the runner can reach of the judge's memory is the inputs it was sent anyway, and the
  judge compares only its own copies of the runner's outputs, taken when the reply came;
* a descriptor crosses the jail's PID, IPC and network namespaces (legacy CUDA IPC handles
  need a shared PID namespace), and nothing is mapped without the driver validating it.

Everything here is ctypes over ``libcuda.so.1``; ``available()`` says whether the driver has
what is needed, and the judge falls back to files when it does not or when the runner cannot
import a probe arena.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct

import torch

# CUDA driver enums (cuda.h)
_ALLOC_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_LOC_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_HANDLE_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_ACCESS_RW = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_GRANULARITY_MIN = 0  # CU_MEM_ALLOC_GRANULARITY_MINIMUM

ALIGN = 256  # every tensor in an arena starts on a 256-byte boundary
MAX_ARENA = 1 << 40


class DevShareError(Exception):
    """The driver refused (its CUresult is in the message) or the peer sent a bad arena."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _Prop(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class _Driver:
    """The few driver entry points used here, bound once per process."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        u64, p = ctypes.c_uint64, ctypes.POINTER
        sig = {
            "cuCtxGetDevice": [p(ctypes.c_int)],
            "cuMemGetAllocationGranularity": [p(ctypes.c_size_t), p(_Prop), ctypes.c_int],
            "cuMemCreate": [p(u64), ctypes.c_size_t, p(_Prop), u64],
            "cuMemRelease": [u64],
            "cuMemExportToShareableHandle": [ctypes.c_void_p, u64, ctypes.c_int, u64],
            "cuMemImportFromShareableHandle": [p(u64), ctypes.c_void_p, ctypes.c_int],
            "cuMemAddressReserve": [p(u64), ctypes.c_size_t, ctypes.c_size_t, u64, u64],
            "cuMemAddressFree": [u64, ctypes.c_size_t],
            "cuMemMap": [u64, ctypes.c_size_t, ctypes.c_size_t, u64, u64],
            "cuMemUnmap": [u64, ctypes.c_size_t],
            "cuMemSetAccess": [u64, ctypes.c_size_t, p(_AccessDesc), ctypes.c_size_t],
        }
        for name, args in sig.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
            setattr(self, name, fn)

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise DevShareError(f"{what} failed with CUresult {rc}")

    def device(self) -> int:
        dev = ctypes.c_int(-1)
        self.check(self.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")  # type: ignore[attr-defined]
        return dev.value

    def prop(self, dev: int) -> _Prop:
        prop = _Prop()
        prop.type = _ALLOC_PINNED
        prop.requestedHandleTypes = _HANDLE_FD
        prop.location = _Location(_LOC_DEVICE, dev)
        return prop


_DRIVER: list[_Driver] = []  # bound lazily, once: the module's only state, a cache of the library


def _driver() -> _Driver:
    if not _DRIVER:
        torch.zeros(1, device="cuda")  # the runtime's primary context, current on this thread
        _DRIVER.append(_Driver())
    return _DRIVER[0]


def available() -> bool:
    """Whether this process can make and share arenas (a CUDA context and the VMM API)."""
    try:
        if not torch.cuda.is_available():
            return False
        a = Arena.create(1)
        a.close()
        return True
    except (OSError, AttributeError, DevShareError):
        return False


class Arena:
    """One mapped allocation. ``create`` makes and exports one; ``open`` maps a peer's from its
    descriptor. ``close()`` unmaps, releases and closes the descriptor (idempotent)."""

    def __init__(self, handle: int, ptr: int, size: int, fd: int) -> None:
        self.handle, self.ptr, self.size, self.fd = handle, ptr, size, fd

    @classmethod
    def _map(cls, d: _Driver, handle: int, size: int, fd: int) -> Arena:
        ptr = ctypes.c_uint64(0)
        rc = d.cuMemAddressReserve(ctypes.byref(ptr), size, 0, 0, 0)  # type: ignore[attr-defined]
        if rc != 0:
            d.cuMemRelease(handle)  # type: ignore[attr-defined]
            raise DevShareError(f"cuMemAddressReserve failed with CUresult {rc}")
        arena = cls(handle, ptr.value, 0, fd)
        rc = d.cuMemMap(ptr.value, size, 0, handle, 0)  # type: ignore[attr-defined]
        if rc != 0:
            d.cuMemAddressFree(ptr.value, size)  # type: ignore[attr-defined]
            d.cuMemRelease(handle)  # type: ignore[attr-defined]
            raise DevShareError(f"cuMemMap failed with CUresult {rc}")
        arena.size = size
        desc = _AccessDesc(_Location(_LOC_DEVICE, d.device()), _ACCESS_RW)
        rc = d.cuMemSetAccess(ptr.value, size, ctypes.byref(desc), 1)  # type: ignore[attr-defined]
        if rc != 0:
            arena.close()
            raise DevShareError(f"cuMemSetAccess failed with CUresult {rc}")
        return arena

    @classmethod
    def create(cls, nbytes: int) -> Arena:
        d = _driver()
        prop = d.prop(d.device())
        gran = ctypes.c_size_t(0)
        d.check(
            d.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), _GRANULARITY_MIN),  # type: ignore[attr-defined]
            "cuMemGetAllocationGranularity",
        )
        g = max(1, gran.value)
        size = max(g, (nbytes + g - 1) // g * g)
        handle = ctypes.c_uint64(0)
        d.check(d.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0), "cuMemCreate")  # type: ignore[attr-defined]
        fd = ctypes.c_int(-1)
        rc = d.cuMemExportToShareableHandle(ctypes.byref(fd), handle.value, _HANDLE_FD, 0)  # type: ignore[attr-defined]
        if rc != 0:
            d.cuMemRelease(handle.value)  # type: ignore[attr-defined]
            raise DevShareError(f"cuMemExportToShareableHandle failed with CUresult {rc}")
        try:
            return cls._map(d, handle.value, size, fd.value)
        except DevShareError:
            os.close(fd.value)
            raise

    @classmethod
    def open(cls, fd: int, size: int) -> Arena:
        """Maps a peer's arena of ``size`` bytes; takes ownership of ``fd``."""
        d = _driver()
        if not 0 < size <= MAX_ARENA:
            os.close(fd)
            raise DevShareError(f"bad arena size {size}")
        handle = ctypes.c_uint64(0)
        rc = d.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _HANDLE_FD)  # type: ignore[attr-defined]
        if rc != 0:
            os.close(fd)
            raise DevShareError(f"cuMemImportFromShareableHandle failed with CUresult {rc}")
        try:
            return cls._map(d, handle.value, size, fd)
        except DevShareError:
            os.close(fd)
            raise

    def bytes(self) -> torch.Tensor:
        """The arena as a uint8 tensor on the current device (no copy; valid until close)."""
        return torch.as_tensor(_Iface(self.ptr, self.size), device="cuda")

    def close(self) -> None:
        if self.size:
            d = _driver()
            torch.cuda.synchronize()
            d.cuMemUnmap(self.ptr, self.size)  # type: ignore[attr-defined]
            d.cuMemAddressFree(self.ptr, self.size)  # type: ignore[attr-defined]
            d.cuMemRelease(self.handle)  # type: ignore[attr-defined]
            self.size = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _Iface:
    """A raw device range as ``__cuda_array_interface__`` (bytes), for ``torch.as_tensor``."""

    def __init__(self, ptr: int, size: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }


def layout(tensors: list[torch.Tensor]) -> tuple[list[int], int]:
    """Offsets of the tensors in an arena, each aligned, and the arena's size."""
    offsets, end = [], 0
    for t in tensors:
        offsets.append(end)
        end += (t.numel() * t.element_size() + ALIGN - 1) // ALIGN * ALIGN
    return offsets, max(end, ALIGN)


def view(arena_bytes: torch.Tensor, offset: int, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    """The tensor stored at ``offset`` (no copy)."""
    numel = 1
    for s in shape:
        numel *= s
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if offset < 0 or offset % ALIGN or offset + nbytes > arena_bytes.numel():
        raise DevShareError("tensor outside its arena")
    return arena_bytes[offset : offset + nbytes].view(dtype).view(shape)


# -- the descriptor's way across: a Unix socket beside the FIFOs -----------------------------
_TAG = struct.Struct(">QQ")  # arena token, arena size


def send_fd(sock: socket.socket, token: int, size: int, fd: int) -> None:
    socket.send_fds(sock, [_TAG.pack(token, size)], [fd])


def recv_fd(sock: socket.socket, token: int, timeout: float | None) -> tuple[int, int]:
    """Receives the descriptor of arena ``token``; returns (fd, size). Raises DevShareError on
    anything else (a stray descriptor is closed)."""
    sock.settimeout(timeout)
    try:
        data, fds, _flags, _addr = socket.recv_fds(sock, _TAG.size, 4)
    except (OSError, TimeoutError) as e:
        raise DevShareError(f"no arena descriptor: {e}") from e
    if len(data) != _TAG.size or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise DevShareError("malformed arena descriptor message")
    got, size = _TAG.unpack(data)
    if got != token:
        os.close(fds[0])
        raise DevShareError("arena descriptor out of sequence")
    return fds[0], size


def probe_tensor(token: int) -> torch.Tensor:
    """A small pattern both sides can compute: proves that an arena maps the same bytes."""
    g = torch.Generator().manual_seed(token & 0x7FFFFFFF)
    return torch.randint(0, 256, (4096,), dtype=torch.uint8, generator=g)
