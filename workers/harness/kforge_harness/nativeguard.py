"""The C++ compute guard (``workers/harness/native/dispatch_guard.cpp``): where its library is,
and loading it.

``make build`` compiles it against the PyTorch of ``.venv`` into ``build/libkforge-guard.so``;
the bundle ships it in ``kforge/lib`` and names it in ``KFORGE_GUARD_LIB``. The judge passes the
path on to the runner, which loads the library after ``import torch`` (it links PyTorch's own
``libc10`` and ``libtorch_cpu``, which are loaded by then). A runner that cannot load it, for
example under another PyTorch version, uses ``guard.ComputeGuard`` instead: the same checks at a
higher cost per call, and the verdict names the guard that ran.
"""

from __future__ import annotations

import ctypes
import os

ENV_PATH = "KFORGE_GUARD_LIB"
LIBRARY_NAME = "libkforge-guard.so"


def library_path() -> str | None:
    """``KFORGE_GUARD_LIB`` (empty: no native guard), else the checkout's ``build/`` when it
    holds one, else None."""
    given = os.environ.get(ENV_PATH)
    if given is not None:
        return os.path.abspath(given) if given else None
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    built = os.path.join(root, "build", LIBRARY_NAME)
    return built if os.path.isfile(built) else None


class NativeLib:
    """The loaded library's functions, bound once (a candidate that rebinds an attribute of the
    CDLL object afterwards does not reach these)."""

    def __init__(self, path: str, allowed: frozenset[str]) -> None:
        lib = ctypes.CDLL(path)
        self.path = path
        self.enter = lib.kfg_enter
        self.enter.restype = ctypes.c_int64
        self.enter.argtypes = []
        self.intact = lib.kfg_intact
        self.intact.restype = ctypes.c_int
        self.intact.argtypes = [ctypes.c_int64]
        self.leave = lib.kfg_leave
        self.leave.restype = ctypes.c_int64
        self.leave.argtypes = [ctypes.c_int64]
        self.calls = lib.kfg_calls
        self.calls.restype = ctypes.c_int64
        self.calls.argtypes = []
        self._names = lib.kfg_refused_names
        self._names.restype = None
        self._names.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        allow = lib.kfg_allow
        allow.restype = ctypes.c_int
        allow.argtypes = [ctypes.c_char_p]
        if allow(",".join(sorted(allowed)).encode()) != len(allowed):
            raise OSError(f"{path}: the allowlist was not taken whole")

    def refused_names(self) -> list[str]:
        buf = ctypes.create_string_buffer(1024)
        self._names(buf, len(buf))
        text = buf.value.decode(errors="replace")
        return [n.removeprefix("aten::") for n in text.split(",") if n]


def load(path: str | None, allowed: frozenset[str]) -> tuple[NativeLib | None, str | None]:
    """(the library, None), or (None, why not). Call after ``import torch``."""
    if not path:
        return None, "no native guard library"
    try:
        return NativeLib(path, allowed), None
    except (OSError, AttributeError) as e:
        return None, f"{type(e).__name__}: {e}"
