"""The subject's side of a timing phase (kforge_harness.windows): the buffers it maps once, and
one call on the inputs the judge put there.

A subject is the candidate's runner, or the task's process for eager, torch.compile and the
null call. ``Phase`` maps the phase's input and output buffers (kforge_harness.shared) from the
judge's ``wsetup`` message; ``call`` runs the function on the input buffer's tensors (views, no
copy), writes its outputs into the output buffer and waits for the device, so that the judge's
window around the command holds all of it. The subject's own figures (CUDA events or its host
clock around the function alone) go back in the reply: the judge only cross-checks them.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

import torch

from kforge_harness.shared import Layout, Mapped, rebuild, tensors
from kforge_harness.wire import ChannelError


class Phase:
    """The mapped buffers of one timing phase. Owned by the subject's one thread."""

    def __init__(self, msg: dict[str, Any], transport: Any, device: torch.device) -> None:
        self.device = device
        self.last: Any = None
        fds = transport.open_arenas(msg.get("arenas"))
        self.bufs: list[Mapped] = []
        try:
            for key in ("inputs", "outputs"):
                spec = msg.get(key)
                if not isinstance(spec, dict):
                    raise ChannelError(f"no {key} buffer")
                m = Mapped.open(spec.get("buffer"), transport, fds)
                self.bufs.append(m)
                layout = Layout.parse(spec.get("layout"), int(m.mem.numel()))
                setattr(self, f"{key}_layout", layout)
            self.template = msg["inputs"].get("template")
            in_views = self.bufs[0].views(self.inputs_layout)
            self.args = rebuild(self.template, in_views)
            if not isinstance(self.args, list):
                raise ChannelError("the inputs are not a list")
            self.outs = self.bufs[1].views(self.outputs_layout)
        except BaseException:
            self.close()
            for f in fds:
                if all(f is not m.keep for m in self.bufs):
                    f.close()
            raise

    def done(self) -> None:
        """Frees the last call's outputs (after the window)."""
        self.last = None

    def put(self, out: Any) -> None:
        """Writes ``out``'s tensors into the output buffer; a structure other than the
        reference's (count, dtypes, shapes, plain tensors) raises ValueError."""
        if not self.outputs_layout.matches(out):
            got = [f"{type(t).__name__}{list(t.shape)}:{t.dtype}" for t in tensors(out)]
            raise ValueError(f"outputs {got[:8]} are not of the reference's structure")
        for dst, src in zip(self.outs, tensors(out)):
            dst.copy_(src.detach())

    def close(self) -> None:
        self.args, self.outs, self.last = [], [], None
        for m in self.bufs:
            m.close()
        self.bufs = []


def switch_in(t: torch.Tensor | None = None) -> None:
    """Writes one element (of ``t``, else of a scratch tensor) and waits: the GPU comes to this
    process's context here, outside the call's own figures (it was serving the judge's context:
    time-sliced contexts take turns, and a turn starts in a few hundred microseconds on an
    H100). The null call is this alone."""
    if t is None or not t.numel():
        t = torch.empty(1, device="cuda")
    t.view(-1)[:1].zero_()
    torch.cuda.synchronize()


def null(device: torch.device) -> dict[str, Any]:
    """The path's null call (``wnull``): a turn of the GPU, nothing computed, nothing written."""
    if device.type == "cuda":
        switch_in()
    return {"ok": True}


def call(
    phase: Phase,
    fn: Callable[..., Any],
    clock: Callable[[], int] = time.perf_counter_ns,
    wrap: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
) -> dict[str, Any]:
    """One call of ``fn`` on the phase's inputs (inside ``wrap()`` when given), its outputs
    written into the output buffer, the device drained. Returns the subject's own figures:
    ``ms`` (CUDA events around the call alone, or the host clock on the cpu), ``host_ms`` and,
    on cuda, ``tail_ms`` (how long the device stayed busy after the call's closing event)."""
    cuda = phase.device.type == "cuda"
    c0 = clock()
    if cuda:
        switch_in(phase.outs[0] if phase.outs else None)
    c1 = clock()
    with wrap() if wrap is not None else contextlib.nullcontext():
        if cuda:
            ev0 = torch.cuda.Event(enable_timing=True)
            ev1 = torch.cuda.Event(enable_timing=True)
            h0 = clock()
            ev0.record()
            out = fn(*phase.args)
            ev1.record()
        else:
            h0 = clock()
            out = fn(*phase.args)
            h1 = clock()
    if cuda:
        ev1.synchronize()
        te = clock()
        torch.cuda.synchronize()
        h1 = clock()
        own = {"ms": ev0.elapsed_time(ev1), "tail_ms": (h1 - te) / 1e6, "host_ms": (h1 - h0) / 1e6}
    else:
        own = {"ms": (h1 - h0) / 1e6, "host_ms": (h1 - h0) / 1e6}
    p0 = clock()
    phase.put(out)
    own["put_ms"] = (clock() - p0) / 1e6
    own["handler_ms"] = (clock() - c0) / 1e6
    own["switch_ms"] = (c1 - c0) / 1e6
    # freed outside the judge's window (``Phase.done``): a large output's free (an munmap on the
    # cpu) is no part of the call's time, as the null call it is measured against has none
    phase.last = out
    if cuda:
        torch.cuda.synchronize()
    return {"own": own}
