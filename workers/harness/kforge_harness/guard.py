"""Runner-side guards: forbid PyTorch compute inside ``ModelNew.forward``, detect tampering.

Two guards keep the same contract; ``make_guard`` picks one. ``NativeGuard`` (the default) is
the C++ library of ``nativeguard.py``: a dispatcher fallback above Autograd that sees every
operator call of the thread, about 0.25 us each. ``ComputeGuard`` is a TorchDispatchMode in
Python, 3 to 20 us a call, kept for a runner that cannot load the library. Both let through
only allocations, views and metadata queries; any other ATen operator is recorded and aborted
(``ForbiddenOp``, which derives from BaseException so that a candidate's ``except Exception``
cannot swallow it; the native guard's C++ error can be caught, but the operator is recorded all
the same, and the record is what the runner reports). C++ calls through the dispatcher
(load_inline extensions calling ATen) are seen as well.

``Integrity`` snapshots the functions the timing and checking code relies on before the
candidate is imported, and reports any that changed afterwards.
"""

from __future__ import annotations

import sys
import time
import types
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# ATen operator names (overload packets) that a ModelNew may call: allocation, views, metadata.
ALLOWED_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "zero_",
        "fill_",
        "full",
        "full_like",
        "new_zeros",
        "new_full",
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "as_strided",
        "alias",
        "detach",
        "t",
        "transpose",
        "permute",
        "expand",
        "squeeze",
        "unsqueeze",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "unbind",
        "narrow",
        "unfold",  # Tensor.unfold: windows as a strided view
        "view_as_real",
        "view_as_complex",
        "unflatten",
        "flatten",
        "_local_scalar_dense",
        "lift_fresh",
        "is_same_size",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "dim",
        "size",
        "stride",
        "resize_",
        "set_",
        "record_stream",
    }
)


class ForbiddenOp(BaseException):  # noqa: N818 - it is a BaseException on purpose
    """Raised inside forward when ModelNew calls a PyTorch compute operator."""


# The same as operator packets (torch.ops.aten.empty for aten.empty.memory_format): checking a
# call's packet costs one attribute and one set lookup, where its name cost hasattr and a string.
# Immutable, so a candidate that reached the guard could not widen what it allows.
ALLOWED_PACKETS = frozenset(getattr(torch.ops.aten, name) for name in ALLOWED_OPS)


class ComputeGuard(TorchDispatchMode):
    """Records forbidden ATen ops. ``violations`` holds their names in call order.

    The judge times a candidate's calls under this guard and the baselines without one, so its
    cost is the candidate's: every ATen call of a forward passes through __torch_dispatch__ in
    Python. It is kept small (on the H200's host the guard cost a 1.5 ms forward 40 to 80 us,
    bench/host_gap.py): an operator is checked by its packet, and __torch_dispatch__ is not
    wrapped in torch._disable_dynamo (about a third of the cost of an allowed op; dynamo has no
    business inside a forward that may not compute)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __init__(self) -> None:
        super().__init__()
        self.violations: list[str] = []
        self.ops = 0
        self.tampered = False  # NativeGuard's; a mode popped from the stack shows in guard_active

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops += 1
        if getattr(func, "overloadpacket", None) not in ALLOWED_PACKETS:
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            self.violations.append(name)
            raise ForbiddenOp(f"PyTorch operator aten.{name} called from ModelNew")
        return func(*args, **(kwargs or {}))


class NativeGuard:
    """ComputeGuard's contract through the C++ guard: ``with NativeGuard(lib):`` checks every
    dispatcher call the thread makes, and ``violations`` lists the refused operators' names.
    Composite operators (CompositeImplicitAutograd with no kernel of their own) pass, and the
    calls they make are checked one by one, as the Python mode sees them."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self._token = 0
        self.violations: list[str] = []
        self.ops = 0
        self.tampered = False  # left (or left and entered again) by someone else in between

    def __enter__(self) -> NativeGuard:
        self._token = self._lib.enter()
        if self._token <= 0:
            raise RuntimeError("the native compute guard is on already on this thread")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        refused = self._lib.leave(self._token)
        self.ops = int(self._lib.calls())
        if refused < 0:
            self.tampered = True
        elif refused:
            self.violations = self._lib.refused_names() or ["?"] * int(refused)
            if exc_type is not None and not issubclass(exc_type, ForbiddenOp):
                raise ForbiddenOp(f"PyTorch operator aten.{self.violations[0]} called from ModelNew") from exc

    def intact(self) -> bool:
        """True while this guard is on and nothing excluded its dispatch key."""
        return bool(self._lib.intact(self._token))


def make_guard(native: Any) -> NativeGuard | ComputeGuard:
    """A fresh guard: the native one when its library is loaded (``native``), else the Python one."""
    return NativeGuard(native) if native is not None else ComputeGuard()


try:  # an internal API: bound once, as guard_active runs in every timed call
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as _mode_stack
except ImportError:  # pragma: no cover - depends on the PyTorch version
    _mode_stack = None


