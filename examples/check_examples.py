"""Checks the example tasks and their native candidates.

For every task in examples/tasks/ that has hand-written candidates (examples/candidates/<task>/;
the tasks without one are left to the expert policy and skipped here):

* cpu: builds examples/candidates/<task>/cpu/kernels/*.cpp with the harness's g++ command (which
  adds -Wall; any warning fails), loads ModelNew through kforge_runtime (KFORGE_BACKEND=cpu),
  copies the reference's state_dict into it and compares it with the task's Model on
  get_inputs() and on more draws of the same shapes: randn * 3, a standard Cauchy clipped to
  +-50, and the judge's other kinds (uniform on [-4, 4], Student-t with 2 degrees of freedom
  clipped to +-1e3), with torch.allclose(atol=1e-4, rtol=1e-4) or the task's TOLERANCE where it
  sets one. Checks the output's type, shape and dtype and that the candidate leaves its inputs
  unchanged; runs the extra shapes of odd_shapes.py (other sizes, lengths not a multiple of 4,
  inputs that are not 16-byte aligned); times eager PyTorch and the candidate on get_inputs()
  (best of 30 interleaved calls, since the machine may be shared) and fails an eager time far
  outside the 1-50 ms window;
* cuda: compiles examples/candidates/<task>/cuda/kernels/*.cu with the harness's nvcc command
  (no run: this needs no GPU) and fails on any error or warning. check_examples_cuda.py runs
  them on a GPU.

Run with the project's venv:  .venv/bin/python examples/check_examples.py [--no-cuda] [--no-timing]
Exits non-zero if anything fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ["KFORGE_BACKEND"] = "cpu"  # the task modules read it when they are imported

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from odd_shapes import odd_inputs  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent
REPO = EXAMPLES.parent
TASKS = EXAMPLES / "tasks"
CANDIDATES = EXAMPLES / "candidates"
HARNESS = REPO / "workers" / "harness"

ATOL = RTOL = 1e-4
EAGER_WINDOW_MS = (1.0, 50.0)  # what the tasks aim for on a 2-core x86 CPU
EAGER_HARD_LIMITS_MS = (0.5, 100.0)  # outside these the check fails ("roughly" 1 to 50 ms)

GXX = [
    "g++",
    "-O3",
    "-march=native",
    "-std=c++17",
    "-shared",
    "-fPIC",
    "-Wall",
]  # -Wall as the harness adds it
NVCC = [
    "nvcc",
    "-O3",
    "-std=c++17",
    "-shared",
    "-Xcompiler",
    "-fPIC",
    "-gencode",
    "arch=compute_90,code=sm_90",
]


@dataclass
class Result:
    task: str
    cpu_build: str = "-"
    tol: str = "-"
    draws: list[str] = field(default_factory=list)
    odd: str = "-"
    max_err: float = 0.0
    eager_ms: float | None = None
    native_ms: float | None = None
    timing: str = "-"
    cuda_build: str = "-"
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_cpu(kernels: Path, out: Path) -> tuple[bool, str]:
    sources = sorted(kernels.glob("*.cpp"))
    if not sources:
        return False, "no kernels/*.cpp"
    text = "\n".join(s.read_text() for s in sources)
    cmd = GXX + [str(s) for s in sources] + ["-o", str(out)]
    if re.search(r"#\s*include\s*<omp\.h>|#\s*pragma\s+omp", text):
        cmd.append("-fopenmp")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return False, proc.stderr.strip()
    if proc.stderr.strip():
        return False, "warnings:\n" + proc.stderr.strip()
    return True, ""


def build_cuda(kernels: Path, out: Path) -> tuple[bool, str]:
    sources = sorted(kernels.glob("*.cu"))
    if not sources:
        return False, "no kernels/*.cu"
    text = "\n".join(s.read_text() for s in sources)
    cmd = NVCC + [str(s) for s in sources] + ["-o", str(out)]
    for header, lib in (("cublas_v2.h", "-lcublas"), ("cublasLt.h", "-lcublasLt"), ("cudnn.h", "-lcudnn")):
        if re.search(r"#\s*include\s*[<\"]" + re.escape(header) + r"[>\"]", text):
            cmd.append(lib)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return False, (proc.stdout + proc.stderr).strip()
    noise = (proc.stdout + proc.stderr).strip()
    if noise:
        return False, "warnings:\n" + noise
    return True, ""


def draws(task) -> list[tuple[str, list]]:
    """get_inputs() (seeded) plus signed / wide / heavy-tailed draws of the same shapes."""
    torch.manual_seed(1234)
    base = task.get_inputs()
    out = [("get_inputs", base)]
    g = torch.Generator().manual_seed(99)
    out.append(
        ("randn*3", [torch.randn(t.shape, generator=g) * 3.0 if t.is_floating_point() else t for t in base])
    )
    g = torch.Generator().manual_seed(7)
    out.append(
        (
            "cauchy50",
            [
                torch.empty(t.shape).cauchy_(generator=g).clamp_(-50.0, 50.0) if t.is_floating_point() else t
                for t in base
            ],
        )
    )
    g = torch.Generator().manual_seed(5)
    out.append(
        (
            "wide",
            [
                torch.empty(t.shape).uniform_(-4.0, 4.0, generator=g) if t.is_floating_point() else t
                for t in base
            ],
        )
    )
    g = torch.Generator().manual_seed(11)

    def student_t2(t: torch.Tensor) -> torch.Tensor:
        normal = torch.randn(t.shape, dtype=torch.float64, generator=g)
        chi2 = torch.randn((2, *t.shape), dtype=torch.float64, generator=g).pow(2).sum(0) / 2
        return (normal / chi2.sqrt().clamp_min(1e-3)).clamp(-1e3, 1e3).to(t.dtype)

    out.append(("t2_1e3", [student_t2(t) if t.is_floating_point() else t for t in base]))
    return out


def best_ms(fns, inputs, reps: int = 30, warmup: int = 3) -> list[float]:
    """Best-of-``reps`` time of each function, calls interleaved so that load from other
    processes on a shared machine hits them alike."""
    times: list[list[float]] = [[] for _ in fns]
    with torch.no_grad():
        for fn in fns:
            for _ in range(warmup):
                fn(*inputs)
        for _ in range(reps):
            for i, fn in enumerate(fns):
                t0 = time.perf_counter()
                fn(*inputs)
                times[i].append(time.perf_counter() - t0)
    return [min(t) * 1e3 for t in times]


def check_cpu(name: str, task_path: Path, tmp: Path, res: Result, timing: bool) -> None:
    cand = CANDIDATES / name / "cpu"
    if not (cand / "model_new.py").is_file():
        res.cpu_build = "missing"
        res.problems.append("cpu: no model_new.py")
        return
    lib = tmp / f"{name}_cpu.so"
    ok, msg = build_cpu(cand / "kernels", lib)
    res.cpu_build = "ok" if ok else "FAIL"
    if not ok:
        res.problems.append(f"cpu build: {msg}")
        return
    os.environ["KFORGE_KERNEL_LIB"] = str(lib)
    os.environ["KFORGE_BACKEND"] = "cpu"
    task = load_module(f"kforge_example_task_{name}", task_path)
    cand_mod = load_module(f"kforge_example_cpu_{name}", cand / "model_new.py")

    tol = getattr(task, "TOLERANCE", None) or {"atol": ATOL, "rtol": RTOL}
    atol, rtol = float(tol["atol"]), float(tol["rtol"])
    res.tol = f"{atol:g}" if atol == rtol else f"{atol:g}/{rtol:g}"
    torch.manual_seed(0)
    model = task.Model(*task.get_init_inputs())
    new = cand_mod.ModelNew(*task.get_init_inputs())
    new.load_state_dict(model.state_dict())
    for label, inputs in draws(task):
        with torch.no_grad():
            ref = model(*inputs)
            originals = [t.clone() for t in inputs]
            got = new(*inputs)
        if not isinstance(got, torch.Tensor) or type(got) is not torch.Tensor:
            res.draws.append("type")
            res.problems.append(f"{label}: output is {type(got).__name__}, not a plain torch.Tensor")
            continue
        if got.shape != ref.shape or got.dtype != ref.dtype:
            res.draws.append("shape")
            res.problems.append(
                f"{label}: output {tuple(got.shape)} {got.dtype}, expected {tuple(ref.shape)} {ref.dtype}"
            )
            continue
        if any(not torch.equal(a, b) for a, b in zip(inputs, originals)):
            res.problems.append(f"{label}: the candidate modified its inputs")
        err = (got - ref).abs().max().item() if ref.numel() else 0.0
        res.max_err = max(res.max_err, err)
        if torch.allclose(got, ref, atol=atol, rtol=rtol):
            res.draws.append("ok")
        else:
            bad = (~torch.isclose(got, ref, atol=atol, rtol=rtol)).sum().item()
            res.draws.append("FAIL")
            res.problems.append(f"{label}: {bad} of {ref.numel()} elements differ, max abs error {err:.3g}")

    odd_total = odd_bad = 0
    for label, inputs in odd_inputs(name, draws(task)[0][1], torch.device("cpu")):
        odd_total += 1
        try:
            with torch.no_grad():
                ref = model(*inputs)
                got = new(*inputs)
            ok = (
                got.shape == ref.shape
                and got.dtype == ref.dtype
                and torch.allclose(got, ref, atol=atol, rtol=rtol)
            )
            detail = (
                ""
                if ok
                else f"max abs error {(got - ref).abs().max().item():.3g}"
                if got.shape == ref.shape
                else f"shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
            )
        except Exception as exc:  # a candidate that raises on a shape fails it
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        if not ok:
            odd_bad += 1
            res.problems.append(f"odd shape {label}: {detail}")
    res.odd = f"{odd_total - odd_bad}/{odd_total}" if odd_total else "-"

    if timing:
        inputs = draws(task)[0][1]
        res.eager_ms, res.native_ms = best_ms([model, new], inputs)
        lo, hi = EAGER_WINDOW_MS
        hard_lo, hard_hi = EAGER_HARD_LIMITS_MS
        if res.eager_ms < hard_lo or res.eager_ms > hard_hi:
            res.timing = "FAIL"
            res.problems.append(f"eager {res.eager_ms:.3f} ms is far outside {lo}-{hi} ms")
        elif res.eager_ms < lo or res.eager_ms > hi:
            res.timing = "near"
        else:
            res.timing = "ok"


def check_cuda(name: str, tmp: Path, res: Result) -> None:
    cand = CANDIDATES / name / "cuda"
    if not (cand / "model_new.py").is_file():
        res.cuda_build = "missing"
        res.problems.append("cuda: no model_new.py")
        return
    ok, msg = build_cuda(cand / "kernels", tmp / f"{name}_cuda.so")
    res.cuda_build = "ok" if ok else "FAIL"
    if not ok:
        res.problems.append(f"cuda build: {msg}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-cuda", action="store_true", help="skip the nvcc builds")
    parser.add_argument("--no-timing", action="store_true", help="skip the eager timing")
    parser.add_argument("tasks", nargs="*", help="task names (default: all)")
    args = parser.parse_args()

    sys.path.insert(0, str(HARNESS))
    task_paths = sorted(TASKS.glob("*.py"))
    if args.tasks:
        task_paths = [p for p in task_paths if p.stem in set(args.tasks)]
    for p in task_paths:
        if not (CANDIDATES / p.stem).is_dir():
            print(f"  {p.stem}: no hand-written candidate (left to the expert policy), skipped")
    task_paths = [p for p in task_paths if (CANDIDATES / p.stem).is_dir()]
    if not task_paths:
        print("no tasks found", file=sys.stderr)
        return 2

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; atol={ATOL} rtol={RTOL} "
        "unless the task sets TOLERANCE; times are the best of 30 interleaved calls"
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="kforge_examples_") as tmp_name:
        tmp = Path(tmp_name)
        for path in task_paths:
            res = Result(path.stem)
            try:
                check_cpu(path.stem, path, tmp, res, timing=not args.no_timing)
            except Exception as exc:  # report and go on with the other tasks
                res.problems.append(f"cpu: {type(exc).__name__}: {exc}")
            if not args.no_cuda:
                check_cuda(path.stem, tmp, res)
            results.append(res)
            status = "PASS" if res.ok else "FAIL"
            print(f"  {res.task}: {status}", flush=True)

    header = (
        f"{'task':18} {'cpu build':9} {'tol':6} {'draws: task randn*3 cauchy50 wide t2':38} {'max err':>9} {'odd':5} "
        f"{'eager ms':>9} {'native ms':>9} {'window':6} {'cuda build':10} result"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        eager = f"{r.eager_ms:9.3f}" if r.eager_ms is not None else f"{'-':>9}"
        native = f"{r.native_ms:9.3f}" if r.native_ms is not None else f"{'-':>9}"
        print(
            f"{r.task:18} {r.cpu_build:9} {r.tol:6} {'       ' + ' '.join(r.draws):38} {r.max_err:9.2e} {r.odd:5} {eager} {native} "
            f"{r.timing:6} {r.cuda_build:10} {'PASS' if r.ok else 'FAIL'}"
        )
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"\n{r.task}:")
        for p in r.problems:
            print("  " + p.replace("\n", "\n  "))
    print(f"\n{len(results) - len(failed)} of {len(results)} tasks pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
