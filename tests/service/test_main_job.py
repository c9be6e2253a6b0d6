"""The main job (scripts/run_examples.py: one expert episode per example task, a table, --json)
against this module's test stack on the cpu backend, and the summary arithmetic of
bench/expert_bench.py on made-up rows."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from typing import Any

import pytest
import requests
from servicekit import PYTHON, ROOT, Stack

sys.path.insert(0, str(ROOT / "bench"))
import expert_bench as eb  # noqa: E402

COLUMNS = ["task", "status", "eager ms", "compile ms", "kforge ms", "vs eager", "vs compile", "reward"]
SPEEDUP = re.compile(r"^\d+\.\d\dx$")


def table_rows(stdout: str) -> dict[str, dict[str, Any]]:
    """The printed table's rows by task, each with the indented line below it (`detail`)."""
    lines = stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["task", "status"])
    assert re.sub(r"\s+", " ", lines[head]).strip() == " ".join(COLUMNS), lines[head]
    assert set(lines[head + 1]) == {"-"}, lines[head + 1]
    rows: dict[str, dict[str, Any]] = {}
    last = None
    for ln in lines[head + 2 :]:
        if not ln.strip():
            break
        if ln.startswith("    ") and last:
            rows[last]["detail"] = ln.strip()
            continue
        f = ln.split()
        assert len(f) == len(COLUMNS), ln
        last = f[0]
        rows[last] = dict(zip(COLUMNS, f))
    return rows


def pages(stdout: str, url: str) -> dict[str, str]:
    """The results section: task (or leaderboard) -> web address."""
    out = {}
    for ln in stdout.splitlines():
        f = ln.split()
        if len(f) == 2 and f[1].startswith(url + "/"):
            out[f[0]] = f[1]
    return out


