"""The reference's runner: the task's side of the judge. Untrusted, like the candidate's runner.

A task is user code: its module-level statements, ``Model``, ``get_inputs``, ``get_init_inputs``
and ``get_test_inputs`` run here and nowhere else (the judge never imports a task). The judge
(kforge_harness.reference) starts it as ``python -m kforge_harness.refrunner --cmd-fifo C
--reply-fifo R --xfer X --task FILE --backend B [--dev-sock S]``, inside kforge-jail's run
profile when the judge has a jail, in a transfer directory of its own: it shares nothing with
the candidate's runner, which it never sees.

It makes what only the task can make (the reference model, each trial's inputs from the seed
the judge sends, the reference outputs, the eager and torch.compile times, the graph for
policies) and sends it back over the same channel as the candidate's runner (length-prefixed
JSON, tensors as files or device arenas). The judge checks sizes and shapes before it uses
anything, and compares on its own copies. A task that lies here lies only about itself.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import socket
import sys
import time
import traceback
from typing import Any

from kforge_harness import cudainit  # noqa: E402 - before PyTorch, to overlap its import

# the CUDA context, made while PyTorch is imported (not for --no-device: inspect needs none)
_CUDA_INIT = (
    cudainit.start_primary_context()
    if "--backend" in sys.argv[:-1]
    and sys.argv[sys.argv.index("--backend") + 1] == "cuda"
    and "--no-device" not in sys.argv
    else None
)

import torch  # noqa: E402

from kforge_harness import inputs, timing, wire  # noqa: E402
from kforge_harness.refwindows import TaskPhase  # noqa: E402
from kforge_harness.task import Task, TaskError, load_task  # noqa: E402
from kforge_harness.transport import Transport, answer_devprobe  # noqa: E402

# The input slots one process keeps at once: a trial's inputs, the timing sets. The judge drops
# what it no longer needs; past this the oldest go.
MAX_SLOTS = 16


def device_for(backend: str) -> torch.device:
    if backend == "cuda":
        if not torch.cuda.is_available():
            raise TaskError("backend cuda requested but no CUDA device is visible")
        return torch.device("cuda")
    return torch.device("cpu")


def set_precision(allow_tf32: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32


def reference_outputs(model: torch.nn.Module, args: list[Any]) -> Any:
    """The reference's outputs, left on the device where they were computed."""
    with torch.no_grad():
        return model(*args)


