"""The GPU lock: several jobs share one GPU, but only one at a time runs on it.

A worker may run more than one job per GPU so that builds (CPU) overlap another job's checks and
timing (GPU). Each harness takes an exclusive ``flock`` on one file per GPU before it first
touches the device (after the build) and keeps it until it exits, so timings never share the GPU.
The lock is the kernel's: a harness that dies releases it.
"""

from __future__ import annotations

import fcntl
import os
import time


class GpuLock:
    """Holds an exclusive flock on ``path`` from ``acquire`` until ``release`` (or exit)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.waited_s = 0.0
        self.acquired_at: float | None = None

    def acquire(self) -> float:
        """Blocks until the lock is ours; returns the seconds waited."""
        t0 = time.monotonic()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.fd = fd
        self.acquired_at = time.monotonic()
        self.waited_s = self.acquired_at - t0
        return self.waited_s

    def held_s(self) -> float | None:
        """Seconds since the lock was taken (None when it never was): the job's time on the GPU."""
        return None if self.acquired_at is None else time.monotonic() - self.acquired_at

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
