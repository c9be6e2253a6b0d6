"""Timed calls as the judge's windows: the one timing protocol of evaluate and baseline.

Every timed call, of the candidate, of eager or of torch.compile, goes the same way:

1. The task's process draws the call's inputs with the task's own ``get_inputs`` under a seed
   of the judge's, drawn for that call alone from the evaluation's secret (``wdraw``), into a
   buffer the judge shares with it (kforge_harness.shared); for the candidate's calls it also
   writes the reference's outputs on them into a second buffer.
2. The judge copies the inputs into the subject's input buffer, then writes twice the
   last-level cache in its own context (no call finds the last one's data in the cache).
3. The judge's window opens (its clock), it sends ``wcall``; the subject calls the function on
   the buffer's tensors, writes the outputs into its output buffer and drains the device; the
   reply comes; the judge reads a byte of the output buffer in its own CUDA context and waits
   for it (``Buffer.probe``: the GPU runs one context at a time, so this waits for whatever the
   subject left running); the window closes.
4. For the candidate, the judge compares the whole of its output buffer with the reference's,
   element by element (compare.compare), at once: every timed call is verified (the warm-up's
   calls, which count for nothing, are not). A mismatch stops the timing and flags the
   verdict.

So the inputs of a call exist only from step 1 of that call, independent of every other call's
(no transform of an earlier input to derive an output from); checked calls and timed calls are
one kind of call; and the time is the judge's: the window less the channel's own cost
(``overhead``: the median window of null calls on the task's process, which write zeros of the
outputs' size into the output buffer and nothing else). A subject's own figure (CUDA events
around its call alone) can only lengthen a call: a call counts for its window less the
overhead, or for the subject's figure where that is longer and still within the window.
``loop`` is the repetition policy (warm-up, then calls until the budget ends or the spread is
small), the same for every subject.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

from kforge_harness import compare, devshare
from kforge_harness.reference import TaskFailed
from kforge_harness.shared import Buffer, Layout
from kforge_harness.timing import Policy, cache_flush_bytes, summarise

# Null calls that make the channel's overhead (their median), after two unmeasured.
OVERHEAD_CALLS = 9
# The most warm-up calls, whatever warmup_s says.
MAX_WARMUP = 200


class Infra(Exception):
    """The harness could not set a phase up (no device channel on cuda, no device memory for
    a buffer): no verdict on the candidate."""


class CallFailed(Exception):
    """The subject answered a timed call with an error (its message)."""


class Mismatch(Exception):
    """A timed call's outputs differ from the reference's on its inputs."""


class Window:
    """The judge's window around one command (RunnerProcess.request calls ``open`` and
    ``close``); ``end`` runs inside it, after the reply (the output buffer's probe)."""

    def __init__(
        self, end: Callable[[], None] = lambda: None, clock: Callable[[], int] = time.perf_counter_ns
    ) -> None:
        self.end, self.clock = end, clock
        self.t0 = 0
        self.ms = 0.0

    def open(self) -> None:
        self.t0 = self.clock()

    def close(self) -> None:
        self.end()
        self.ms = (self.clock() - self.t0) / 1e6


class Flush:
    """What the judge does in its own context before every window, the same for every subject:
    the copy of an input set's size (the candidate's: its inputs into its buffer, ``relay``;
    everyone else's: between scratch buffers of the judge's, ``traffic`` bytes), then a write
    of twice the last-level cache. The GPU's turn to come to the subject's context after that
    costs about the same for every subject (on an H100 it grew with the copy before it; on the
    cpu there is no such turn, and no copy is made)."""

    CHUNK = 256 << 20

    def __init__(self, device: torch.device, traffic: int = 0) -> None:
        self.device = device
        self.buf = torch.empty(cache_flush_bytes(device) // 4, dtype=torch.float32, device=device)
        self.traffic = traffic
        n = min(traffic, self.CHUNK)
        self.scratch = [torch.empty(n, dtype=torch.uint8, device=device) for _ in range(2)] if n else []

    def __call__(self, relay: Callable[[], None] | None = None) -> None:
        if relay is not None:
            relay()
        elif self.scratch:
            left = self.traffic
            while left > 0:
                n = min(left, self.CHUNK)
                self.scratch[1][:n].copy_(self.scratch[0][:n])
                left -= n
        self.buf.zero_()
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def probe(self) -> None:
        """The end of a null window: a read in the judge's context, as Buffer.probe."""
        if self.device.type == "cuda":
            self.buf[:1].cpu()


class Side:
    """The judge's buffers with one subject for a phase: ``inp`` and ``out``, set up with
    ``wsetup`` through ``request`` (the subject's command function); ``close`` ends them."""

    def __init__(
        self,
        name: str,
        request: Callable[..., dict[str, Any]],
        transport: Any,
        in_layout: Layout,
        out_layout: Layout,
        template: Any,
        device: torch.device,
    ) -> None:
        if device.type == "cuda" and transport.sock is None:
            raise Infra(f"no device channel with the {name}'s process: its buffers cannot be shared")
        self.request = request
        self.in_layout, self.out_layout = in_layout, out_layout
        self.bufs: list[Buffer] = []
        arenas: list[dict[str, int]] = []
        specs = {}
        for key, layout in (("inputs", in_layout), ("outputs", out_layout)):
            try:
                buf, desc = Buffer.make(transport, f"w_{name}_{key}", layout.size, arenas)
            except devshare.DevShareError as e:
                self.close()
                raise Infra(f"no buffer of {layout.size} bytes for the {name}'s {key}: {e}") from e
            self.bufs.append(buf)
            specs[key] = {"buffer": desc, "layout": layout.describe()}
        self.inp, self.out = self.bufs
        specs["inputs"]["template"] = template
        try:
            reply = request({"cmd": "wsetup", **specs, "arenas": arenas})
        except BaseException:
            self.close()
            raise
        if reply.get("ok") is not True:
            self.close()
            raise CallFailed(f"the timing buffers were refused: {str(reply.get('error'))[:300]}")

    def outputs(self, device: torch.device) -> list[torch.Tensor]:
        return self.out.view(self.out_layout, device)

    def close(self) -> None:
        for b in self.bufs:
            b.close()
        self.bufs = []


def overhead(null_call: Callable[[], float]) -> float:
    """The channel's own cost of a call in ms: the median window of OVERHEAD_CALLS null calls
    (``null_call`` makes one and returns its window), after two that warm the path."""
    for _ in range(2):
        null_call()
    return statistics.median(null_call() for _ in range(OVERHEAD_CALLS))


def net_ms(window_ms: float, own: Any, overhead_ms: float) -> tuple[float, bool]:
    """(the time a call counts for, whether the subject's own figure was longer than the window
    that held it: impossible for an honest subject, and not believed)."""
    said = own.get("ms") if isinstance(own, dict) else None
    if not isinstance(said, (int, float)) or not said == said or said < 0:
        said = 0.0
    forged = said > window_ms * 1.01 + 0.01
    if forged:
        said = 0.0
    return max(window_ms - overhead_ms, float(said), 1e-6), forged


def loop(
    call: Callable[[bool], tuple[float, dict[str, Any]]],
    policy: Policy,
    overhead_ms: float,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> dict[str, Any]:
    """Calls ``call(warm)`` (one window: it returns the window in ms and the subject's own
    figures; ``warm`` for the warm-up's calls, which count for nothing) for a warm-up of at least ``warmup_min`` calls and ``warmup_s``, then for the timed calls:
    at least ``min_reps``, then until the budget ends or, every fifth call, the spread
    (interquartile range over median) is within ``target_spread``; at most ``max_reps``.
    Returns the summary of the calls' times (timing.summarise, of ``net_ms``), ``trials``,
    ``warmup``, ``overhead_ms``, ``window_median_ms``, the medians of the subject's own figures
    (``own_median_ms``, ``host_median_ms``, ``tail_median_ms``) and ``own_over_window``."""
    start = clock()
    w = 0
    while w < policy.warmup_min or (clock() - start) < policy.warmup_s * 1e9:
        call(True)
        w += 1
        if w >= MAX_WARMUP:
            break
    warm_s = (clock() - start) / 1e9
    net: list[float] = []
    windows: list[float] = []
    own: dict[str, list[float]] = {
        "ms": [],
        "host_ms": [],
        "tail_ms": [],
        "put_ms": [],
        "handler_ms": [],
        "switch_ms": [],
    }
    over = 0
    begin = clock()
    while True:
        ms, figures = call(False)
        windows.append(ms)
        for k, values in own.items():
            v = figures.get(k)
            if isinstance(v, (int, float)) and v == v and v >= 0:
                values.append(float(v))
        t, forged = net_ms(ms, figures, overhead_ms)
        over += forged
        net.append(t)
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
    for k, name in (
        ("ms", "own_median_ms"),
        ("host_ms", "host_median_ms"),
        ("tail_ms", "tail_median_ms"),
        ("put_ms", "put_median_ms"),
        ("handler_ms", "handler_median_ms"),
        ("switch_ms", "switch_median_ms"),
    ):
        if own[k]:
            result[name] = statistics.median(own[k])
    return result


def check(
    out: list[torch.Tensor], ref: list[torch.Tensor], tolerance: Any, strict: bool, slack: list[float]
) -> None:
    """Raises Mismatch unless ``out`` is within the tolerance (widened per output by ``slack``:
    compare.conditioned's, from the checks) of ``ref``."""
    rec = compare.compare(out, ref, tolerance, strict, slack=slack)
    if not rec["pass"]:
        raise Mismatch(str(rec.get("reason") or "outputs differ from the reference"))


# -- the task's process as the inputs' source and as a subject --------------------------------
def prepare(ref: Any, seed: int, timeout: float) -> tuple[Any, Layout, Layout]:
    """(template, inputs' layout, outputs' layout) of the task's inputs as ``get_inputs`` draws
    them (``wprepare``), checked: what every buffer of the phase is sized by."""
    reply = ref.request({"cmd": "wprepare", "seed": seed}, timeout)
    try:
        in_l = Layout.parse(reply.get("in_layout"), 1 << 42)
        out_l = Layout.parse(reply.get("out_layout"), 1 << 42)
    except Exception as e:  # noqa: BLE001 - a malformed description is the task's failure
        raise TaskFailed(f"the task's process described its inputs badly: {e}") from e
    return reply.get("template"), in_l, out_l


def time_task(
    ref: Any,
    side: Side,
    which: str,
    policy: Policy,
    seed: Callable[[int], int],
    flush: Flush,
    overhead_ms: float,
    timeout: float,
) -> dict[str, Any]:
    """Times ``which`` (``eager`` or ``compile``) in the task's process by windows (``loop``),
    each call on inputs drawn for it (``seed(k)``)."""
    k = [0]

    def one(warm: bool) -> tuple[float, dict[str, Any]]:
        ref.request({"cmd": "wdraw", "seed": seed(k[0]), "ref": False}, timeout)
        k[0] += 1
        flush()
        w = Window(side.out.probe)
        reply = ref.request({"cmd": "wcall", "subject": which}, timeout, window=w)
        return w.ms, reply.get("own") or {}

    return loop(one, policy, overhead_ms)


def path_overhead(request: Callable[..., dict[str, Any]], flush: Flush, timeout: float) -> float:
    """``overhead`` of a subject's path alone: windows around ``wnull`` (the GPU's turn to come
    to the subject's context, the messages, the judge's probe), each after the judge's flush as
    a timed call is. Measured on the candidate's runner before it imports the candidate (the
    judge's ``init``), so that nothing of the candidate's can lengthen it."""

    def one() -> float:
        flush()
        w = Window(flush.probe)
        request({"cmd": "wnull"}, timeout, window=w)
        return w.ms

    return overhead(one)


def null_overhead(ref: Any, side: Side, flush: Flush, timeout: float) -> float:
    """``overhead`` of the task's process's null calls: its path and the copy of an output's size
    into the output buffer (see the module's docstring)."""

    def one() -> float:
        flush()
        w = Window(side.out.probe)
        ref.request({"cmd": "wcall", "subject": "null"}, timeout, window=w)
        return w.ms

    return overhead(one)


def baselines(
    ref: Any,
    device: torch.device,
    policy: Policy,
    with_compile: bool,
    seed: Callable[[int], int],
    timeout: float,
) -> dict[str, Any]:
    """Eager and torch.compile timed by windows in the task's process (its model loaded): the
    baseline object (``eager``, ``compile``, ``compile_seconds`` or ``compile_error``,
    ``measured_at``). The task's failures raise (reference.TaskFailed)."""
    tpl, in_l, out_l = prepare(ref, seed(-1), timeout)
    side = Side("task", ref.request, ref.transport, in_l, out_l, tpl, device)

    def measure() -> dict[str, Any]:
        out: dict[str, Any] = {"measured_at": time.time()}
        flush = Flush(device, in_l.size if device.type == "cuda" else 0)
        ref.request({"cmd": "wdraw", "seed": seed(-2), "ref": False}, timeout)
        ovh = null_overhead(ref, side, flush, timeout)
        out["eager"] = time_task(ref, side, "eager", policy, seed, flush, ovh, timeout)
        if not with_compile:
            out["compile"] = None
            out["compile_error"] = "not requested"
            return out
        made = ref.request({"cmd": "wcompile"}, timeout)
        if made.get("compile_error"):
            out["compile"] = None
            out["compile_error"] = str(made["compile_error"])[:500]
            return out
        out["compile_seconds"] = made.get("compile_seconds")
        out["compile"] = time_task(
            ref, side, "compile", policy, lambda i: seed(1 << 20 | i), flush, ovh, timeout
        )
        return out

    try:
        out = measure()
    except BaseException:
        side.close()  # (a process that failed is not asked again: it is ended)
        raise
    try:
        ref.request({"cmd": "wend"}, timeout)
    finally:
        side.close()
    return out
