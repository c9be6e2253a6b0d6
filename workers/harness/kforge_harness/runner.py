"""The runner: the untrusted side. Imports the candidate and runs it on the judge's request.

Started by the judge as ``python -m kforge_harness.runner --cmd-fd R --reply-fd W ...``. It
never sees the task's source, the reference outputs or the secret seed; it receives inputs,
runs ``ModelNew``, and sends outputs and times back. Everything it reports is checked by the
judge where it can be; what only the runner can observe (forbidden PyTorch ops, mutated or
aliased inputs, native calls, tampering) comes back as flags.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import sys
import time
import traceback
from typing import Any

# Capture the clocks before anything of the candidate's can run.
_CLOCK = time.perf_counter_ns
_SLEEP = time.sleep

from kforge_harness import cudainit  # noqa: E402 - before PyTorch, to overlap its import

# The CUDA context is made while PyTorch is imported (warm_up waits for it).
_CUDA_INIT = (
    cudainit.start_primary_context()
    if "--backend" in sys.argv[:-1] and sys.argv[sys.argv.index("--backend") + 1] == "cuda"
    else None
)

import torch  # noqa: E402

from kforge_harness import elfsyms, nativeguard, noproc, subject, wire  # noqa: E402
from kforge_harness import guard as guardmod  # noqa: E402
from kforge_harness.transport import Transport, answer_devprobe  # noqa: E402

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ATen operators a profiled forward may show besides the guard's allowed ones: composite
# operators that only return views or the tensor itself (their copying branches show as leaves).
PROFILE_ALLOWED = guardmod.ALLOWED_OPS | {
    "reshape",
    "contiguous",
    "to",
    "type_as",
    "view_as",
    "expand_as",
    "chunk",
    "item",
    "is_nonzero",
    "numel",
    "is_contiguous",
    "requires_grad_",
    "detach_",
    "size",
    "stride",
    "flatten",
    "unflatten",
    "squeeze_",
    "unsqueeze_",
    "t_",
    "result_type",
    "is_floating_point",
}


class GuardedCall:
    """One call of the candidate's forward under the compute guard, as a context manager
    (``with GuardedCall(runner): out = model(*inputs)``). On leaving, ``flags`` holds what the
    call did wrong: a PyTorch compute operator (``torch_compute``; the ForbiddenOp goes on), a
    guard switched off (``guard_tamper``), Python or NumPy compute (``foreign_compute``), no kernel
    launched (``kernel_not_launched``). The flags are also appended to ``sink`` when one is given.
    ``grad=False``: autograd off for the call, as the baselines are timed (torch.no_grad).
    Owned by the runner's thread; one per call."""

    def __init__(self, runner: Runner, sink: list[str] | None = None, grad: bool = True) -> None:
        self.runner = runner
        self.sink = sink
        self.grad = grad
        self.grad_before = True
        self.flags: list[str] = []
        self.guard: guardmod.NativeGuard | guardmod.ComputeGuard | None = None
        self.calls_before = 0

    def __enter__(self) -> GuardedCall:
        r = self.runner
        self.calls_before = sum(k.calls for k in r.kernels)
        self.guard = guardmod.make_guard(r.native)
        r.foreign.clear()
        self.grad_before = torch.is_grad_enabled()
        if not self.grad:
            torch.set_grad_enabled(False)
        r.in_forward = True
        try:
            self.guard.__enter__()
        except BaseException:
            r.in_forward = False
            torch.set_grad_enabled(self.grad_before)
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        r, g, flags = self.runner, self.guard, self.flags
        assert g is not None
        raised: guardmod.ForbiddenOp | None = None
        try:
            if exc_type is None and not guardmod.guard_active(g):
                flags.append("guard_tamper")
            try:
                g.__exit__(exc_type, exc, tb)
            except guardmod.ForbiddenOp as e:  # the native guard's word on another exception
                raised = e
        finally:
            r.in_forward = False
            torch.set_grad_enabled(self.grad_before)
        if g.tampered and "guard_tamper" not in flags:
            flags.append("guard_tamper")
        if g.violations:
            flags.append("torch_compute")
        if r.foreign:
            flags.append("foreign_compute")
        if r.args.format == "native" and sum(k.calls for k in r.kernels) == self.calls_before:
            flags.append("kernel_not_launched")
        if self.sink is not None:
            self.sink.extend(flags)
        if raised is not None:
            raise raised
        return False


