"""The C++ compute guard (workers/harness/native/dispatch_guard.cpp, build/libkforge-guard.so):
it is built by `make build`, refuses what the Python guard refuses and lets through what it lets
through, records a refused operator even when the candidate catches the error, and sees the
escapes the Python mode cannot (the dispatch mode switched off). In this process, on the cpu."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from kforge_harness import guard, nativeguard


@pytest.fixture(scope="module")
def lib() -> nativeguard.NativeLib:
    path = nativeguard.library_path()
    assert path is not None, "build/libkforge-guard.so is missing: make build builds it"
    native, why = nativeguard.load(path, guard.ALLOWED_OPS)
    assert native is not None, why
    return native


X = torch.arange(12.0).reshape(3, 4)

# forward bodies: allowed ones, composite ones whose calls are allowed, and computing ones
CASES: dict[str, Any] = {
    "empty_like": lambda: torch.empty_like(X),
    "zeros_like": lambda: torch.zeros_like(X),
    "view_and_t": lambda: X.view(4, 3).t(),
    "reshape_a_view": lambda: X.reshape(12),
    "flatten": lambda: X.flatten(),
    "as_strided": lambda: X.as_strided((2,), (4,)),
    "select_item": lambda: X[1, 2].item(),
    "unfold_windows": lambda: X.unfold(1, 2, 1),
    "unfold_copy": lambda: X.unfold(1, 2, 1).reshape(-1),
    "chunk": lambda: X.chunk(2, 1),
    "relu": lambda: torch.relu(X),
    "add_scalar": lambda: X + 1,
    "reshape_a_copy": lambda: X.t().reshape(12),
    "contiguous_copy": lambda: X.t().contiguous(),
    "linear": lambda: F.linear(X, X),
    "to_double": lambda: X.to(torch.float64),
    "sum": lambda: X.sum(),
    "softmax": lambda: X.softmax(-1),
}


def _under(g: Any, body: Any) -> tuple[bool, list[str]]:
    """(the body finished, the guard's refused names)."""
    try:
        with g:
            body()
        return True, g.violations
    except guard.ForbiddenOp:
        return False, g.violations


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_native_guard_agrees_with_the_python_guard(lib, name):
    native = _under(guard.NativeGuard(lib), CASES[name])
    python = _under(guard.ComputeGuard(), CASES[name])
    assert native[0] == python[0], f"native {native}, python {python}"
    assert native[1][:1] == python[1][:1], f"native {native}, python {python}"


def test_tensor_unfold_is_a_view_and_its_copy_is_compute():
    """Tensor.unfold (windows as a strided view: KernelBench's ViT cuts its patches so) is
    allowed; copying its overlapping windows out is computing."""
    assert _under(guard.ComputeGuard(), CASES["unfold_windows"]) == (True, [])
    done, refused = _under(guard.ComputeGuard(), CASES["unfold_copy"])
    assert not done and refused, refused


def test_a_refused_operator_never_runs_and_stays_recorded_when_caught(lib):
    x = torch.ones(4)
    g = guard.NativeGuard(lib)
    with g:
        try:
            x.add_(1)
        except Exception:  # noqa: BLE001 - what a candidate would do
            pass
        y = torch.empty_like(x)
    assert g.violations == ["add_"] and y.shape == (4,)
    assert x.tolist() == [1.0] * 4, "the refused operator ran"
    assert torch.relu(-x).tolist() == [0.0] * 4, "the guard stayed on after its block"


def test_the_native_guard_sees_past_a_disabled_dispatch_mode(lib):
    """torch._C._DisableTorchDispatch hides ops from the Python mode (the runner's profiler is the
    second layer there); the native guard's key is not a dispatch mode's, so it still sees them."""
    g = guard.NativeGuard(lib)
    with pytest.raises(guard.ForbiddenOp):
        with g:
            with torch._C._DisableTorchDispatch():
                torch.relu(X)
    assert g.violations == ["relu"]
    p = guard.ComputeGuard()
    with p:
        with torch._C._DisableTorchDispatch():
            torch.relu(X)
    assert p.violations == [], "the Python mode is blind here (why the native guard is the default)"


def test_tampering_with_the_native_guard_is_seen(lib):
    key = torch._C.DispatchKey(int(torch._C.DispatchKey.FuncTorchDynamicLayerFrontMode) + 2)
    g = guard.NativeGuard(lib)
    with g:
        assert guard.guard_active(g)
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            assert not guard.guard_active(g), "an excluded key must read as a guard that is off"
        assert guard.guard_active(g)
    assert not g.tampered and not guard.guard_active(g)
    g = guard.NativeGuard(lib)
    with g:
        lib.leave(g._token)  # someone else turned it off
    assert g.tampered
    g = guard.NativeGuard(lib)
    with g:
        with pytest.raises(RuntimeError, match="on already"):
            with guard.NativeGuard(lib):
                pass
    assert not g.tampered


def test_no_library_means_the_python_guard(tmp_path):
    bad = tmp_path / "libkforge-guard.so"
    bad.write_bytes(b"not an ELF file")
    native, why = nativeguard.load(str(bad), guard.ALLOWED_OPS)
    assert native is None and "OSError" in why
    assert nativeguard.load(None, guard.ALLOWED_OPS) == (None, "no native guard library")
    assert isinstance(guard.make_guard(None), guard.ComputeGuard)
