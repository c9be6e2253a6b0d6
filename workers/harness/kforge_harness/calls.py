"""Timed calls: one window per call, opened and closed by the judge.

A subject (the candidate's runner, or the task's process for eager, torch.compile and the null
call) serves ``call`` messages with ``serve``: it takes the inputs out of the message, synchronises
the device, calls the function, synchronises again and puts the outputs in its reply; the
``flush`` message before each window writes twice the last-level cache. The judge's window for a call (``Window``) opens before it writes the
call's inputs into the channel and closes when the reply has arrived: the inputs exist within
the subject's reach only inside the window, and everything the subject does with them until it
has handed its outputs over is inside it. The judge's clock is the authority; the subject's own
figures (CUDA events, host clock) are cross-checks. The window also holds the channel's own
cost (writing and reading the tensors, the messages, the flush), the same for every subject of
an evaluation; ``overhead`` measures it with the null call (the same message, the same tensors,
no function) on the task's process, and it is subtracted from every subject's windows alike. A
call counts for its window less that cost, or for the subject's own figure where that is longer
(and within the window): a subject's clock can lengthen its calls, never shorten them.

``loop`` is the repetition policy over windows (warm-up, then calls until the budget ends or
the spread is small), the same for every subject.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any, Callable

import torch

from kforge_harness.timing import Policy, cache_flush_bytes, summarise

# Null calls that make the channel's overhead (their median), after two unmeasured.
OVERHEAD_CALLS = 9


class Subject:
    """The subject's side: ``serve(msg, fn)`` answers one ``call`` message. Owned by the
    subject's one thread; the flush buffer is made on the first call."""

    def __init__(self, transport: Any, device: torch.device, clock: Callable[[], int]) -> None:
        self.transport = transport
        self.device = device
        self.clock = clock
        self.flush: torch.Tensor | None = None

    def serve(
        self,
        msg: dict[str, Any],
        fn: Callable[..., Any],
        wrap: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
        plain: Callable[[Any], Any] = lambda v: v,
    ) -> tuple[dict[str, Any], list[Any], Any]:
        """(reply, inputs, outputs) of one call of ``fn`` on the message's inputs, inside
        ``wrap()`` when given (entered before the subject's own clock starts). ``plain`` makes
        the outputs what the channel carries."""
        cuda = self.device.type == "cuda"
        (args,) = self.transport.decode_all(msg, [msg["inputs"]], device=self.device)
        if cuda:
            torch.cuda.synchronize()
        own: dict[str, float] = {}
        with wrap() if wrap is not None else contextlib.nullcontext():
            if cuda:
                ev0 = torch.cuda.Event(enable_timing=True)
                ev1 = torch.cuda.Event(enable_timing=True)
                h0 = self.clock()
                ev0.record()
                out = fn(*args)
                ev1.record()
            else:
                h0 = self.clock()
                out = fn(*args)
        if cuda:
            ev1.synchronize()
            te = self.clock()
            torch.cuda.synchronize()
            h1 = self.clock()
            own = {"ms": ev0.elapsed_time(ev1), "tail_ms": (h1 - te) / 1e6}
        else:
            h1 = self.clock()
            own = {"ms": (h1 - h0) / 1e6}
        own["host_ms"] = (h1 - h0) / 1e6
        arenas: list[dict[str, int]] = []
        enc = self.transport.encode("out_", plain(out), [0], arenas)
        return {"outputs": enc, "arenas": arenas, "own": own}, args, out

    def flush_cache(self) -> dict[str, Any]:
        """Writes twice the last-level cache (timing.cache_flush_bytes) and waits for it: the
        ``flush`` command, sent before each window, so that no call finds the last one's data
        (its own weights included) in the cache, and the flush's own time is in no window."""
        if self.flush is None:
            self.flush = torch.empty(
                cache_flush_bytes(self.device) // 4, dtype=torch.float32, device=self.device
            )
        self.flush.zero_()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return {"ok": True}


class Window:
    """The judge's window around one call: ``with Window(clock) as w: ...`` then ``w.ms``."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.clock = clock
        self.t0 = 0
        self.ms = 0.0

    def __enter__(self) -> Window:
        self.t0 = self.clock()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.ms = (self.clock() - self.t0) / 1e6


def overhead(null_call: Callable[[], float]) -> float:
    """The channel's own cost of a call in ms: the median window of OVERHEAD_CALLS null calls
    (``null_call`` makes one and returns its window), after two that warm the path."""
    for _ in range(2):
        null_call()
    return statistics.median(null_call() for _ in range(OVERHEAD_CALLS))


def loop(
    call: Callable[[bool], tuple[float, dict[str, Any]]],
    policy: Policy,
    overhead_ms: float,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> dict[str, Any]:
    """Calls ``call(warmup)`` (it makes one call and returns its window in ms and the subject's
    own figures) for a warm-up of at least ``warmup_min`` calls and ``warmup_s``, then for the
    timed calls: at least ``min_reps``, then until the budget ends or, every fifth call, the
    spread (interquartile range over median) is within ``target_spread``; at most ``max_reps``.
    A call's time is its window less ``overhead_ms``, or the subject's own figure where that is
    longer and still within the window (the channel's cost varies from call to call; the
    subject's word can only lengthen a call, never shorten it). Returns the summary of
    those times (timing.summarise), ``trials``, ``warmup``, ``overhead_ms``, ``window_median_ms``
    and the medians of the subject's own figures (``own_median_ms``, ``host_median_ms``,
    ``tail_median_ms``, where it gave them) and ``own_over_window``: calls whose own time was
    longer than their window (impossible for an honest subject)."""
    start = clock()
    w = 0
    while w < policy.warmup_min or (clock() - start) < policy.warmup_s * 1e9:
        call(True)
        w += 1
        if w >= 200:
            break
    warm_s = (clock() - start) / 1e9
    net: list[float] = []
    windows: list[float] = []
    own: dict[str, list[float]] = {"ms": [], "host_ms": [], "tail_ms": []}
    over = 0
    begin = clock()
    while True:
        ms, figures = call(False)
        windows.append(ms)
        for k, values in own.items():
            v = figures.get(k)
            if isinstance(v, (int, float)) and v == v and v >= 0:
                values.append(float(v))
        said = figures.get("ms")
        if not isinstance(said, (int, float)) or not said == said or said < 0:
            said = 0.0
        elif said > ms * 1.01 + 0.01:  # longer than the window that held it: not believed
            over += 1
            said = 0.0
        net.append(max(ms - overhead_ms, float(said), 1e-6))
        rep = len(net)
        if rep >= policy.max_reps:
            break
        if rep >= policy.min_reps:
            if (clock() - begin) / 1e9 >= policy.budget_s:
                break
            if rep % 5 == 0 and summarise(net)["spread"] <= policy.target_spread:
                break
    result: dict[str, Any] = {
        "method": "judge_window",
        "trials": len(net),
        "warmup": w,
        "warmup_s": round(warm_s, 3),
        "loop_s": round((clock() - begin) / 1e9, 3),
        "overhead_ms": overhead_ms,
        "window_median_ms": statistics.median(windows),
        "own_over_window": over,
    }
    result.update(summarise(net))
    for k, name in (("ms", "own_median_ms"), ("host_ms", "host_median_ms"), ("tail_ms", "tail_median_ms")):
        if own[k]:
            result[name] = statistics.median(own[k])
    return result
