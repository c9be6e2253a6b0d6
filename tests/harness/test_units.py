"""Unit tests of the harness's pure parts: reward, comparison, the wire format, the source scan."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from kforge_harness import compare, wire
from kforge_harness.reward import reward
from kforge_harness.scan import scan_source


@pytest.mark.parametrize(
    "status,eager,comp,expected",
    [
        ("ok", 1.2, 1.2, 3),
        ("ok", 1.06, 1.04, 2),
        ("ok", 1.2, None, 2),
        ("ok", 1.05, 2.0, 1),
        ("ok", 0.5, 0.5, 1),
        ("incorrect", 9.0, 9.0, -1),
        ("rejected", 2.0, 2.0, -1),
        ("compile_error", None, None, -1),
        ("ok", None, None, 1),
    ],
)
def test_reward(status, eager, comp, expected):
    assert reward(status, eager, comp) == expected


def test_compare_fp32_catches_half_precision():
    torch.manual_seed(0)
    ref = torch.randn(1000)
    assert compare.compare(ref.clone(), ref)["pass"]
    half = ref.half().float()
    rec = compare.compare(half, ref)
    assert not rec["pass"] and rec["near_miss"]


def test_compare_structure():
    ref = torch.randn(3, 4)
    assert "shape" in compare.compare(torch.randn(4, 3), ref)["reason"]
    assert "dtype" in compare.compare(ref.double(), ref)["reason"]
    assert "outputs" in compare.compare([ref, ref], ref)["reason"]
    assert "not a tensor" in compare.compare(3.0, ref)["reason"]


def test_compare_nan_and_inf():
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare.compare(ref.clone(), ref)["pass"]
    assert not compare.compare(torch.tensor([1.0, 0.0, float("inf")]), ref)["pass"]
    assert not compare.compare(torch.tensor([1.0, float("nan"), 5.0]), ref)["pass"]


def test_compare_strict_is_tighter():
    ref = torch.ones(10)
    out = ref + 5e-5
    assert compare.compare(out, ref)["pass"]
    assert not compare.compare(out, ref, strict=True)["pass"]


def test_wire_roundtrip(tmp_path):
    value = [torch.randn(3, 5), (torch.arange(4), 7, 2.5, "s", None), torch.empty(0, 3)]
    enc = wire.encode_value(str(tmp_path), "x", value, [0])
    dec = wire.decode_value(str(tmp_path), enc)
    assert torch.equal(dec[0], value[0]) and torch.equal(dec[1][0], value[1][0])
    assert dec[1][1:] == (7, 2.5, "s", None) and dec[2].shape == (0, 3)


def test_wire_rejects_malformed(tmp_path):
    t = wire.put_tensor(str(tmp_path), "a.bin", torch.randn(10))
    with pytest.raises(wire.ChannelError):
        wire.get_tensor(str(tmp_path), dict(t, shape=[11]))
    with pytest.raises(wire.ChannelError):
        wire.get_tensor(str(tmp_path), dict(t, file="../a.bin"))
    with pytest.raises(wire.ChannelError):
        wire.get_tensor(str(tmp_path), t, max_bytes=8)
    with pytest.raises(wire.ChannelError):
        wire.decode_value(str(tmp_path), {"pickle": "x"})


def test_wire_messages_over_pipe():
    r, w = os.pipe()
    wire.send(w, {"seq": 1, "x": [1, 2]})
    assert wire.recv(r, timeout=5) == {"seq": 1, "x": [1, 2]}
    os.write(w, b"\x00\x00\x00\x03abc")
    with pytest.raises(wire.ChannelError):
        wire.recv(r, timeout=5)
    with pytest.raises(wire.ChannelTimeout):
        wire.recv(r, timeout=0.1)
    os.close(w)
    os.close(r)


def test_scan_flags_and_honest_source():
    honest = "import torch\nimport torch.nn as nn\nimport kforge_runtime as kr\nclass ModelNew(nn.Module):\n    pass\n"
    assert scan_source(honest, "native") == ([], [])
    flags, _ = scan_source("import torch\nf = torch.compile\nimport numpy as np\n", "native")
    assert "torch_compile" in flags and "foreign_compute" in flags
    flags, _ = scan_source("from model import Model\nclass ModelNew(Model):\n    pass\n", "native")
    assert "imports_reference" in flags and "inherits_reference" in flags
    flags, _ = scan_source("from torch.utils.cpp_extension import load_inline\n", "native")
    assert flags == ["torch_extension"]
    assert scan_source("from torch.utils.cpp_extension import load_inline\n", "kernelbench")[0] == []


def test_scan_never_flags_an_honest_candidate():
    """Every example and honest candidate passes the static scan: no false positives."""
    from pathlib import Path

    from kforge_harness.scan import scan_candidate_sources

    root = Path(__file__).resolve().parents[2]
    files = sorted(root.glob("examples/candidates/*/*/model_new.py")) + sorted(
        root.glob("tests/harness/hacks/*honest*/model_new.py")
    )
    assert len(files) >= 24
    for f in files:
        assert scan_candidate_sources([str(f)], "native")["flags"] == [], f


def test_scan_ignores_docstrings_but_not_code_strings():
    doc = '"""Fused kernel: statistics, perf_counter-free, no /mem tricks."""\nimport torch\n'
    assert scan_source(doc, "native") == ([], [])
    code = 'import sys\nf = getattr(sys, "_getframe")\n'
    flags, details = scan_source(code, "native")
    assert flags == ["introspection"] and any("_getframe" in d for d in details)


@pytest.mark.parametrize("needle", ["DispatchKey", "NativeGuard", "kforge-guard", "redispatch", "at::native"])
def test_scan_flags_strings_that_reach_for_the_native_guard(needle):
    flags, details = scan_source(f'import torch\nk = getattr(torch, "_C")\nn = "{needle}"\n', "native")
    assert "introspection" in flags and any(needle in d for d in details), (flags, details)


def test_gpu_lock_is_exclusive_between_processes(tmp_path):
    """Two harnesses sharing a GPU: the second waits until the first releases (or dies)."""
    import subprocess
    import sys
    import time

    from kforge_harness.gpulock import GpuLock

    path = str(tmp_path / "gpu0.lock")
    first = GpuLock(path)
    assert first.acquire() < 1.0
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[2]);"
        "from kforge_harness.gpulock import GpuLock;"
        "print('ready', flush=True);"
        "t = time.monotonic(); GpuLock(sys.argv[1]).acquire(); print(time.monotonic() - t)"
    )
    harness = str(Path(__file__).resolve().parents[2] / "workers" / "harness")
    p = subprocess.Popen([sys.executable, "-c", code, path, harness], stdout=subprocess.PIPE, text=True)
    # the held second counts from the child's import done (on a loaded machine its start-up
    # alone took a quarter of it)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    assert p.poll() is None, "the second holder got the lock while the first held it"
    first.release()
    out, _ = p.communicate(timeout=30)
    assert float(out) >= 0.9


def test_compare_fast_path_agrees_with_the_general_one():
    """All-finite tensors take a shorter path: same verdicts and errors as with a NaN present."""
    torch.manual_seed(0)
    ref = torch.randn(1000, dtype=torch.float32)
    near = ref + 1e-6 * torch.randn(1000)
    far = ref.clone()
    far[17] += 0.5
    for out in (near, far):
        fast = compare.compare(out, ref)
        ref_nan, out_nan = (
            torch.cat([ref, torch.tensor([float("nan")])]),
            torch.cat([out, torch.tensor([float("nan")])]),
        )
        slow = compare.compare(out_nan, ref_nan)
        assert fast["pass"] == slow["pass"]
        if not fast["pass"]:
            assert fast["max_abs_err"] == pytest.approx(slow["max_abs_err"])
            assert fast["max_rel_err"] == pytest.approx(slow["max_rel_err"])
    assert compare.compare(near, ref)["pass"] and not compare.compare(far, ref)["pass"]


def test_the_guard_stops_a_forbidden_operator_on_every_call():
    """The guard checks an operator by its packet (aten.add for aten.add.Tensor): a forbidden one
    is stopped on every call, each overload of it too, and allocations and views pass."""
    from kforge_harness.guard import ALLOWED_PACKETS, ComputeGuard, ForbiddenOp

    x = torch.ones(8)
    for op in (lambda: torch.add(x, 1), lambda: torch.add(x, x), lambda: x.add_(1)):
        for _ in range(2):
            g = ComputeGuard()
            with pytest.raises(ForbiddenOp):
                with g:
                    op()
            assert g.violations in (["add"], ["add_"])
        g = ComputeGuard()
        with g:
            y = torch.empty_like(x).view(2, 4)
        assert g.violations == [] and g.ops == 2 and y.shape == (2, 4)
    assert isinstance(ALLOWED_PACKETS, frozenset) and torch.ops.aten.add not in ALLOWED_PACKETS
    assert x.tolist() == [1.0] * 8, "a stopped operator never ran"


@pytest.mark.parametrize(
    "text,want",
    [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n",
            "535.104.05",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16)\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
            "570.86.15",
        ),
        ("GCC version:  gcc version 12.2.0\n", None),
    ],
)
def test_driver_version_of_proc_text(text, want):
    """The open kernel module's line ("... Open Kernel Module for x86_64  570.86.15") once gave
    the driver as "for" in every H200 verdict."""
    from kforge_harness.envinfo import parse_driver

    assert parse_driver(text) == want


def test_the_guard_is_entered_before_the_timer_starts_and_left_after_it_stops():
    """timing.measure's wrap (the runner's compute guard around a candidate's call): every call,
    warm-up included, runs inside it, and each timed call's two clock readings lie inside it
    with only the call between them, so the guard's own cost is never timed."""
    from kforge_harness import timing

    log: list[str] = []

    class Wrap:
        def __enter__(self) -> None:
            log.append("enter")

        def __exit__(self, *exc: object) -> bool:
            log.append("leave")
            return False

    ticks = iter(range(1, 10**6))

    def clock() -> int:
        log.append("clock")
        return next(ticks) * 1000  # one microsecond a reading

    def fn(x: torch.Tensor) -> torch.Tensor:
        log.append("call")
        return x

    policy = timing.Policy(budget_s=10.0, min_reps=4, max_reps=4, warmup_s=0.0, warmup_min=2)
    result = timing.measure(fn, [[torch.ones(2)]], torch.device("cpu"), policy, clock=clock, wrap=Wrap)
    spans, current = [], None
    for e in log:
        if e == "enter":
            current = []
        elif e == "leave":
            spans.append(current)
            current = None
        elif current is not None:
            current.append(e)
    assert log.count("call") == 6 and len(spans) == 6, log
    assert all(s == ["call"] for s in spans[:2]), spans  # warm-up calls, guarded, untimed
    assert all(s == ["clock", "call", "clock"] for s in spans[2:]), spans
    assert result["trials"] == 4 and result["median_ms"] == 0.001, result