class Runner:
    """State of one runner process: the candidate's model, its device and the guards."""

    def __init__(self, args: argparse.Namespace, dev_sock: socket.socket | None = None) -> None:
        self.transport = Transport(args.xfer, dev_sock)
        self.in_forward = False
        self.foreign: list[str] = []
        self._shadow_numpy_escapes()
        self.args = args
        self.backend = args.backend
        self.device = torch.device("cuda" if args.backend == "cuda" else "cpu")
        self.model: torch.nn.Module | None = None
        self.kernels: list[Any] = []
        self.integrity: guardmod.Integrity | None = None
        self.last_inputs: list[Any] | None = None
        self.phase: subject.Phase | None = None  # the timing phase's buffers
        self._ops: set[str] | None = None  # the ATen operators' names (elfsyms), read on first use
        # the C++ guard, or None (then the Python one guards, and guard_note says why)
        self.native, self.guard_note = nativeguard.load(nativeguard.library_path(), guardmod.ALLOWED_OPS)
        # shared objects mapped before the candidate's import (PyTorch's, Python's, the guard's):
        # any later one outside the trusted roots (the interpreter's and PyTorch's installation,
        # the system's) is checked by _new_libraries after each checked call
        self.seen_libraries = elfsyms.loaded_libraries()
        self.trusted_roots = tuple(
            os.path.join(os.path.realpath(r), "")
            for r in {
                sys.prefix,
                sys.base_prefix,
                sys.exec_prefix,
                os.path.dirname(os.path.dirname(torch.__file__)),
                "/usr",
                "/lib",
                "/lib64",
            }
        )

    # -- set-up -------------------------------------------------------------------------
    def _shadow_numpy_escapes(self) -> None:
        """Wraps the ways out of PyTorch into Python or NumPy compute (``Tensor.numpy``,
        ``__array__``, ``tolist``) so that calling them inside forward is recorded."""
        for name in ("numpy", "__array__", "tolist"):
            original = getattr(torch.Tensor, name)

            def wrapper(tensor: Any, *a: Any, _orig: Any = original, _name: str = name, **k: Any) -> Any:
                if self.in_forward:
                    self.foreign.append(_name)
                return _orig(tensor, *a, **k)

            setattr(torch.Tensor, name, wrapper)

    def _prepare_runtime(self) -> None:
        os.environ["KFORGE_BACKEND"] = self.backend
        if self.args.lib:
            os.environ["KFORGE_KERNEL_LIB"] = self.args.lib
        sys.path.insert(0, HARNESS_DIR)
        import kforge_runtime

        original = kforge_runtime.load
        owned = self.kernels

        def load(path: str | None = None) -> Any:
            k = original(path)
            owned.append(k)
            return k

        kforge_runtime.load = load

    def _import_candidate(self) -> Any:
        path = self.args.candidate
        if os.path.isdir(path):
            sys.path.insert(0, os.path.abspath(path))
            file = os.path.join(path, "model_new.py")
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
            file = path
        if self.args.ext_dir:
            sys.path.insert(0, self.args.ext_dir)
        spec = importlib.util.spec_from_file_location("kforge_candidate", file)
        if spec is None or spec.loader is None:
            raise RuntimeError("cannot import the candidate")
        module = importlib.util.module_from_spec(spec)
        sys.modules["kforge_candidate"] = module
        spec.loader.exec_module(module)
        return module

    def init(self, msg: dict[str, Any]) -> dict[str, Any]:
        flags: list[str] = []
        allow_tf32 = bool(msg.get("allow_tf32"))
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        torch.backends.cudnn.allow_tf32 = allow_tf32
        self._prepare_runtime()
        self.integrity = guardmod.Integrity()
        module = self._import_candidate()
        cls = getattr(module, "ModelNew", None)
        if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            return {"error": "the candidate defines no ModelNew(nn.Module)", "flags": flags}
        for klass in cls.__mro__:
            if klass.__name__ == "Model" or klass.__module__ in ("kforge_task", "model", "reference"):
                flags.append("inherits_reference")
                break
        init_args, state = self.transport.decode_all(msg, [msg["init_args"], msg["state"]])
        torch.manual_seed(int(msg["seed"]))
        model = cls(*init_args)
        names = [n for n, _ in msg.get("state_names", [])]
        if names:
            mine = model.state_dict()
            if set(mine.keys()) == set(names) and all(
                tuple(mine[n].shape) == tuple(t.shape) for n, t in zip(names, state)
            ):
                model.load_state_dict(dict(zip(names, state)))
            else:
                flags.append("parameters_not_shared")
        self.model = model.to(self.device)
        # from here on the runner makes no process (kforge_harness.noproc): one the candidate's
        # import left running, or could start later, would compute where no guard looks
        details = []
        left = noproc.children()
        if left:
            flags.append("native_process")
            details.append(
                f"{len(left)} process(es) the candidate started were still running after its import"
            )
        why = noproc.forbid()
        return {
            "ok": True,
            "flags": flags,
            "details": details,
            "guard": "native" if self.native else "python",
            "guard_note": self.guard_note if why is None else f"{self.guard_note or ''} ({why})".strip(),
        }

    # -- one guarded call ----------------------------------------------------------------
    def _forward(self, inputs: list[Any]) -> tuple[Any, list[str]]:
        assert self.model is not None
        call = GuardedCall(self)
        out = None
        try:
            with call:
                out = self.model(*inputs)
        except guardmod.ForbiddenOp:
            out = None
        return out, call.flags

    def _operator_names(self) -> set[str]:
        if getattr(self, "_ops", None) is None:
            self._ops = elfsyms.operator_names() - guardmod.ALLOWED_OPS
        return self._ops

    def _new_libraries(self) -> tuple[list[str], list[str]]:
        """(flags, details) for the shared objects loaded since the last look that import what
        reaches past the dispatcher (elfsyms.FORBIDDEN_IMPORTS): a C++ extension's calls that
        neither guard nor the profiler would see. Libraries of the interpreter's and PyTorch's
        own installation (loaded lazily, and allowed those imports) are not checked."""
        now = elfsyms.loaded_libraries()
        fresh, self.seen_libraries = now - self.seen_libraries, self.seen_libraries | now
        details = []
        for path in sorted(fresh):
            if os.path.realpath(path).startswith(self.trusted_roots):
                continue
            details += [
                f"{os.path.basename(path)} imports {what}"
                for what in elfsyms.forbidden_imports(path, self._operator_names())
            ]
        return (["torch_internals"] if details else []), details

    def _inputs(self, msg: dict[str, Any]) -> list[Any]:
        (fresh,) = self.transport.decode_all(msg, [msg["inputs"]], device=self.device)
        if msg.get("reuse") and self.last_inputs is not None:
            old = self.last_inputs
            if len(old) == len(fresh) and all(
                isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                for a, b in zip(old, fresh)
                if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)
            ):
                with torch.no_grad():
                    for a, b in zip(old, fresh):
                        if isinstance(a, torch.Tensor):
                            a.copy_(b)
                return old
        return fresh

    @staticmethod
    def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
        if a.dtype.is_floating_point and a.element_size() in (2, 4, 8):
            itype = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
            return bool(torch.equal(a.contiguous().view(itype), b.contiguous().view(itype)))
        return bool(torch.equal(a, b))

    def _check_outputs(self, inputs: list[Any], snap: list[Any], out: Any) -> list[str]:
        flags: list[str] = []
        outs = out if isinstance(out, (list, tuple)) else [out]
        in_t = [t for t in inputs if isinstance(t, torch.Tensor)]
        for o in outs:
            if isinstance(o, torch.Tensor):
                if type(o) is not torch.Tensor:
                    flags.append("tensor_subclass")
                    continue
                if o.device.type != self.device.type:
                    flags.append("wrong_device")
                for t in in_t:
                    if o.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() and o.numel():
                        flags.append("aliases_input")
        for t, s in zip(in_t, [x for x in snap if isinstance(x, torch.Tensor)]):
            if not self._same_bits(t, s):
                flags.append("mutates_input")
                break
        return flags

    def _snapshot_outputs(self, out: Any) -> Any:
        if isinstance(out, torch.Tensor):
            return out.detach().clone() if type(out) is torch.Tensor else out
        if isinstance(out, (list, tuple)):
            return type(out)(self._snapshot_outputs(o) for o in out)
        return out

    def _late_writes(self, out: Any, snap: Any, wait_s: float) -> bool:
        """True when the outputs change after forward returned (work left running)."""
        _SLEEP(wait_s)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        for o, s in zip(_flat(out), _flat(snap)):
            if isinstance(o, torch.Tensor) and type(o) is torch.Tensor and not self._same_bits(o, s):
                return True
        return False

    def _profiled_forward(self, inputs: list[Any]) -> tuple[Any, list[str]]:
        """forward under the guard and under the profiler: the profiler sees every ATen operator
        at the dispatcher's entry, even where the candidate disabled the dispatch mode."""
        try:
            with _profiler() as prof:
                out, flags = self._forward(inputs)
            events = list(prof.function_events)
        except guardmod.ForbiddenOp:
            raise
        except Exception:  # noqa: BLE001 - the profiler failing is itself suspicious
            return self._forward(inputs)[0], ["guard_tamper"]
        for ev in events:
            name = ev.name
            if not name.startswith("aten::") or ev.cpu_children:
                continue
            if name[len("aten::") :] not in PROFILE_ALLOWED and "torch_compute" not in flags:
                flags.append("torch_compute")
        return out, flags

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        inputs = self._inputs(msg)
        self.last_inputs = inputs
        snap = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        t0 = _CLOCK()
        out, flags = self._profiled_forward(inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = (_CLOCK() - t0) / 1e9
        if out is None and "torch_compute" in flags:
            return {"error": "ModelNew called a PyTorch compute operator", "flags": flags}
        out_snap = self._snapshot_outputs(out)
        flags += self._check_outputs(inputs, snap, out)
        if self._late_writes(out, out_snap, min(0.2, 0.01 + 2 * elapsed)):
            flags.append("background_work")
        # libraries loaded since the last checked call: at import (load_inline, an extension), in
        # __init__ or inside forward; every evaluation makes checked calls before any timing
        lib_flags, details = self._new_libraries()
        flags += lib_flags
        counter, arenas = [0], []
        enc = self.transport.encode(f"out{msg['seq']}_", _plain(out_snap), counter, arenas)
        return {"outputs": enc, "arenas": arenas, "flags": sorted(set(flags)), "details": details}

    def devprobe(self, msg: dict[str, Any]) -> dict[str, Any]:
        return answer_devprobe(self.transport, msg)

    def wsetup(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Maps the timing phase's buffers (kforge_harness.subject)."""
        self.wend({})
        self.phase = subject.Phase(msg, self.transport, self.device)
        return {"ok": True}

    def wcall(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One timed call (kforge_harness.windows) under the guard, with autograd off as the
        baselines are timed. A refused operator ends it (its ForbiddenOp reaches the reply as
        ``torch_compute``)."""
        if self.phase is None:
            raise ValueError("no timing phase: wsetup first")
        assert self.model is not None
        flags: list[str] = []
        reply = subject.call(self.phase, self.model, _CLOCK, lambda: GuardedCall(self, flags, grad=False))
        reply["flags"] = sorted(set(flags))
        return reply

    def wdone(self, msg: dict[str, Any]) -> dict[str, Any]:
        """After the window: frees the call's outputs (the integrity check follows, as for every
        command)."""
        if self.phase is not None:
            self.phase.done()
        return {"ok": True}

    def wend(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.phase is not None:
            self.phase.close()
            self.phase = None
        return {"ok": True}


def _flat(value: Any) -> list[Any]:
    """Nested outputs as a flat list. (Local: importing kforge_harness.compare here would put the
    judge's comparison module under the runner's integrity snapshot for no use.)"""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


def _plain(value: Any) -> Any:
    """Outputs as the wire can carry them: a subclass or odd object becomes a marker string."""
    if isinstance(value, torch.Tensor):
        return value if type(value) is torch.Tensor else "<tensor subclass>"
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"<{type(value).__name__}>"


def _profiler() -> Any:
    """The operator profiler of the checked calls: PyTorch's own (not Kineto's), which records
    the same ATen events at the dispatcher's entry without Kineto's start-up (1.6 s on a 2-core
    CPU, more where CUPTI loads)."""
    return torch.autograd.profiler.profile(use_kineto=False)


def warm_up(backend: str, native: Any, standby: bool = False) -> None:
    """Pays the one-time costs of the CUDA context, the profiler and the guard before the first
    command, while the judge is busy; nothing of the candidate's has been imported yet. In
    ``standby`` (a pool's runner) nothing runs on the GPU yet, which may be timing another
    evaluation: ``warm_up_device`` follows the adoption."""
    if _CUDA_INIT is not None:
        _CUDA_INIT.join()
        torch.cuda.init()
    x = torch.zeros(16)
    with _profiler() as prof:
        x.add_(1)
    list(prof.function_events)
    with guardmod.make_guard(native):  # the Python one's first use imports torch._dynamo (2 s)
        torch.empty_like(x)
    if not standby:
        warm_up_device(backend)


def warm_up_device(backend: str) -> None:
    """The first kernels on the device (PyTorch loads its modules lazily)."""
    if backend == "cuda":
        x = torch.zeros(16, device=backend)
        x.add_(1)
        torch.cuda.synchronize()


def _await_adoption(runner: Runner, cmd_fd: int, reply_fd: int) -> None:
    """Standby: waits for the judge's ``adopt`` (where its candidate was copied), takes it, and
    answers; anything else, or the channel's end, ends the runner."""
    try:
        msg = wire.recv(cmd_fd)
    except wire.ChannelError:
        wire.quit_now()
    if msg.get("cmd") != "adopt":
        wire.quit_now()
    args = runner.args
    reply: dict[str, Any] = {"ok": True}
    try:
        for name in ("candidate", "format", "lib", "ext_dir", "dev_sock"):
            value = msg.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"adopt: {name} is not a string")
            setattr(args, name, value)
        if args.candidate is None or args.format not in ("native", "kernelbench", "cuda-agent"):
            raise ValueError("adopt: no candidate, or an unknown format")
        sock = wire.connect_unix(args.dev_sock) if args.backend == "cuda" else None
        runner.transport = Transport(args.xfer, sock)
        warm_up_device(args.backend)
    except Exception as e:  # noqa: BLE001 - said to the judge, which ends the evaluation
        reply = {"error": f"{type(e).__name__}: {e}"}
    reply["seq"] = msg.get("seq")
    reply["nonce"] = msg.get("nonce")
    wire.send(reply_fd, reply)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kforge_harness.runner")
    p.add_argument("--cmd-fifo", required=True)
    p.add_argument("--reply-fifo", required=True)
    p.add_argument("--xfer", required=True)
    p.add_argument("--candidate", help="required unless --standby")
    p.add_argument("--format", choices=["native", "kernelbench", "cuda-agent"])
    p.add_argument("--backend", required=True, choices=["cuda", "cpu"])
    p.add_argument("--lib")
    p.add_argument("--ext-dir")
    p.add_argument("--dev-sock", help="the judge's Unix socket for device arenas (cuda)")
    p.add_argument("--standby", action="store_true", help="a pool's: the candidate comes in 'adopt'")
    args = p.parse_args(argv)
    if not args.standby and (args.candidate is None or args.format is None):
        p.error("--candidate and --format are required unless --standby")
    dev_sock = wire.connect_unix(args.dev_sock) if args.backend == "cuda" and not args.standby else None
    runner = Runner(args, dev_sock)
    warm_up(args.backend, runner.native, args.standby)  # while the judge builds its reference (or in standby)
    cmd_fd = os.open(args.cmd_fifo, os.O_RDONLY | os.O_CLOEXEC)
    reply_fd = os.open(args.reply_fifo, os.O_WRONLY | os.O_CLOEXEC)
    if args.standby:
        _await_adoption(runner, cmd_fd, reply_fd)
    handlers = {
        "init": runner.init,
        "run": runner.run,
        "wsetup": runner.wsetup,
        "wcall": runner.wcall,
        "wdone": runner.wdone,
        "wnull": lambda m: subject.null(runner.device),
        "wend": runner.wend,
        "devprobe": runner.devprobe,
        "ping": lambda m: {"pong": True},
    }

    def answer(msg: dict[str, Any]) -> dict[str, Any]:
        kind = msg.get("cmd")
        if kind != "ping":
            runner.transport.release()  # the judge has copied the last reply's arena by now
        handler = handlers.get(kind)
        try:
            reply = handler(msg) if handler else {"error": f"unknown command {kind!r}"}
        except guardmod.ForbiddenOp as e:
            reply = {"error": str(e), "flags": ["torch_compute"]}
        except BaseException as e:  # noqa: BLE001 - report whatever the candidate raised
            tb = traceback.format_exc()
            reply = {"error": f"{type(e).__name__}: {e}", "traceback": tb[-4000:]}
        # (not inside a timed call's window: the wdone after it checks)
        if runner.integrity is not None and kind not in ("wcall", "wnull"):
            changed = runner.integrity.changed()
            if changed:
                reply.setdefault("flags", []).append("harness_tamper")
                reply["tampered"] = changed[:20]
        return reply

    wire.serve(cmd_fd, reply_fd, answer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
