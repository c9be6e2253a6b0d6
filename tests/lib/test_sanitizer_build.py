"""The C code under AddressSanitizer and UndefinedBehaviorSanitizer (STYLE.md's sanitizer
builds): the whole tree builds with SANITIZE=address,undefined, and the programs that need no
server run clean under it: lib_test's unit checks, its fault left to ASan's own report, and the
expert's planner over tasks with every kind of step, the graph released once planned (the
leak checker runs at exit)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import graphcache
import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["conv_bn_relu", "linear_bias_relu", "layer_norm_gelu", "max_pool2d", "softmax_dim1"]
# with the planners of cross entropy (an int64 input), masks, reverse scans, diag products,
# concatenation with a lazy constant, chunks and distances
EXTRA = [
    "standardize_rows",
    "cosine_rows",
    "cumsum_cumprod",
    "maxout_pairs",
    "cross_entropy",
    "masked_cumsum",
    "reverse_cumsum",
    "diag_matmul",
    "exclusive_cumsum",
    "swiglu_mlp",
    "triplet_margin",
]


@pytest.fixture(scope="module")
def asan_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("asan-build")
    env = {**os.environ, "KFORGE_NO_DEPS": "1"}  # the tests run: the packages are there
    res = subprocess.run(
        ["make", "-C", str(ROOT), "build", f"BUILD={build}", "SANITIZE=address,undefined"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return build


def test_lib_unit_checks_pass_under_the_sanitizers(asan_build: Path) -> None:
    res = subprocess.run(
        [str(asan_build / "lib-tests" / "lib_test"), "unit"], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and "FAIL" not in res.stdout, res.stdout + res.stderr
    assert "Sanitizer" not in res.stderr, res.stderr


def test_a_fault_is_left_to_asan(asan_build: Path) -> None:
    """crash.c stands aside in a sanitizer build: AddressSanitizer reports the fault itself."""
    res = subprocess.run(
        [str(asan_build / "lib-tests" / "lib_test"), "crash", "null"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0 and "AddressSanitizer: SEGV" in res.stderr, res.stderr
    assert "crashed with" not in res.stderr, res.stderr


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_the_planner_runs_clean_under_the_sanitizers(asan_build: Path, tmp_path: Path, backend: str) -> None:
    probe = asan_build / "agent-probes" / "expert_probe"
    paths = [ROOT / "examples" / "tasks" / f"{t}.py" for t in TASKS]
    paths += [ROOT / "bench" / "tasks_extra" / f"{t}.py" for t in EXTRA]
    for task in paths:
        graph = graphcache.graph_file(task, backend, tmp_path, f"{task.stem}.json")
        for flags in ([], ["--free-graph"]):
            res = subprocess.run(
                [str(probe), *flags, backend, str(graph), str(tmp_path / f"cand-{task.stem}")],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert res.returncode == 0, (task.stem, flags, res.stderr[-4000:])
            assert "Sanitizer" not in res.stderr and "runtime error" not in res.stderr, (
                task.stem,
                res.stderr[-4000:],
            )
            assert json.loads(res.stdout)["ok"], task.stem