def test_a_baseline_timed_on_a_busy_machine_is_not_cached(tmp_path):
    """baseline.store caches a baseline only when its timings are quiet (spread at most
    MAX_CACHED_SPREAD); a noisy one, or one without a spread, is left out and measured again by
    the next verdict, and load_cached does not return a noisy one cached earlier."""
    from kforge_harness import baseline

    def timed(spread: float) -> dict:
        return {"median_ms": 1.0, "spread": spread, "trials": 20}

    quiet = {"eager": timed(0.05), "compile": timed(0.1)}
    assert baseline.store(str(tmp_path / "q.json"), quiet)
    assert baseline.load_cached(str(tmp_path / "q.json")) == quiet
    no_compile = {"eager": timed(0.05), "compile": None, "compile_error": "not requested"}
    assert baseline.store(str(tmp_path / "n.json"), no_compile)
    busy = baseline.MAX_CACHED_SPREAD * 2
    for name, data in {
        "eager": {"eager": timed(busy), "compile": timed(0.1)},
        "compile": {"eager": timed(0.05), "compile": timed(busy)},
        "unknown": {"eager": {"median_ms": 1.0}, "compile": None},
    }.items():
        assert not baseline.store(str(tmp_path / f"{name}.json"), data), name
        assert (
            not (tmp_path / f"{name}.json").exists()
            and baseline.load_cached(str(tmp_path / f"{name}.json")) is None
        )
    # one cached before the rule: read as absent, so the next verdict measures it again
    (tmp_path / "old.json").write_text(json.dumps({"eager": timed(busy), "compile": timed(0.1)}))
    assert baseline.load_cached(str(tmp_path / "old.json")) is None
