"""kforge_runtime: the tiny runtime through which a native candidate calls its kernels.

A native candidate is a folder with ``model_new.py`` and ``kernels/*.cu`` (backend cuda) or
``kernels/*.cpp`` (backend cpu). The harness compiles every file under ``kernels/`` into one
shared library, with no PyTorch headers, and tells this module where it is. ``ModelNew`` then
does::

    import kforge_runtime as kr

    class ModelNew(torch.nn.Module):
        def __init__(self, *init_inputs):
            super().__init__()
            self.k = kr.load()

        def forward(self, x):
            y = torch.empty_like(x)          # allocation is allowed, compute is not
            self.k.relu_f32(x, y, x.numel())  # an extern "C" function of the library
            return y

Calling convention of every exported function (``extern "C"``, returning ``int``):

* a ``torch.Tensor`` argument is passed as a pointer to its first element; it must be
  contiguous and on the backend's device (checked here, ``ValueError`` otherwise);
* a Python ``int`` (or ``bool``) is passed as ``int64_t``;
* a Python ``float`` is passed as ``float`` (32-bit); wrap it in ``kr.f64(v)`` for ``double``;
* the return value is 0 on success; anything else raises ``KernelError`` naming the function
  and the code (a CUDA function should return ``(int)cudaGetLastError()``).

CUDA functions launch on the default stream (stream 0), which is the stream PyTorch uses in
the runner. Libraries the sources include are linked automatically: cuBLAS, cuBLASLt, cuDNN
(cuda) and OpenMP (cpu, through ``#include <omp.h>`` or ``#pragma omp``).

The module keeps no global state: ``load()`` returns a ``Kernels`` object that owns the
loaded library, and counts the native calls made through it, which the harness reads to tell
a kernel that was never launched.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

ENV_LIBRARY = "KFORGE_KERNEL_LIB"


class KernelError(RuntimeError):
    """A native function returned a non-zero status."""


class f64:  # noqa: N801 - reads as a type tag at call sites
    """Marks a Python float to be passed as ``double`` rather than ``float``."""

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = float(value)


class _Function:
    """One exported function. Its ctypes argtypes are set from the Python types of the first
    call's arguments (and again whenever they change), so that ctypes converts ints and floats
    itself: a candidate's forward() is timed from its call, and a launch with twenty arguments
    cost about 15 us converted one by one in Python."""

    def __init__(self, owner: "Kernels", name: str, fn: Any) -> None:
        self._owner = owner
        self._name = name
        self._fn = fn
        self._fn.restype = ctypes.c_int
        self._types: tuple[type, ...] | None = None
        self._plain = False  # every argument of _types an int or a float: passed as they are

    def __call__(self, *args: Any) -> None:
        types = tuple(map(type, args))
        if types != self._types:
            self._fn.argtypes = [self._owner._ctype(self._name, i, a) for i, a in enumerate(args)]
            self._types = types
            self._plain = all(t is int or t is float for t in types)
        owner = self._owner
        if self._plain:  # addresses and sizes already: ctypes converts them (replays: call_plain)
            converted: Any = args
        else:
            tensor, on_device = owner._tensor, owner._on_device
            converted = []
            for i, (t, a) in enumerate(zip(types, args)):
                if t is int or t is float:
                    converted.append(a)
                elif isinstance(a, tensor) and on_device(a) and a.is_contiguous():
                    converted.append(a.data_ptr())
                else:
                    converted.append(owner._convert(self._name, i, a))  # the rest, and every error
        owner.calls += 1
        status = self._fn(*converted)
        if status != 0:
            raise KernelError(f"{self._name} returned {status}")

    def call_plain(self, args: list[Any], types: tuple[type, ...]) -> None:
        """A call whose arguments are ints (addresses, sizes) and floats only, ``types`` their
        types' tuple, one object kept by the caller (a replayed forward): argtypes are set again
        only when the last call's tuple was another object, and nothing is checked per argument.
        A replayed call of a few microseconds spent a third of them in ``__call__``'s checks."""
        if types is not self._types:
            self._fn.argtypes = [ctypes.c_int64 if t is int else ctypes.c_float for t in types]
            self._types = types
            self._plain = True
        self._owner.calls += 1
        status = self._fn(*args)
        if status != 0:
            raise KernelError(f"{self._name} returned {status}")


class Kernels:
    """A loaded candidate library. Attribute access returns a callable for an exported function.

    Owns the ``ctypes.CDLL``; ``calls`` counts native calls made through it.
    """

    def __init__(self, path: str, device_type: str) -> None:
        self.path = path
        self.device_type = device_type
        self.calls = 0
        self._lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        self._functions: dict[str, _Function] = {}
        import torch

        self._tensor = torch.Tensor
        # a tensor on the backend's device, by the tensor's flag (its .device builds an object)
        self._on_device = (lambda t: t.is_cuda) if device_type == "cuda" else (lambda t: t.is_cpu)

    def __getattr__(self, name: str) -> _Function:
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._functions.get(name)
        if fn is None:
            try:
                raw = getattr(self._lib, name)
            except AttributeError:
                raise AttributeError(f"the kernel library exports no function {name!r}") from None
            fn = _Function(self, name, raw)
            self._functions[name] = fn
        return fn

    def _ctype(self, fname: str, index: int, arg: Any) -> Any:
        """The ctypes type that argument index of fname is passed as (TypeError if none)."""
        import torch

        if isinstance(arg, torch.Tensor):
            return ctypes.c_void_p
        if isinstance(arg, (bool, int)):
            return ctypes.c_int64
        if isinstance(arg, float):
            return ctypes.c_float
        if isinstance(arg, f64):
            return ctypes.c_double
        raise TypeError(f"{fname}: argument {index} has unsupported type {type(arg).__name__}")

    def _convert(self, fname: str, index: int, arg: Any) -> Any:
        import torch

        if isinstance(arg, torch.Tensor):
            if arg.device.type != self.device_type:
                raise ValueError(f"{fname}: argument {index} is on {arg.device}, expected {self.device_type}")
            if not arg.is_contiguous():
                raise ValueError(f"{fname}: argument {index} is not contiguous")
            return arg.data_ptr()  # argtypes: c_void_p
        if isinstance(arg, bool):
            return ctypes.c_int64(int(arg))
        if isinstance(arg, int):
            return ctypes.c_int64(arg)
        if isinstance(arg, float):
            return ctypes.c_float(arg)
        if isinstance(arg, f64):
            return ctypes.c_double(arg.value)
        raise TypeError(f"{fname}: argument {index} has unsupported type {type(arg).__name__}")


def load(path: str | None = None) -> Kernels:
    """Loads the candidate's kernel library: ``path``, or the one the harness built.

    The caller owns the returned object; the library stays loaded while it lives.
    """
    lib = path or os.environ.get(ENV_LIBRARY)
    if not lib:
        raise RuntimeError(f"no kernel library: {ENV_LIBRARY} is not set (run under the harness)")
    device_type = os.environ.get("KFORGE_BACKEND", "cuda")
    return Kernels(lib, device_type)