class RefRunner:
    """The task's process state: the loaded task, its model (and a float64 copy, made on first
    use), and the input slots the judge asked for. Owned by the process's one thread."""

    def __init__(self, args: argparse.Namespace, dev_sock: socket.socket | None) -> None:
        self.args = args
        self.transport = Transport(args.xfer, dev_sock)
        self.task: Task | None = None
        self.model: torch.nn.Module | None = None
        self.model64: torch.nn.Module | None = None
        self.device = torch.device("cpu")
        self.slots: dict[str, list[Any]] = {}
        self.timing = TaskPhase(self._task, self._model, lambda: self.device, lambda: self.transport)

    def _task(self) -> Task:
        if self.task is None:
            self.task = load_task(self.args.task, self.args.backend)
        return self.task

    def _model(self) -> torch.nn.Module:
        if self.model is None:
            raise TaskError("no model: load first")
        return self.model

    def _encode(self, prefix: str, value: Any) -> tuple[Any, list[dict[str, int]]]:
        arenas: list[dict[str, int]] = []
        return self.transport.encode(prefix, value, [0], arenas), arenas

    def _slot(self, msg: dict[str, Any]) -> list[Any]:
        args = self.slots.get(str(msg.get("slot")))
        if args is None:
            raise ValueError(f"no input slot {msg.get('slot')!r}")
        return args

    # -- commands ---------------------------------------------------------------------------
    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Loads the task and builds its model after ``manual_seed(init_seed)``. Replies with
        what the candidate's ModelNew is built from (the init arguments, the state dict) and
        the task's declared settings."""
        task = self._task()
        self.device = device_for(self.args.backend)
        set_precision(task.allow_tf32)
        init_args = task.get_init_inputs()
        torch.manual_seed(int(msg["init_seed"]))
        self.model = task.model_class()(*init_args).to(self.device)
        state = self.model.state_dict()
        names = list(state.keys())
        arenas: list[dict[str, int]] = []
        counter = [0]
        return {
            "tolerance": task.tolerance,
            "allow_tf32": task.allow_tf32,
            "test_inputs": len(task.get_test_inputs()),
            "init_args": self.transport.encode("init_", init_args, counter, arenas),
            "state": self.transport.encode("state_", [state[n] for n in names], counter, arenas),
            "state_names": [[n, list(state[n].shape)] for n in names],
            "arenas": arenas,
        }

    def draw(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Draws one trial's inputs (kforge_harness.inputs.draw) into slot ``slot``. The reply
        carries them with ``send`` (the default), and the reference's outputs on them with
        ``forward``: one round trip per trial."""
        slot = str(msg["slot"])
        self.slots.pop(slot, None)
        while len(self.slots) >= MAX_SLOTS:
            self.slots.pop(next(iter(self.slots)))
        args = inputs.draw(self._task(), str(msg["kind"]), int(msg["seed"]), self.device)
        self.slots[slot] = args
        reply: dict[str, Any] = {"bytes": inputs.nbytes(args), "arenas": []}
        counter = [0]
        if msg.get("send", True):
            reply["inputs"] = self.transport.encode("in_", args, counter, reply["arenas"])
        if msg.get("forward"):
            out = reference_outputs(self._model(), args)
            reply["outputs"] = self.transport.encode("ref_", out, counter, reply["arenas"])
        return reply

    def forward(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reference's outputs on slot ``slot``; ``wide``: computed in float64 (a copy of
        the model and the inputs)."""
        args = self._slot(msg)
        model = self._model()
        if msg.get("wide"):
            if self.model64 is None:
                self.model64 = copy.deepcopy(model).double()
            model = self.model64
            args = [
                a.double() if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a for a in args
            ]
        out = reference_outputs(model, args)
        enc, arenas = self._encode("ref_", out)
        return {"outputs": enc, "arenas": arenas}

    def eager(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Eager times on slot ``slot`` alone (check-task's window)."""
        policy = timing.Policy(**msg["policy"])
        with torch.no_grad():
            return {"timing": timing.measure(self._model(), [self._slot(msg)], self.device, policy)}

    def inspect(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The module's graph for policies (kforge_harness.inspect_graph), from a fresh load."""
        from kforge_harness.inspect_graph import inspect_task

        return {"graph": inspect_task(self.args.task, self.args.backend)}

    def drop(self, msg: dict[str, Any]) -> dict[str, Any]:
        for s in msg.get("slots") or []:
            self.slots.pop(str(s), None)
        return {"ok": True}

    def devprobe(self, msg: dict[str, Any]) -> dict[str, Any]:
        return answer_devprobe(self.transport, msg)

    def attach(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A new judge's device channel (a pooled process serves one judge after another)."""
        if self.transport.sock is not None:
            self.transport.sock.close()
        self.transport = Transport(self.args.xfer, wire.connect_unix(str(msg.get("dev_sock") or "")))
        return {"ok": self.transport.sock is not None}

    def release(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Drops everything of the evaluation that ends (its model, its inputs, its device
        channel) before the pool keeps this process for the next evaluation of the task."""
        self.slots.clear()
        self.timing.end({})
        self.model = self.model64 = None
        self.transport.release()
        if self.transport.sock is not None:
            self.transport.sock.close()
            self.transport.sock = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return {"ok": True}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kforge_harness.refrunner")
    p.add_argument("--cmd-fifo", required=True)
    p.add_argument("--reply-fifo", required=True)
    p.add_argument("--xfer", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--backend", required=True, choices=["cuda", "cpu"])
    p.add_argument("--dev-sock")
    p.add_argument("--no-device", action="store_true", help="no CUDA context ahead (inspect)")
    p.add_argument(
        "--pooled",
        action="store_true",
        help="a pool's: serves one judge after another (their closing the channel is no end)",
    )
    args = p.parse_args(argv)
    os.environ["KFORGE_BACKEND"] = args.backend
    if _CUDA_INIT is not None:
        _CUDA_INIT.join()
    ref = RefRunner(args, wire.connect_unix(args.dev_sock) if args.backend == "cuda" else None)
    # a pool's keeps a writer of its own on the command FIFO, so that a judge that lets go of it
    # is not an end of file; it ends with its pool (its parent), or on "exit"
    cmd_fd = os.open(args.cmd_fifo, (os.O_RDWR if args.pooled else os.O_RDONLY) | os.O_CLOEXEC)
    reply_fd = os.open(args.reply_fifo, os.O_WRONLY | os.O_CLOEXEC)
    handlers = {
        "load": ref.load,
        "draw": ref.draw,
        "forward": ref.forward,
        "eager": ref.eager,
        "inspect": ref.inspect,
        "drop": ref.drop,
        "devprobe": ref.devprobe,
        "attach": ref.attach,
        "release": ref.release,
        "ping": lambda m: {"pong": True},
        **ref.timing.handlers(),
    }

    def answer(msg: dict[str, Any]) -> dict[str, Any]:
        kind = msg.get("cmd")
        if kind != "ping":
            ref.transport.release()  # the judge has copied the last reply's arenas by now
        handler = handlers.get(kind)
        t0 = time.monotonic()
        try:
            reply = handler(msg) if handler else {"error": f"unknown command {kind!r}"}
        except TaskError as e:
            reply = {"error": str(e)}
        except BaseException as e:  # noqa: BLE001 - the task may raise anything, SystemExit included
            reply = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
        reply["seconds"] = round(time.monotonic() - t0, 3)
        return reply

    wire.serve(cmd_fd, reply_fd, answer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
