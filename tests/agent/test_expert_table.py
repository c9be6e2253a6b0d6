"""bench/expert_table.py's choice of a task's row when scripts/gpu_expert.sh judged it in several
variants: the fastest correct one (what the expert's tuning keeps), else the first record."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import expert_table  # noqa: E402


def rec(task: str, variant: int, ms: float | None, correct: bool = True, status: str = "ok") -> dict:
    timing = {"candidate": {"median_ms": ms}, "eager": {"median_ms": 2.0}} if ms is not None else {}
    return {
        "task": task,
        "variant": variant,
        "kernels": ["reduce"],
        "verdict": {"status": status, "correct": correct, "timing": timing},
    }


def test_the_fastest_correct_variant_is_the_row() -> None:
    recs = [
        rec("rms_norm", 0, 0.95),
        rec("rms_norm", 1, 0.70, correct=False),  # faster but wrong: never chosen
        rec("rms_norm", 2, 0.78),
        rec("gelu", 0, 1.2),
    ]
    best = expert_table.best_of(recs)
    assert [(r["task"], r["variant"]) for r in best] == [("gelu", 0), ("rms_norm", 2)]
    row = expert_table.row_of(best[1])
    assert row["solved"] and row["candidate_ms"] == 0.78
    assert row["status"] == "ok (reduce, variant 2)"


def test_a_task_with_no_correct_variant_keeps_its_first_record() -> None:
    recs = [
        rec("bmm", 0, None, correct=False, status="build_error"),
        rec("bmm", 1, 3.0, correct=False),
    ]
    (only,) = expert_table.best_of(recs)
    assert only["variant"] == 0 and not expert_table.row_of(only)["solved"]


def test_records_without_a_variant_read_as_before() -> None:
    (only,) = expert_table.best_of([{k: v for k, v in rec("gelu", 0, 1.0).items() if k != "variant"}])
    assert expert_table.row_of(only)["status"] == "ok (reduce)"


def test_verdicts_of_several_runs_make_one_table(tmp_path, capsys) -> None:
    """Runs from two device calls, tabled here with the limits the device printed."""
    import json

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(rec("gelu", 0, 1.5)) + "\n" + json.dumps(rec("mish", 0, 1.4)) + "\n")
    b.write_text(json.dumps(rec("gelu", 1, 1.2)) + "\n")
    assert expert_table.main([str(a), str(b), "--limits", "NVIDIA H200", "4253.5", "51.06"]) == 0
    out = capsys.readouterr().out
    assert "copy 4253.5 GB/s" in out and "51.06 TFLOP/s" in out
    rows = [line for line in out.splitlines() if line.startswith(("| gelu", "| mish"))]
    assert len(rows) == 2
    assert "variant 1" in rows[0] and "| 1.200 |" in rows[0]


def test_latest_run_replaces_an_older_row(tmp_path, capsys) -> None:
    """--latest: a run of changed kernels over an older run of every task: its rows win even when
    slower; the tasks it did not judge keep the older rows."""
    import json

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(rec("gelu", 0, 1.2)) + "\n" + json.dumps(rec("mish", 0, 1.4)) + "\n")
    b.write_text(json.dumps(rec("gelu", 0, 1.5)) + "\n" + json.dumps(rec("gelu", 1, 1.3)) + "\n")
    assert expert_table.main([str(a), str(b), "--limits", "NVIDIA H200", "4253.5", "51.06", "--latest"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| gelu", "| mish"))]
    assert len(rows) == 2
    assert "variant 1" in rows[0] and "| 1.300 |" in rows[0]  # b's best, not a's faster 1.2
    assert "| 1.400 |" in rows[1]


def test_a_candidate_that_computes_less_is_measured_against_memory() -> None:
    """diag(a) @ b: the reference's matmul FLOPs at the peak would take 2.7 ms; the expert scales
    b's rows in 0.12 ms, so its row is read against the copy bandwidth, not as 2200% of the
    FLOP peak; a candidate slower than the FLOP peak keeps the compute bound."""
    import expert_bench

    work = {"bound": "compute", "flops": 2 * 4096**3, "bytes": 2 * 4096 * 4096 * 4}
    peaks = {"peak_flops": 51e12, "bandwidth_Bps": 4.25e12}
    row = {"task": "diag_matmul", "solved": True, "candidate_ms": 0.12, "eager_ms": 2.75}
    out = expert_bench.bench_row(row, work, peaks)
    assert out["bound"] == "memory (fewer FLOPs)"
    assert abs(out["limit_fraction"] - work["bytes"] / 0.12e-3 / 4.25e12) < 1e-9
    assert out["eager_limit_fraction"] < 0.05
    assert expert_bench.overall([out])["memory_bound_tasks"] == 1
    slow = expert_bench.bench_row({**row, "candidate_ms": 3.0}, work, peaks)
    assert slow["bound"] == "compute" and 0.8 < slow["limit_fraction"] < 1.0


def test_a_product_on_the_tensor_cores_keeps_its_compute_bound() -> None:
    """A matrix product of split operands on TF32 tensor cores (expert_gemm_split.c) does the
    reference's FLOPs past the fp32 peak: its row stays compute-bound, above 100% of that peak,
    where a candidate without a gemm kernel past the peak is read against memory."""
    import expert_bench

    work = {"bound": "compute", "flops": 2 * 4096**3, "bytes": 3 * 4096 * 4096 * 4}
    peaks = {"peak_flops": 51e12, "bandwidth_Bps": 4.25e12}
    row = {"task": "matmul", "status": "ok (gemm, variant 0)", "solved": True, "candidate_ms": 1.47,
           "eager_ms": 2.73}  # fmt: skip
    out = expert_bench.bench_row(row, work, peaks)
    assert out["bound"] == "compute (tensor cores)"
    assert 1.7 < out["limit_fraction"] < 1.9
    assert expert_bench.overall([out])["compute_bound_tasks"] == 1
    assert "GFLOP/s" in expert_bench._rate(out)
    ew = expert_bench.bench_row({**row, "status": "ok (ew, variant 0)"}, work, peaks)
    assert ew["bound"] == "memory (fewer FLOPs)"
