"""Examples evaluated through the API (server, Redis, worker, jail, harness on the cpu backend)
agree with the harness run alone the same way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from servicekit import CASES, EXAMPLES, JAIL, Stack, candidate_files, evaluation_body, example_task

# Three fast examples, and one candidate whose verdict (a compile error) does not depend on timing.
CASES_UNDER_TEST = {
    "sum_dim": ("sum_dim", EXAMPLES / "candidates" / "sum_dim" / "cpu"),
    "silu_residual": ("silu_residual", EXAMPLES / "candidates" / "silu_residual" / "cpu"),
    "rms_norm": ("rms_norm", EXAMPLES / "candidates" / "rms_norm" / "cpu"),
    "compile_error": ("sum_dim", CASES / "compile_error"),
}


@pytest.fixture(scope="module")
def submitted(stack: Stack) -> Iterator[dict[str, Any]]:
    """All cases posted at once, before a worker runs: the tests then run the harness alone while
    the worker works through the queue."""
    out: dict[str, Any] = {}
    for case, (task, cand) in CASES_UNDER_TEST.items():
        body = evaluation_body(example_task(task), candidate_files(cand))
        body["task"]["suite"] = "examples"
        r = stack.api.post("/v1/evaluations", body)
        assert r.status_code == 202, (r.status_code, r.text)
        out[case] = r.json()
    w = stack.worker()
    yield out
    w.stop(timeout=20)


def _verdict_class(v: dict[str, Any]) -> tuple[Any, ...]:
    """What must not depend on timing noise: status, correctness, flags, the sign of the reward."""
    return (v["status"], v.get("correct"), sorted(v.get("flags") or []), (v["reward"] or 0) > 0)


@pytest.mark.parametrize("case", list(CASES_UNDER_TEST))
def test_api_verdict_matches_harness(stack: Stack, submitted: dict[str, Any], harness, case: str) -> None:
    task, cand = CASES_UNDER_TEST[case]
    first = submitted[case]
    assert first["job"]["status"] == "queued" and first["job"]["kind"] == "evaluate"
    assert first["job"]["backend"] == "cpu" and first["job"]["class"] == "cpu"
    assert first["evaluation"]["job_id"] == first["job"]["id"]
    assert first["evaluation"]["status"] is None and first["evaluation"]["reward"] is None

    code, alone, err = harness(
        "evaluate",
        "--task",
        str(EXAMPLES / "tasks" / f"{task}.py"),
        "--candidate",
        str(cand),
        "--backend",
        "cpu",
        "--no-compile",
        "--budget",
        "0.2",
        "--jail",
        str(JAIL),
    )
    assert code == 0, err

    worker = [p for p in stack.processes if p.name.startswith("worker")]
    job = stack.api.wait_job(first["job"]["id"], watch=worker)
    assert job["status"] == "succeeded", job
    assert job["attempt"] == 1 and job["finished_at"] and job["claimed_at"], job
    eid = first["evaluation"]["id"]
    assert job["evaluation_id"] == eid
    r = stack.api.get(f"/v1/evaluations/{eid}")
    assert r.status_code == 200, r.text
    ev = r.json()
    assert ev["job_status"] == "succeeded"
    assert ev["candidate"]["files"] == candidate_files(cand)
    assert ev["candidate"]["format"] == "native"
    v = ev["verdict"]
    assert v is not None and ev["status"] == v["status"] and ev["reward"] == v["reward"]
    assert _verdict_class(v) == _verdict_class(alone), (v.get("message"), alone.get("message"))
    if alone["status"] != "ok":
        # not timed: the whole verdict's outcome is deterministic
        assert v["reward"] == alone["reward"] == -1
        assert ev["speedup_vs_eager"] is None or ev["speedup_vs_eager"] == v.get("speedup_vs_eager")
    else:
        assert ev["reward"] >= 1 and ev["speedup_vs_eager"] and ev["speedup_vs_eager"] > 0
        n = stack.psql(
            f"SELECT count(*) FROM baselines WHERE task_id = '{ev['task_id']}' AND backend = 'cpu'"
        )
        assert n == "1", "an ok verdict stores the task's baseline on this device"
    assert ev["device"] and ev["finished_at"]


def test_inline_task_is_the_stored_task(stack: Stack, submitted: dict[str, Any]) -> None:
    """Two evaluations posted with the same inline source share one task (deduplicated by hash)."""
    ids = {submitted[c]["evaluation"]["task_id"] for c in ("sum_dim", "compile_error")}
    assert len(ids) == 1
    r = stack.api.get(f"/v1/tasks/{ids.pop()}")
    assert r.status_code == 200 and r.json()["source"] == example_task("sum_dim")
    assert r.json()["suite"] == "examples"


def test_wait_returns_the_finished_evaluation(stack: Stack, submitted: dict[str, Any]) -> None:
    """With "wait", a verdict that comes in time is answered as 200 with the finished objects
    (the worker is idle by now and the job fails in about a second; wait is 60 s)."""
    for case in submitted.values():
        stack.api.wait_job(case["job"]["id"])
    body = evaluation_body(example_task("sum_dim"), candidate_files(CASES / "compile_error"), wait=60)
    r = stack.api.post("/v1/evaluations", body, timeout=90)
    assert r.status_code == 200, (r.status_code, r.text)
    got = r.json()
    assert got["job"]["status"] == "succeeded" and got["evaluation"]["status"] == "compile_error"
    assert got["evaluation"]["reward"] == -1 and got["evaluation"]["verdict"]["status"] == "compile_error"


def test_the_workers_evaluations_take_warm_runners(stack: Stack, submitted: dict[str, Any]) -> None:
    """The worker keeps a pool of warm runners (workers/runner_pool.c) beside it, and its
    evaluations take theirs from it rather than starting one (the verdict's runner_start)."""
    worker = [p for p in stack.processes if p.name.startswith("worker")]
    starts = {}
    for case, first in submitted.items():
        stack.api.wait_job(first["job"]["id"], watch=worker)
        v = stack.api.get(f"/v1/evaluations/{first['evaluation']['id']}").json()["verdict"]
        starts[case] = v.get("runner_start")
    # a compile error never reaches a runner; every other one was taken warm
    assert starts == {
        "sum_dim": "pooled",
        "silu_residual": "pooled",
        "rms_norm": "pooled",
        "compile_error": None,
    }
    var = stack.root / "worker0-var"
    if not var.exists():
        var = next(stack.root.glob("worker*-var"))
    assert list(var.glob("pool-*.sock")) and list(var.glob("pool-*.log")), sorted(var.iterdir())
