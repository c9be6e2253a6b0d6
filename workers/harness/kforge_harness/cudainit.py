"""Makes the CUDA primary context of the first visible GPU on a thread of its own, through the
driver API, so that it overlaps PyTorch's import (seconds each on a GPU host); PyTorch's runtime
then finds the context made. Free of PyTorch; without a driver it does nothing."""

from __future__ import annotations

import ctypes
import threading


def start_primary_context() -> threading.Thread | None:
    """Starts the thread (join it before relying on the context), or None without a driver."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None

    def work() -> None:
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0:
            # retained for the process's life: the runtime shares it (cudaSetDevice, first use)
            cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)

    t = threading.Thread(target=work, name="kforge-cuda-init", daemon=True)
    t.start()
    return t
