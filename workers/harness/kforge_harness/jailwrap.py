"""Command prefixes that run a build or the runner through kforge-jail (sandbox/).

The judge itself never runs in the jail: only the compiler (profile ``build``) and the runner
(profile ``run``, with the GPU where one is asked for) do.
"""

from __future__ import annotations

import os

# kforge-jail's exit status when the jail itself could not be set up (sandbox/README.md).
JAIL_SETUP_FAILED = 125

# The most one jail's writable folder may hold, in MiB, unless the caller says (--disk-mib): a
# build's folder, a runner's or the task's transfer directory (the tensors the judge writes there
# on the cpu backend count too). kforge-jail kills past it and says "kforge-jail: limit disk".
DISK_MIB = 8192
DISK_LINE = "kforge-jail: limit disk"

# The largest file the runner may write: tensors cross the transfer directory as raw files, and
# an output of a large task passes the jail's default of 1 GiB (softmax_rows's does).
RUN_FSIZE_MIB = 16384


def disk_limit(output: str) -> str | None:
    """kforge-jail's line when it killed a command for its disk quota, from the output it
    captured (its own line comes last), else None."""
    for line in reversed(output.splitlines()):
        if line.startswith(DISK_LINE):
            return line.strip()
    return None


def build_prefix(
    jail: str, workdir: str, sources_dir: str, timeout: float, disk_mib: int = DISK_MIB
) -> list[str]:
    """``build`` profile: writes only ``workdir`` (at most ``disk_mib``), reads the sources, no
    GPU, no network."""
    return [
        jail,
        "--profile",
        "build",
        "--workdir",
        workdir,
        "--ro",
        sources_dir,
        "--time",
        f"{timeout:.0f}",
        "--output-limit",
        "4096",
        "--pids",
        "512",
        "--disk",
        str(disk_mib),
        "--env",
        "PATH",
        "--",
    ]


def run_prefix(
    jail: str,
    xfer: str,
    readable: list[str],
    env: dict[str, str],
    gpu: int | None,
    mem_mib: int | None,
    lifetime_s: float,
    disk_mib: int = DISK_MIB,
) -> list[str]:
    """``run`` profile: the transfer directory is the workdir (holding at most ``disk_mib``);
    the harness, the candidate and its built library are read-only; only GPU ``gpu``'s device
    nodes are present."""
    argv = [
        jail,
        "--profile",
        "run",
        "--workdir",
        xfer,
        "--time",
        f"{lifetime_s:.0f}",
        "--output-limit",
        "65536",
        "--pids",
        "4096",
        "--fsize",
        str(RUN_FSIZE_MIB),
        "--disk",
        str(disk_mib),
    ]
    seen = set()
    for path in readable:
        if path and path not in seen and os.path.exists(path):
            argv += ["--ro", path]
            seen.add(path)
    for name, value in env.items():
        argv += ["--env", f"{name}={value}"]
    if gpu is not None:
        argv += ["--gpu", str(gpu)]
    if mem_mib:
        argv += ["--mem", str(mem_mib)]
    return argv + ["--"]
