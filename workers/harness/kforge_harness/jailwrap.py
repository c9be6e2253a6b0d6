"""Command prefixes that run a build or the runner through kforge-jail (sandbox/).

The judge itself never runs in the jail: only the compiler (profile ``build``) and the runner
(profile ``run``, with the GPU where one is asked for) do.
"""

from __future__ import annotations

import os

# kforge-jail's exit status when the jail itself could not be set up (sandbox/README.md).
JAIL_SETUP_FAILED = 125

# The largest file the runner may write: tensors cross the transfer directory as raw files, and
# an output of a large task passes the jail's default of 1 GiB (softmax_rows's does).
RUN_FSIZE_MIB = 16384


def build_prefix(jail: str, workdir: str, sources_dir: str, timeout: float) -> list[str]:
    """``build`` profile: writes only ``workdir``, reads the sources, no GPU, no network."""
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
) -> list[str]:
    """``run`` profile: the transfer directory is the workdir; the harness, the candidate and
    its built library are read-only; only GPU ``gpu``'s device nodes are present."""
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
