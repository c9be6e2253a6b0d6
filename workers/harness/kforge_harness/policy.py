"""How long and how much the timing routine (kforge_harness.timing) times a subject. Free of
PyTorch, so the command line can make one before importing it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Policy:
    """How long and how much to time. Defaults suit kernels of 0.01 to 100 ms."""

    budget_s: float = 2.0
    min_reps: int = 10
    max_reps: int = 1000
    target_spread: float = 0.01
    warmup_s: float = 0.05
    warmup_min: int = 3
