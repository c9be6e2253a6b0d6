"""The task's process in a timing phase (kforge_harness.windows): it draws each call's inputs
into the buffer it shares with the judge, writes the reference's outputs on them when asked,
and is itself the subject for eager, torch.compile and the null call.

Commands (handled by ``TaskPhase``, which refrunner.RefRunner owns):

* ``wprepare {seed}``: draws one input set; replies with its template, its layout and the
  reference outputs' layout (no tensor data): what the judge sizes the buffers by.
* ``wsetup``: maps the phase's buffers (kforge_harness.subject.Phase).
* ``wdraw {seed, ref}``: draws the call's inputs into the input buffer (the same structure as
  the prepared set, or an error); with ``ref``, the reference's outputs on them into the output
  buffer, and ``finite`` says whether they are all finite.
* ``wcompile``: torch.compile of the model and its first call (the compile's seconds, or its
  error: a property of the task, not a failure).
* ``wcall {subject}``: one call of ``eager``, ``compile`` or ``null`` (zeros of the outputs'
  size written into the output buffer) on the buffer's inputs (subject.call).
* ``wend``: unmaps the buffers.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from kforge_harness import inputs, subject
from kforge_harness.shared import Layout, template, tensors


class TaskPhase:
    """The task's side of a timing phase. ``model`` makes the reference model (the loaded one);
    ``task`` the loaded task."""

    def __init__(
        self,
        task: Callable[[], Any],
        model: Callable[[], torch.nn.Module],
        device: Callable[[], torch.device],
        transport: Callable[[], Any],
    ) -> None:
        self._task, self._model, self._device, self._transport = task, model, device, transport
        self.phase: subject.Phase | None = None
        self.template: Any = None
        self.compiled: Any = None
        self.zeros: list[torch.Tensor] = []

    def _draw(self, seed: int) -> list[Any]:
        return inputs.draw(self._task(), "task", seed, self._device())

    def prepare(self, msg: dict[str, Any]) -> dict[str, Any]:
        args = self._draw(int(msg["seed"]))
        with torch.no_grad():
            out = self._model()(*args)
        self.template = template(args)
        return {
            "template": self.template,
            "in_layout": Layout.of(args).describe(),
            "out_layout": Layout.of(out).describe(),
        }

    def setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.end({})
        self.phase = subject.Phase(msg, self._transport(), self._device())
        if msg["inputs"].get("template") != self.template:
            raise ValueError("the judge's template is not the prepared one")
        self.zeros = [torch.zeros_like(t) for t in self.phase.outs]
        return {"ok": True}

    def _phase(self) -> subject.Phase:
        if self.phase is None:
            raise ValueError("no timing phase: wsetup first")
        return self.phase

    def draw(self, msg: dict[str, Any]) -> dict[str, Any]:
        phase = self._phase()
        phase.done()
        args = self._draw(int(msg["seed"]))
        if template(args) != self.template or not phase.inputs_layout.matches(args):
            raise ValueError("get_inputs() returned another structure than its first set")
        for dst, src in zip(tensors(phase.args), tensors(args)):
            dst.copy_(src)
        reply: dict[str, Any] = {}
        if msg.get("ref"):
            with torch.no_grad():
                out = self._model()(*args)
            phase.put(out)
            reply["finite"] = inputs.all_finite(out)
            del out
        if phase.device.type == "cuda":
            torch.cuda.synchronize()
        return reply

    def compile(self, msg: dict[str, Any]) -> dict[str, Any]:
        phase = self._phase()
        self.compiled = None
        try:
            compiled = torch.compile(self._model())
            t0 = time.monotonic()
            with torch.no_grad():
                compiled(*phase.args)
            if phase.device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - inductor failures are a property of the task
            return {"compile_error": f"{type(e).__name__}: {str(e)[:500]}"}
        self.compiled = compiled
        return {"compile_seconds": round(time.monotonic() - t0, 3)}

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        phase = self._phase()
        which = msg.get("subject")
        if which == "null":
            fn: Any = lambda *a: self.zeros  # noqa: E731
        elif which == "eager":
            fn = self._model()
        elif which == "compile" and self.compiled is not None:
            fn = self.compiled
        else:
            raise ValueError(f"no subject {which!r}")
        with torch.no_grad():
            return subject.call(phase, fn)

    def end(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.phase is not None:
            self.phase.close()
            self.phase = None
        self.compiled = None
        self.zeros = []
        return {"ok": True}

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        return {
            "wprepare": self.prepare,
            "wsetup": self.setup,
            "wdraw": self.draw,
            "wcompile": self.compile,
            "wcall": self.call,
            "wend": self.end,
            "wnull": lambda m: subject.null(self._device()),
        }