def test_main_job_expert_episodes(stack: Stack, workers, tmp_path) -> None:
    w = workers()
    out = tmp_path / "results.json"
    cmd = [str(PYTHON), "scripts/run_examples.py", "--no-up", "--url", stack.server.url, "--key", stack.key]
    cmd += ["--backend", "cpu", "--tasks", "gelu,matmul", "--budget", "0.2", "--no-compile"]
    cmd += ["--deadline", "900", "--json", str(out)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert w.alive(), "the worker died"
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    rows = table_rows(p.stdout)
    assert list(rows) == ["gelu", "matmul"], p.stdout

    # the web addresses: the leaderboard of the examples suite at /, each episode at /episodes/{id},
    # pages of the web UI
    links = pages(p.stdout, stack.server.url)
    assert links["leaderboard"] == stack.server.url + "/?suite=examples", p.stdout
    for link in links.values():
        page = requests.get(link, timeout=30)
        assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html"), link
    ids = {}
    for name in ("gelu", "matmul"):
        m = re.fullmatch(re.escape(stack.server.url) + r"/episodes/([0-9a-f-]{36})", links[name])
        assert m, links
        ids[name] = m.group(1)

    board = stack.api.get("/v1/leaderboard?suite=examples&per=entry").json()["rows"]
    on_board = {r["episode_id"] for r in board}
    data = json.loads(out.read_text())
    assert data["mode"] == "optimize" and data["backend"] == "cpu" and data["policy"] == "expert"
    by_task = {r["task"]: r for r in data["results"]}
    assert list(by_task) == ["gelu", "matmul"]

    for name, row in rows.items():
        r = stack.api.get(f"/v1/episodes/{ids[name]}?turns=false")
        assert r.status_code == 200, r.text
        ep = r.json()
        job = stack.api.job(ep["job_id"])
        res = ep["result"] or {}
        assert ep["status"] == "finished" and ep["policy"]["name"] == "expert", ep
        # the printed row is the episode's real end
        assert row["status"] == ep["end_reason"], (row, ep["end_reason"])
        reward = res.get("reward")
        assert row["reward"] == ("-" if reward is None else str(reward)), (row, reward)
        if ep["end_reason"] == "unsupported":
            assert row["detail"] == job["result"]["end_detail"], (row, job["result"])
            assert row["vs eager"] == "-" and row["kforge ms"] == "-"
        else:
            assert ep["end_reason"] == "submitted", ep["end_reason"]
            assert row["vs eager"] == f"{res['speedup_vs_eager']:.2f}x", (row, res)
            t = res["verdict"]["timing"]
            assert row["kforge ms"] == f"{t['candidate']['median_ms']:.3f}"
            assert row["eager ms"] == f"{t['eager']['median_ms']:.3f}"
            assert row["compile ms"] == "-" and row["vs compile"] == "-"  # --no-compile
        # the --json row is the API's episode
        j = by_task[name]
        assert j["episode_id"] == ep["id"] and j["job_id"] == ep["job_id"]
        assert j["end_reason"] == ep["end_reason"] and j["status"] == row["status"]
        assert j["reward"] == res.get("reward")
        assert j["speedup_vs_eager"] == res.get("speedup_vs_eager")
        assert j["speedup_vs_compile"] == res.get("speedup_vs_compile")
        assert j["timing"] == (res.get("verdict") or {}).get("timing")
        assert j["best_candidate_id"] == ep["best_candidate_id"] and j["n_turns"] == ep["n_turns"]
        assert j["page"] == links[name]
        assert j["solved"] == (ep["end_reason"] == "submitted" and res["verdict"]["status"] == "ok")
        # a solved task is on the leaderboard of the examples suite, an unsolved one is not
        assert (ep["id"] in on_board) == j["solved"], (name, board)

    # gelu: the expert's elementwise kernel, solved, a number for its speedup
    assert rows["gelu"]["status"] == "submitted", p.stdout
    assert int(rows["gelu"]["reward"]) >= 1 and SPEEDUP.match(rows["gelu"]["vs eager"]), rows["gelu"]
    assert by_task["gelu"]["solved"] and by_task["gelu"]["speedup_vs_eager"] > 0
    # matmul: today unsupported (naming the operator), once the expert handles it, solved
    assert rows["matmul"]["status"] in ("unsupported", "submitted"), rows["matmul"]
    if rows["matmul"]["status"] == "unsupported":
        assert "matmul" in rows["matmul"]["detail"] and rows["matmul"]["reward"] == "-1"

    # the summary below the table agrees with the rows
    solved = sum(1 for r in data["results"] if r["solved"])
    assert data["summary"]["solved"] == solved and data["summary"]["tasks"] == 2
    assert f"solved (correct at the final re-validation): {solved}/2" in p.stdout


# ---- bench/expert_bench.py's arithmetic ------------------------------------------------------


def made_up() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, Any]]:
    rows = [
        {
            "task": "a",
            "status": "submitted",
            "solved": True,
            "speedup_vs_eager": 2.0,
            "speedup_vs_compile": 1.5,
        },
        {
            "task": "b",
            "status": "submitted",
            "solved": True,
            "speedup_vs_eager": 0.5,
            "speedup_vs_compile": 1.04,
        },
        {
            "task": "c",
            "status": "unsupported",
            "solved": False,
            "speedup_vs_eager": None,
            "speedup_vs_compile": None,
        },
        {
            "task": "d",
            "status": "submitted",
            "solved": True,
            "speedup_vs_eager": 1.05,
            "speedup_vs_compile": None,
        },
        # timed but wrong at the re-validation: neither solved nor faster, no fraction
        {
            "task": "e",
            "status": "submitted",
            "solved": False,
            "speedup_vs_eager": 9.0,
            "speedup_vs_compile": 9.0,
        },
    ]
    ms = {"a": (1.0, 2.0), "b": (4.0, 2.0), "c": (None, None), "d": (2.0, 2.1), "e": (0.1, 0.9)}
    for r in rows:
        r["candidate_ms"], r["eager_ms"] = ms[r["task"]]
    works = {
        "a": {"bound": "memory", "flops": 0, "bytes": 10**9},
        "b": {"bound": "compute", "flops": 2 * 10**9, "bytes": 10**6},
        "c": {"bound": "compute", "flops": 10**9, "bytes": 10**6},
        "d": {"bound": "memory", "flops": 0, "bytes": 2 * 10**9},
        "e": {"bound": "memory", "flops": 0, "bytes": 10**9},
    }
    peaks = {"backend": "cpu", "device": "made up", "bandwidth_Bps": 4e12, "peak_flops": 1e12}
    peaks.update(copy_MiB=1, copy_ms=1.0, mm_n=1, mm_ms=1.0)
    return rows, works, peaks