def guard_active(guard: NativeGuard | ComputeGuard) -> bool:
    """True when ``guard`` is still on (its key included, or the mode still on the stack)."""
    if isinstance(guard, NativeGuard):
        return guard.intact()
    if _mode_stack is None:
        return True
    try:
        return any(m is guard for m in _mode_stack())
    except Exception:  # noqa: BLE001 - internal API; be conservative
        return True


def _watched() -> list[tuple[str, Any, str]]:
    """(label, owner, attribute) triples whose identity must not change."""
    import json
    import os
    import statistics
    import struct

    items: list[tuple[str, Any, str]] = [
        ("time.perf_counter_ns", time, "perf_counter_ns"),
        ("time.perf_counter", time, "perf_counter"),
        ("time.monotonic", time, "monotonic"),
        ("time.sleep", time, "sleep"),
        ("statistics.median", statistics, "median"),
        ("json.dumps", json, "dumps"),
        ("json.loads", json, "loads"),
        ("os.write", os, "write"),
        ("os.read", os, "read"),
        ("struct.pack", struct, "pack"),
        ("torch.allclose", torch, "allclose"),
        ("torch.equal", torch, "equal"),
        ("torch.dot", torch, "dot"),
        ("torch.mul", torch, "mul"),
        ("torch.empty", torch, "empty"),
        ("torch.from_file", torch, "from_file"),
        ("torch.Tensor.clone", torch.Tensor, "clone"),
        ("torch.Tensor.to", torch.Tensor, "to"),
        ("torch.Tensor.copy_", torch.Tensor, "copy_"),
        ("torch.Tensor.zero_", torch.Tensor, "zero_"),
        ("torch.Tensor.numpy", torch.Tensor, "numpy"),
        ("torch.Tensor.tolist", torch.Tensor, "tolist"),
        ("torch.Tensor.__array__", torch.Tensor, "__array__"),
        ("torch.cuda.synchronize", torch.cuda, "synchronize"),
        ("torch.cuda.Event", torch.cuda, "Event"),
        ("torch.utils._python_dispatch.TorchDispatchMode", torch.utils._python_dispatch, "TorchDispatchMode"),
    ]
    event = getattr(torch.cuda, "Event", None)
    if event is not None:
        for attr in ("record", "elapsed_time", "synchronize"):
            items.append((f"torch.cuda.Event.{attr}", event, attr))
    return items


def _function_parts(fn: Any) -> tuple[Any, ...]:
    fn = getattr(fn, "__func__", fn)
    return (
        getattr(fn, "__code__", None),
        getattr(fn, "__defaults__", None),
        getattr(fn, "__kwdefaults__", None),
    )


class Integrity:
    """A snapshot of harness-critical callables and of the harness's own code.

    For the harness modules (and the runner's ``__main__``) it keeps every module attribute, every
    attribute of every class they define, and the code, defaults and closure-free identity of
    every function, so a patched method, a replaced ``__code__`` or a rebound global is seen.
    """

    def __init__(self, extra_modules: tuple[str, ...] = ("__main__",)) -> None:
        self._refs = {label: getattr(owner, attr, None) for label, owner, attr in _watched()}
        self._modules: dict[str, tuple[types.ModuleType, dict[str, Any]]] = {}
        self._classes: dict[str, tuple[type, dict[str, Any]]] = {}
        self._functions: dict[str, tuple[Any, tuple[Any, ...]]] = {}
        for name, mod in list(sys.modules.items()):
            if not (
                name in extra_modules
                or name == "kforge_harness"
                or name.startswith("kforge_harness.")
                or name == "kforge_runtime"
            ):
                continue
            self._modules[name] = (mod, dict(vars(mod)))
            for key, val in vars(mod).items():
                if callable(val) and getattr(val, "__module__", None) == mod.__name__:
                    self._functions[f"{name}.{key}"] = (val, _function_parts(val))
                if isinstance(val, type) and val.__module__ == mod.__name__:
                    self._classes[f"{name}.{key}"] = (val, dict(vars(val)))
                    for attr, member in vars(val).items():
                        inner = getattr(member, "__func__", member)
                        if callable(inner) and hasattr(inner, "__code__"):
                            self._functions[f"{name}.{key}.{attr}"] = (inner, _function_parts(inner))

    def changed(self) -> list[str]:
        """Names of watched callables, harness attributes, classes or functions that changed."""
        out = []
        for label, owner, attr in _watched():
            if getattr(owner, attr, None) is not self._refs.get(label):
                out.append(label)
        for name, (mod, snapshot) in self._modules.items():
            if sys.modules.get(name) is not mod:
                out.append(f"module {name}")
                continue
            now = vars(mod)
            for key, val in snapshot.items():
                if now.get(key) is not val:
                    out.append(f"{name}.{key}")
        for name, (cls, snapshot) in self._classes.items():
            now = vars(cls)
            if set(now) != set(snapshot) or any(now[k] is not v for k, v in snapshot.items()):
                out.append(name)
        for name, (fn, parts) in self._functions.items():
            if _function_parts(fn) != parts or any(a is not b for a, b in zip(_function_parts(fn), parts)):
                out.append(name)
        return out
