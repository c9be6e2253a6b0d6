"""The reward, versioned: cuda-agent-v1."""

from __future__ import annotations

from kforge_harness import REWARD_VERSION

# More than this much faster counts as faster (5%).
MARGIN = 1.05


def reward(status: str, speedup_vs_eager: float | None, speedup_vs_compile: float | None) -> int:
    """-1 unless status is ok; 3 if >5% faster than eager and compile; 2 if only than eager; 1 else."""
    if status != "ok":
        return -1
    faster_eager = speedup_vs_eager is not None and speedup_vs_eager > MARGIN
    faster_compile = speedup_vs_compile is not None and speedup_vs_compile > MARGIN
    if faster_eager and faster_compile:
        return 3
    if faster_eager:
        return 2
    return 1


__all__ = ["reward", "REWARD_VERSION", "MARGIN"]