def test_expert_bench_summary_arithmetic() -> None:
    rows, works, peaks = made_up()
    b = {r["task"]: eb.bench_row(r, works[r["task"]], peaks) for r in rows}
    # a: 1e9 bytes in 1 ms = 1e12 B/s of 4e12; eager (2 ms) reaches half that
    assert b["a"]["achieved"] == pytest.approx(1e12) and b["a"]["limit_fraction"] == pytest.approx(0.25)
    assert b["a"]["eager_limit_fraction"] == pytest.approx(0.125)
    # b: 2e9 FLOP in 4 ms = 5e11 FLOP/s of 1e12
    assert b["b"]["limit_fraction"] == pytest.approx(0.5)
    assert b["d"]["limit_fraction"] == pytest.approx(0.25)
    assert b["c"]["limit_fraction"] is None and b["c"]["achieved"] is None
    assert b["e"]["limit_fraction"] is None  # not solved: its time does not count
    s = eb.overall(list(b.values()))
    assert s["tasks"] == 5 and s["solved"] == 3 and s["solved_share"] == pytest.approx(0.6)
    # faster by more than 5%: a only (d is exactly 5% faster; b's 1.04x is not over compile)
    assert s["faster_than_eager"] == 1 and s["faster_than_eager_share"] == pytest.approx(0.2)
    assert s["faster_than_compile"] == 1 and s["faster_than_compile_share"] == pytest.approx(0.2)
    assert s["geomean_vs_eager"] == pytest.approx((2.0 * 0.5 * 1.05) ** (1 / 3))
    assert s["geomean_vs_compile"] == pytest.approx(math.sqrt(1.5 * 1.04))
    assert s["geomean_eager_all"] == pytest.approx((2.0 * 0.5 * 1.0 * 1.05 * 1.0) ** (1 / 5))
    assert s["geomean_compile_all"] == pytest.approx((1.5 * 1.04) ** (1 / 5))
    assert s["memory_bound_tasks"] == 3 and s["memory_bound_measured"] == 2
    assert s["memory_bound_mean_fraction"] == pytest.approx(0.25)
    assert s["compute_bound_tasks"] == 2 and s["compute_bound_mean_fraction"] == pytest.approx(0.5)
    md = eb.markdown(list(b.values()), s, peaks)
    assert (
        "| a | submitted | yes | 1.000 | 2.000 | - | 2.00x | 1.50x | - | memory | 1000.0 GB/s | 25.0% | 12.5% |"
        in md
    )
    assert "| c | unsupported | no |" in md and "| solved | 3/5 (60%) |" in md


def test_expert_bench_work_from_a_graph() -> None:
    def t(shape: list[int]) -> dict[str, Any]:
        return {"shape": shape, "dtype": "float32"}

    mm = {
        "inputs": [t([64, 32]), t([32, 16])],
        "outputs": t([64, 16]),
        "parameters": [],
        "graph": {
            "source": "fx",
            "nodes": [
                {"name": "a", "op": "placeholder", "target": "a", "output": t([64, 32])},
                {"name": "b", "op": "placeholder", "target": "b", "output": t([32, 16])},
                {
                    "name": "mm",
                    "op": "call_function",
                    "target": "torch.matmul",
                    "args": [{"node": "a"}, {"node": "b"}],
                    "output": t([64, 16]),
                },
            ],
        },
    }
    assert eb.graph_flops(mm) == 2 * 64 * 16 * 32
    assert eb.moved_bytes(mm) == 4 * (64 * 32 + 32 * 16 + 64 * 16)
    assert eb.task_work(mm)["bound"] == "compute"
    lin = {
        "inputs": [t([8, 100])],
        "outputs": t([8, 50]),
        "parameters": [
            {"name": "l.weight", "shape": [50, 100], "dtype": "float32"},
            {"name": "l.bias", "shape": [50], "dtype": "float32"},
        ],
        "graph": {
            "source": "fx",
            "nodes": [
                {"name": "x", "op": "placeholder", "target": "x", "output": t([8, 100])},
                {
                    "name": "l",
                    "op": "call_module",
                    "target": "l",
                    "module_type": "Linear",
                    "attrs": {"in_features": 100, "out_features": 50},
                    "args": [{"node": "x"}],
                    "output": t([8, 50]),
                },
                {
                    "name": "relu",
                    "op": "call_function",
                    "target": "torch.relu",
                    "args": [{"node": "l"}],
                    "output": t([8, 50]),
                },
            ],
        },
    }
    assert eb.graph_flops(lin) == 2 * 8 * 50 * 100
    assert eb.moved_bytes(lin) == 4 * (800 + 400 + 5000 + 50)  # parameters count
    conv = {
        "graph": {
            "source": "fx",
            "nodes": [
                {"name": "x", "op": "placeholder", "target": "x", "output": t([2, 4, 8, 8])},
                {
                    "name": "c",
                    "op": "call_module",
                    "target": "c",
                    "module_type": "Conv2d",
                    "attrs": {"in_channels": 4, "out_channels": 6, "kernel_size": [3, 3], "groups": 2},
                    "args": [{"node": "x"}],
                    "output": t([2, 6, 8, 8]),
                },
            ],
        }
    }
    assert eb.graph_flops(conv) == 2 * (2 * 6 * 8 * 8) * (4 // 2) * 9
    aten = {
        "graph": {
            "source": "aten",
            "nodes": [
                {"op": "aten.addmm.default", "args": [t([16]), t([4, 8]), t([8, 16])], "output": t([4, 16])}
            ],
        }
    }
    assert eb.graph_flops(aten) == 2 * 4 * 16 * 8
    ew = {
        "inputs": [t([10, 10])],
        "outputs": t([10, 10]),
        "parameters": [],
        "graph": {
            "source": "fx",
            "nodes": [
                {
                    "name": "g",
                    "op": "call_function",
                    "target": "torch.nn.functional.gelu",
                    "args": [],
                    "output": t([10, 10]),
                }
            ],
        },
    }
    assert eb.task_work(ew) == {"bound": "memory", "flops": 0, "bytes": 800}
