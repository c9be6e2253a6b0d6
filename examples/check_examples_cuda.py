"""Runs the example tasks and their cuda candidates on a GPU (the counterpart of check_examples.py).

For every task in examples/tasks/ that has hand-written candidates (examples/candidates/<task>/;
the others are left to the expert policy and skipped), with KFORGE_BACKEND=cuda (the task's full
cuda sizes): builds examples/candidates/<task>/cuda/kernels/*.cu with the harness's nvcc command,
loads ModelNew through kforge_runtime, copies the reference's state_dict into it, compares it
with eager PyTorch (TF32 off) on get_inputs() and on signed / wide / heavy-tailed draws of the
same shapes with torch.allclose(atol=1e-4, rtol=1e-4) or the task's TOLERANCE, then on the
extra shapes of odd_shapes.py (other sizes, lengths not a multiple of 4, inputs that are not
16-byte aligned), and times both with CUDA events (median of 20 calls after warm-up; the inputs
are far larger than L2).

Run on a machine with an NVIDIA GPU and nvcc:  python3 examples/check_examples_cuda.py [task ...]
Exits non-zero if anything fails.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["KFORGE_BACKEND"] = "cuda"  # the task modules read it when they are imported

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from odd_shapes import odd_inputs  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent
TASKS = EXAMPLES / "tasks"
CANDIDATES = EXAMPLES / "candidates"
HARNESS = EXAMPLES.parent / "workers" / "harness"
ATOL = RTOL = 1e-4
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


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def extra_lib_dirs() -> list[str]:
    """Library folders of pip-installed CUDA libraries (cuDNN, cuBLAS), in case nvcc's default lacks them."""
    dirs = []
    for p in sys.path:
        dirs += glob.glob(os.path.join(p, "nvidia", "*", "lib"))
    return sorted(set(dirs))


def build(kernels: Path, out: Path) -> tuple[bool, str]:
    sources = sorted(kernels.glob("*.cu"))
    text = "\n".join(s.read_text() for s in sources)
    libs = []
    for header, lib in (("cublas_v2.h", "-lcublas"), ("cublasLt.h", "-lcublasLt"), ("cudnn.h", "-lcudnn")):
        if re.search(r"#\s*include\s*[<\"]" + re.escape(header) + r"[>\"]", text):
            libs.append(lib)
    cmd = NVCC + [str(s) for s in sources] + ["-o", str(out)] + libs
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 and libs:
        # Not the harness's command: only to find cuDNN where it came with PyTorch's wheels.
        extra = []
        for d in extra_lib_dirs():
            extra += ["-L", d, "-Xlinker", "-rpath", "-Xlinker", d]
        proc2 = subprocess.run(cmd + extra, capture_output=True, text=True)
        if proc2.returncode == 0:
            return True, "built only with -L/-rpath to pip's nvidia libraries: " + proc.stderr.strip()[-300:]
    msg = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        return False, msg
    return (not msg), msg


def draws(task, device):
    torch.manual_seed(1234)
    base = [t.to(device) for t in task.get_inputs()]
    yield "task", base
    g = torch.Generator(device=device).manual_seed(99)
    yield "randn*3", [torch.randn(t.shape, device=device, generator=g) * 3.0 for t in base]
    yield "cauchy50", [torch.empty(t.shape, device=device).cauchy_(generator=g).clamp_(-50, 50) for t in base]
    yield "wide", [torch.empty(t.shape, device=device).uniform_(-4, 4, generator=g) for t in base]

    def t2(t):
        normal = torch.randn(t.shape, device=device, generator=g)
        chi2 = (
            torch.randn(t.shape, device=device, generator=g) ** 2
            + torch.randn(t.shape, device=device, generator=g) ** 2
        ) / 2
        return (normal / chi2.sqrt().clamp_min(1e-3)).clamp_(-1e3, 1e3)

    yield "t2_1e3", [t2(t) for t in base]


