"""Timing in the calling process: check-task's eager window and the benches. (An evaluation's
calls, the candidate's and the baselines', are timed by the judge's windows instead:
kforge_harness.windows, which takes the cache flush and ``summarise`` from here.)

Per timed call: flush the last-level cache, synchronise the device, then time the call with
CUDA events (cuda) or the host clock (cpu), with a device-wide synchronisation after it. The
inputs rotate over several sets so that no call sees the inputs of the last. Repetitions go on
until the spread (interquartile range over median) is small or the budget ends. The host time
of every call is kept too: on cuda, work that escapes the events (side streams, host threads)
shows up as host time far above event time. When the call's own time is mostly the host's
(a short kernel: the events then measure the host enqueuing it), that comparison is blind, so
the device is also asked, once the closing event is done, how long it stays busy: the tail of
work still running on other streams (near zero for a call whose work is all on the timed
stream). A candidate's call runs under the runner's compute guard, which is entered before
the timer starts and left after it stops (``wrap``): the timer sees the call alone, as it does
for the baselines, which run unguarded.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import Any, Callable

import torch

from kforge_harness.policy import Policy  # noqa: F401 - timing.Policy, as the callers name it

# the baselines' cache key: "t2" is the judge's windows (kforge_harness.windows)
TIMING_VERSION = "t2"


def cache_flush_bytes(device: torch.device) -> int:
    """Twice the last-level cache: the GPU's L2, or the CPU's largest cache (at most 64 MiB)."""
    if device.type == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
        return max(2 * int(l2), 32 << 20)
    best = 8 << 20
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip()
            except OSError:
                continue
            mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
            digits = text.rstrip("KM")
            if digits.isdigit():
                best = max(best, int(digits) * mult)
    except OSError:
        pass
    return min(2 * best, 64 << 20)


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarise(times_ms: list[float]) -> dict[str, float]:
    s = sorted(times_ms)
    med = statistics.median(s)
    p25, p75 = _percentile(s, 0.25), _percentile(s, 0.75)
    return {
        "median_ms": med,
        "p25_ms": p25,
        "p75_ms": p75,
        "min_ms": s[0],
        "max_ms": s[-1],
        "spread": (p75 - p25) / med if med > 0 else 0.0,
    }


def measure(
    fn: Callable[..., Any],
    input_sets: list[list[Any]],
    device: torch.device,
    policy: Policy,
    clock: Callable[[], int] = time.perf_counter_ns,
    wrap: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
) -> dict[str, Any]:
    """Times ``fn`` over the input sets, rotating them, in the calling process (check-task's
    eager window and the benches; evaluate's timing is kforge_harness.windows). Returns summary
    statistics of the times. Nothing of ``fn``'s outputs is retained. With ``wrap``, every call runs inside ``with wrap():`` (the runner's compute guard), entered
    before the timer starts and left after it stops: the timer sees the call alone.
    """
    around = wrap or contextlib.nullcontext
    cuda = device.type == "cuda"
    flush_bytes = cache_flush_bytes(device)
    flush = torch.empty(flush_bytes // 4, dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    n = len(input_sets)
    work = input_sets
    max_reps = policy.max_reps

    start_w = clock()
    w = 0
    while w < policy.warmup_min or (clock() - start_w) < policy.warmup_s * 1e9:
        with around():
            fn(*work[w % n])
        # each call waited for: launches are asynchronous, and warmup_s of enqueueing alone
        # queued up to a thousand calls (1.5 s of a 1.5 ms kernel on an H200)
        sync()
        w += 1
        if w >= 1000:
            break
    warm_s = (clock() - start_w) / 1e9

    event_ms: list[float] = []
    host_ms: list[float] = []
    tail_ms: list[float] = []
    begin = clock()
    rep = 0
    while True:
        idx = rep % n
        inputs = work[idx]
        flush.zero_()
        sync()
        if cuda:
            ev0 = torch.cuda.Event(enable_timing=True)
            ev1 = torch.cuda.Event(enable_timing=True)
            with around():
                t0 = clock()
                ev0.record()
                out = fn(*inputs)
                ev1.record()
            ev1.synchronize()
            te = clock()
            sync()
            t1 = clock()
            event_ms.append(ev0.elapsed_time(ev1))
            tail_ms.append((t1 - te) / 1e6)
        else:
            with around():
                t0 = clock()
                out = fn(*inputs)
                t1 = clock()
        host_ms.append((t1 - t0) / 1e6)
        del out
        rep += 1
        elapsed = (clock() - begin) / 1e9
        if rep >= max_reps:
            break
        if rep >= max(policy.min_reps, n):
            if elapsed >= policy.budget_s:
                break
            if rep % 5 == 0 and summarise(event_ms or host_ms)["spread"] <= policy.target_spread:
                break
    del flush, work
    result: dict[str, Any] = {
        "method": "cuda_events" if cuda else "host_clock",
        "trials": rep,
        "warmup": w,
        "warmup_s": round(warm_s, 3),
        "loop_s": round((clock() - begin) / 1e9, 3),
        "input_sets": n,
        "flush_bytes": flush_bytes,
    }
    result.update(summarise(event_ms if cuda else host_ms))
    result["host_median_ms"] = statistics.median(host_ms)
    if tail_ms:
        result["tail_median_ms"] = statistics.median(tail_ms)
    return result
