"""The environment a verdict was reached in: device, driver, CUDA and torch versions."""

from __future__ import annotations

import platform
import re
from typing import Any

import torch

from kforge_harness import HARNESS_VERSION


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


def parse_driver(text: str) -> str | None:
    """The driver's version from /proc/driver/nvidia/version's NVRM line: the first number with
    dots after "Kernel Module" ("NVIDIA UNIX x86_64 Kernel Module  535.104.05  ..." and the open
    module's "NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  ..." alike)."""
    m = re.search(r"Kernel Module\b[^\n]*?\s(\d+\.\d+(?:\.\d+)*)\s", text + " ")
    return m.group(1) if m else None


def driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            return parse_driver(f.read())
    except OSError:
        return None


def env_info(backend: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "backend": backend,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "harness": HARNESS_VERSION,
        "cpu": cpu_model(),
        "cuda": torch.version.cuda,
        "driver": None,
        "gpu": None,
    }
    if backend == "cuda" and torch.cuda.is_available():
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info["gpu"] = props.name
        info["gpu_capability"] = f"{props.major}.{props.minor}"
        info["gpu_memory_mib"] = props.total_memory >> 20
        info["driver"] = driver_version()
    return info


def device_slug(info: dict[str, Any]) -> str:
    """A short name of the device for cache keys."""
    name = info.get("gpu") if info["backend"] == "cuda" else info.get("cpu")
    return re.sub(r"[^A-Za-z0-9]+", "-", str(name)).strip("-")[:60]