def time_ms(fn, inputs, reps: int = 20) -> float:
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("tasks", nargs="*")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sys.path.insert(0, str(HARNESS))
    device = torch.device("cuda")
    print(
        f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cudnn {torch.backends.cudnn.version()}"
    )
    paths = sorted(TASKS.glob("*.py"))
    if args.tasks:
        paths = [p for p in paths if p.stem in args.tasks]
    for p in paths:
        if not (CANDIDATES / p.stem).is_dir():
            print(f"  {p.stem}: no hand-written candidate (left to the expert policy), skipped")
    paths = [p for p in paths if (CANDIDATES / p.stem).is_dir()]
    rows, failed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            name = path.stem
            t0 = time.time()
            row = {
                "task": name,
                "build": "-",
                "draws": [],
                "odd": "-",
                "need": 0.0,
                "eager": None,
                "native": None,
                "notes": [],
            }
            rows.append(row)
            try:
                lib = Path(tmp) / f"{name}.so"
                ok, msg = build(CANDIDATES / name / "cuda" / "kernels", lib)
                row["build"] = "ok" if ok else "FAIL"
                if msg:
                    row["notes"].append(msg)
                if not ok:
                    failed.append(name)
                    continue
                os.environ["KFORGE_KERNEL_LIB"] = str(lib)
                task = load_module(f"task_{name}", path)
                cand = load_module(f"cand_{name}", CANDIDATES / name / "cuda" / "model_new.py")
                tol = getattr(task, "TOLERANCE", None) or {"atol": ATOL, "rtol": RTOL}
                torch.manual_seed(0)
                model = task.Model(*task.get_init_inputs()).to(device)
                new = cand.ModelNew(*task.get_init_inputs()).to(device)
                new.load_state_dict(model.state_dict())
                with torch.no_grad():
                    for label, inputs in draws(task, device):
                        ref = model(*inputs)
                        got = new(*inputs)
                        torch.cuda.synchronize()
                        if got.shape != ref.shape or got.dtype != ref.dtype:
                            row["draws"].append("shape")
                            failed.append(name)
                            continue
                        need = ((got.double() - ref.double()).abs() / (1 + ref.double().abs())).max().item()
                        row["need"] = max(row["need"], need)
                        ok = torch.allclose(got, ref, atol=tol["atol"], rtol=tol["rtol"])
                        row["draws"].append("ok" if ok else "FAIL")
                        if not ok:
                            failed.append(name)
                            bad = (~torch.isclose(got, ref, atol=tol["atol"], rtol=tol["rtol"])).sum().item()
                            row["notes"].append(f"{label}: {bad} of {ref.numel()} differ, need {need:.2e}")
                        if label == "task":
                            row["eager"] = time_ms(model, inputs)
                            row["native"] = time_ms(new, inputs)
                        del ref, got, inputs
                    torch.manual_seed(1234)
                    base = task.get_inputs()
                    n_odd = n_bad = 0
                    for label, inputs in odd_inputs(name, base, device):
                        n_odd += 1
                        try:
                            ref = model(*inputs)
                            got = new(*inputs)
                            torch.cuda.synchronize()
                            ok = got.shape == ref.shape and torch.allclose(
                                got, ref, atol=tol["atol"], rtol=tol["rtol"]
                            )
                            detail = (
                                ""
                                if ok
                                else (
                                    f"max abs error {(got - ref).abs().max().item():.3g}"
                                    if got.shape == ref.shape
                                    else f"shape {tuple(got.shape)}"
                                )
                            )
                        except Exception as exc:  # noqa: BLE001
                            ok, detail = False, f"{type(exc).__name__}: {exc}"
                        if not ok:
                            n_bad += 1
                            failed.append(name)
                            row["notes"].append(f"odd shape {label}: {detail}")
                    row["odd"] = f"{n_odd - n_bad}/{n_odd}" if n_odd else "-"
                    del base
                del model, new
            except Exception as exc:  # report and go on
                failed.append(name)
                row["notes"].append(f"{type(exc).__name__}: {exc}")
            finally:
                torch.cuda.empty_cache()
            print(f"  {name}: {'FAIL' if name in failed else 'PASS'} ({time.time() - t0:.1f} s)", flush=True)

    print(
        f"\n{'task':18} {'build':5} {'draws: task randn*3 cauchy50 wide t2':38} {'need':>8} {'odd':5} {'eager ms':>9} "
        f"{'native ms':>9} {'speedup':>7}"
    )
    for r in rows:
        e = f"{r['eager']:9.3f}" if r["eager"] else f"{'-':>9}"
        n = f"{r['native']:9.3f}" if r["native"] else f"{'-':>9}"
        s = f"{r['eager'] / r['native']:7.2f}" if r["eager"] and r["native"] else f"{'-':>7}"
        print(
            f"{r['task']:18} {r['build']:5} {'       ' + ' '.join(r['draws']):38} {r['need']:8.1e} {r['odd']:5} {e} {n} {s}"
        )
    for r in rows:
        for note in r["notes"]:
            print(f"{r['task']}: {note}")
    print(f"\n{len(rows) - len(set(failed))} of {len(rows)} tasks pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
