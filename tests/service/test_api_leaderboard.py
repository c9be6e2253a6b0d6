"""GET /v1/leaderboard against seeded episodes with known speedups, devices, policies, models and
suites (episodes written by SQL as the worker finishes them, each published with its results;
tasks through the API, with their suites). The module seeds once; every test reads. Each reply is compared with a ranking computed
here in Python from the seeded values, and a few cases are also spelled out by hand."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from episodekit import add_candidate, finish, lit, sql_text
from servicekit import Stack, assert_error, unique_task

MARGIN = 1.05  # workers/harness/kforge_harness/reward.py
ROW_KEYS = {
    "rank", "task_id", "task_name", "suite", "backend", "device", "policy", "model", "episode_id",
    "candidate_id", "reward", "speedup_vs_eager", "speedup_vs_compile", "candidate_ms", "eager_ms",
    "compile_ms", "turns", "finished_at",
}  # fmt: skip
SUMMARY_KEYS = {
    "entries", "tasks", "geomean_speedup_vs_eager", "geomean_speedup_vs_compile",
    "share_faster_than_eager", "share_faster_than_compile",
}  # fmt: skip
DEFAULT_FILTER = {
    "backend": None, "device": None, "policy": None, "model": None, "suite": None, "task_id": None,
    "per": "task", "sort": "eager", "order": "desc", "limit": 200,
}  # fmt: skip
H200, H100, CPU = "NVIDIA H200", "NVIDIA H100 80GB HBM3", "AMD EPYC 9654 96-Core Processor"

# tasks: key -> (name, suite or None for the default)
TASKS = {
    "alpha": ("lb-alpha", "examples"),
    "beta": ("lb-beta", "examples"),
    "gamma": ("lb-gamma", "kernelbench-l1"),
    "delta": ("lb-delta", None),
    "omega": ("lb-omega", "never-ranked"),
}


@dataclass
class Ep:
    """One seeded episode; counted when finished, final_reward >= 1 and it has a best candidate."""

    key: str
    task: str
    backend: str
    device: str | None
    policy: str
    model: str | None
    reward: int | None
    se: float | None
    sc: float | None
    hour: int
    turns: int = 3
    status: str = "finished"
    candidate: bool = True
    timing: bool = True
    # filled when seeded
    id: str = ""
    task_id: str = ""
    candidate_id: str | None = None

    @property
    def finished_at(self) -> str:
        return f"2026-02-03T{self.hour:02d}:04:05.000000Z"

    @property
    def ms(self) -> tuple[float | None, float | None, float | None]:
        """candidate, eager and compile medians in the final verdict's timing."""
        if not self.timing or not self.se:
            return None, None, None
        cand = 0.5 + self.hour / 100
        return cand, cand * self.se, cand * self.sc if self.sc else None

    @property
    def counted(self) -> bool:
        return self.status == "finished" and (self.reward or 0) >= 1 and self.candidate


EPISODES = [
    Ep("a1", "alpha", "cuda", H200, "openai", "qwen-coder", 3, 2.0, 1.5, 1),
    Ep("a2", "alpha", "cuda", H200, "openai", "qwen-coder", 3, 3.0, 1.1, 2, turns=7),  # alpha's best
    Ep("a3", "alpha", "cuda", H200, "expert", None, 2, 1.5, 0.9, 3),
    Ep("a4", "alpha", "cpu", CPU, "expert", None, 1, 1.0, None, 4),
    Ep("b1", "beta", "cuda", H200, "openai", "llama-70b", 3, 1.2, 1.06, 5),
    Ep("b2", "beta", "cuda", H100, "openai", "llama-70b", 3, 1.2, 1.1, 6),  # ties b1 on eager
    Ep("b3", "beta", "cuda", H100, "openai", "llama-70b", 3, 1.2, 1.1, 7),  # ties b2, later
    Ep("g1", "gamma", "cpu", CPU, "expert", None, 1, 0.8, None, 8, timing=False),
    Ep("g2", "gamma", "cpu", CPU, "openai", "qwen-coder", 1, 1.04, 0.5, 9),
    Ep("d1", "delta", "cuda", H200, "expert", None, 2, 1.3, 1.0, 10),
    # never ranked: not finished, incorrect, no reward, no best candidate
    Ep("x1", "alpha", "cuda", "TPU v9", "openai", "gpt-x", 3, 10.0, 9.0, 11, status="failed"),
    Ep("x2", "alpha", "cuda", H200, "openai", "qwen-coder", -1, 20.0, 20.0, 12),
    Ep("x3", "beta", "cuda", H200, "openai", "llama-70b", 0, 5.0, 5.0, 13),
    Ep("x4", "gamma", "cpu", CPU, "expert", None, 3, 4.0, 4.0, 14, candidate=False),
    Ep("x5", "omega", "cuda", "TPU v9", "expert", None, None, None, None, 15),
    Ep("x6", "omega", "cuda", H200, "openai", "gpt-x", 3, 50.0, 50.0, 16, status="running"),
    Ep("x7", "omega", "cuda", H200, "expert", None, 3, 60.0, 60.0, 17, status="cancelled"),
]
BY_KEY = {e.key: e for e in EPISODES}


def seed_episode(stack: Stack, e: Ep) -> None:
    e.id, job = str(uuid.uuid4()), str(uuid.uuid4())
    if e.candidate:
        e.candidate_id = add_candidate(stack, e.task_id, {"kernels/k.cu": f"// {e.key}\n"})
    verdict: dict[str, Any] | None = None
    if e.reward is not None:
        verdict = {"status": "ok" if e.reward >= 1 else "incorrect", "reward": e.reward}
        cand, eager, comp = e.ms
        if e.timing and cand is not None:
            verdict["timing"] = {
                "candidate": {"median_ms": cand, "trials": 10},
                "eager": {"median_ms": eager, "trials": 10},
                "compile": {"median_ms": comp, "trials": 10} if comp is not None else None,
                "device": e.device,
            }
    config = {"model": e.model} if e.model else {}
    num = lambda v: "NULL" if v is None else repr(v)  # noqa: E731
    stack.psql(
        "BEGIN;"
        " INSERT INTO jobs (id, kind, class, backend, task_id, status, attempt)"
        f" VALUES ('{job}', 'optimize', '{e.backend}', '{e.backend}', '{e.task_id}', 'running', 1);"
        " INSERT INTO episodes (id, job_id, task_id, backend, policy, policy_config, status, attempt,"
        " n_turns, best_candidate_id, final_verdict, final_reward, speedup_vs_eager, speedup_vs_compile,"
        " device, started_at, publish)"
        f" VALUES ('{e.id}', '{job}', '{e.task_id}', '{e.backend}', '{e.policy}', {lit(config)},"
        f" 'running', 1, {e.turns}, {sql_text(e.candidate_id)}::uuid,"
        f" {lit(verdict) if verdict else 'NULL'}, {num(e.reward)}, {num(e.se)}, {num(e.sc)},"
        f" {sql_text(e.device)}, now(), 'results');"
        " COMMIT"
    )
    if e.status == "finished":
        finish(stack, e.id, finished_at=e.finished_at)
    elif e.status != "running":
        stack.psql(
            f"UPDATE episodes SET status = '{e.status}', finished_at = '{e.finished_at}' WHERE id = '{e.id}'"
        )


@pytest.fixture(scope="module")
def seeded(stack: Stack) -> dict[str, str]:
    """The tasks (through the API, with their suites) and the episodes; task key -> id."""
    ids: dict[str, str] = {}
    for key, (name, suite) in TASKS.items():
        body = {"source": unique_task(f"leaderboard {key}"), "name": name, "backend": "cuda"}
        if suite:
            body["suite"] = suite
        r = stack.api.post("/v1/tasks", body)
        assert r.status_code == 201, r.text
        assert r.json()["task"]["suite"] == (suite or "user")
        ids[key] = r.json()["task"]["id"]
    for e in EPISODES:
        e.task_id = ids[e.task]
        seed_episode(stack, e)
    return ids


# ---- the reference ranking ----------------------------------------------------------------------


def suite_of(e: Ep) -> str:
    return TASKS[e.task][1] or "user"


def best_key(e: Ep) -> tuple[Any, ...]:
    """Highest eager speedup, then highest compile speedup, then earliest (missing values last)."""
    return (
        -e.se if e.se is not None else math.inf,
        -e.sc if e.sc is not None else math.inf,
        e.finished_at,
        e.id,
    )


SORT_VALUE = {
    "eager": lambda e: e.se,
    "compile": lambda e: e.sc,
    "reward": lambda e: e.reward,
    "task": lambda e: TASKS[e.task][0],
    "recent": lambda e: e.finished_at,
}


def expected(params: dict[str, Any]) -> tuple[list[Ep], list[Ep]]:
    """(the ranked rows before the limit, the rows given) for params."""
    p = {**DEFAULT_FILTER, **params}
    rows = [
        e
        for e in EPISODES
        if e.counted
        and p["backend"] in (None, e.backend)
        and p["device"] in (None, e.device)
        and p["policy"] in (None, e.policy)
        and p["model"] in (None, e.model)
        and p["suite"] in (None, suite_of(e))
        and p["task_id"] in (None, e.task_id)
    ]
    groups: dict[tuple[Any, ...], Ep] = {}
    for e in sorted(rows, key=best_key):
        g = (e.task,) if p["per"] == "task" else (e.task, e.device, e.policy, e.model)
        groups.setdefault(g, e)
    best = sorted(groups.values(), key=best_key)
    value = SORT_VALUE[p["sort"]]
    have = [e for e in best if value(e) is not None]
    have.sort(key=value, reverse=p["order"] == "desc")  # stable: ties stay best first
    ranked = have + [e for e in best if value(e) is None]
    return ranked, ranked[: int(p["limit"])]


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def share(xs: list[float | None], n: int) -> float | None:
    return sum(1 for x in xs if x is not None and x > MARGIN) / n if n else None


def same(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """Equal, floats to 12 significant digits (PostgreSQL's and Python's logs differ in the last)."""
    if set(got) != set(want):
        return False
    for k, w in want.items():
        g = got[k]
        if isinstance(w, float) and isinstance(g, (int, float)) and not isinstance(g, bool):
            if not math.isclose(g, w, rel_tol=1e-12):
                return False
        elif g != w or type(g) is not type(w):
            return False
    return True


def board(stack: Stack, **params: Any) -> dict[str, Any]:
    r = stack.api.get("/v1/leaderboard", params={k: str(v) for k, v in params.items()})
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/json"
    body = r.json()
    assert set(body) == {"rows", "summary", "facets", "filter"}, body.keys()
    return body


def check_against_reference(stack: Stack, **params: Any) -> dict[str, Any]:
    body = board(stack, **params)
    ranked, given = expected(params)
    assert [r["episode_id"] for r in body["rows"]] == [e.id for e in given], (
        params,
        [BY_KEY_OF[r["episode_id"]] for r in body["rows"]],
        [e.key for e in given],
    )
    for i, (row, e) in enumerate(zip(body["rows"], given)):
        assert set(row) == ROW_KEYS, row.keys()
        cand, eager, comp = e.ms
        want = {
            "rank": i + 1, "task_id": e.task_id, "task_name": TASKS[e.task][0], "suite": suite_of(e),
            "backend": e.backend, "device": e.device, "policy": e.policy, "model": e.model,
            "episode_id": e.id, "candidate_id": e.candidate_id, "reward": e.reward,
            "speedup_vs_eager": e.se, "speedup_vs_compile": e.sc, "candidate_ms": cand,
            "eager_ms": eager, "compile_ms": comp, "turns": e.turns, "finished_at": e.finished_at,
        }  # fmt: skip
        assert same(row, want), (params, e.key, row, want)
    s = body["summary"]
    assert set(s) == SUMMARY_KEYS, s
    n = len(ranked)
    want_summary = {
        "entries": n,
        "tasks": len({e.task for e in ranked}),
        "geomean_speedup_vs_eager": geomean([e.se for e in ranked]),
        "geomean_speedup_vs_compile": geomean([e.sc for e in ranked]),
        "share_faster_than_eager": share([e.se for e in ranked], n),
        "share_faster_than_compile": share([e.sc for e in ranked], n),
    }
    assert same(s, want_summary), (params, s, want_summary)
    assert body["filter"] == {**DEFAULT_FILTER, **params}, body["filter"]
    return body


BY_KEY_OF: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _keys(seeded: dict[str, str]) -> None:
    BY_KEY_OF.update({e.id: e.key for e in EPISODES})


# ---- the tests ----------------------------------------------------------------------------------


def test_per_task_picks_the_best_of_each_task(stack: Stack, seeded: dict[str, str]) -> None:
    body = check_against_reference(stack)
    keys = [BY_KEY_OF[r["episode_id"]] for r in body["rows"]]
    # alpha: a2 (3.0); beta: b2 (1.2 like b1 and b3, faster than torch.compile than b1, earlier
    # than b3); delta: d1 (1.3); gamma: g2 (1.04)
    assert keys == ["a2", "d1", "b2", "g2"]
    assert [r["rank"] for r in body["rows"]] == [1, 2, 3, 4]
    top = body["rows"][0]
    assert top["turns"] == 7 and top["model"] == "qwen-coder" and top["suite"] == "examples"
    assert top["candidate_id"] == BY_KEY["a2"].candidate_id
    assert top["candidate_ms"] == pytest.approx(0.52) and top["eager_ms"] == pytest.approx(1.56)
    assert top["finished_at"] == "2026-02-03T02:04:05.000000Z"
    s = body["summary"]
    assert s["entries"] == 4 and s["tasks"] == 4
    assert s["geomean_speedup_vs_eager"] == pytest.approx((3.0 * 1.3 * 1.2 * 1.04) ** 0.25)
    assert s["geomean_speedup_vs_compile"] == pytest.approx((1.1 * 1.0 * 1.1 * 0.5) ** 0.25)
    assert s["share_faster_than_eager"] == pytest.approx(3 / 4)
    assert s["share_faster_than_compile"] == pytest.approx(2 / 4)


def test_per_entry_gives_one_row_per_group(stack: Stack, seeded: dict[str, str]) -> None:
    body = check_against_reference(stack, per="entry")
    keys = [BY_KEY_OF[r["episode_id"]] for r in body["rows"]]
    assert sorted(keys) == sorted(["a2", "a3", "a4", "b1", "b2", "g1", "g2", "d1"])
    groups = [(r["task_id"], r["device"], r["policy"], r["model"]) for r in body["rows"]]
    assert len(groups) == len(set(groups))
    assert body["summary"]["entries"] == 8 and body["summary"]["tasks"] == 4
    # g1 has no timing in its verdict: its medians are null
    g1 = next(r for r in body["rows"] if r["episode_id"] == BY_KEY["g1"].id)
    assert g1["candidate_ms"] is None and g1["eager_ms"] is None and g1["compile_ms"] is None
    a4 = next(r for r in body["rows"] if r["episode_id"] == BY_KEY["a4"].id)
    assert a4["speedup_vs_compile"] is None and a4["compile_ms"] is None and a4["eager_ms"] is not None


@pytest.mark.parametrize(
    "params",
    [
        {"backend": "cuda"},
        {"backend": "cpu"},
        {"device": H200},
        {"device": H100},
        {"device": CPU, "per": "entry"},
        {"device": "TPU v9"},
        {"policy": "expert"},
        {"policy": "openai", "per": "entry"},
        {"model": "qwen-coder"},
        {"model": "llama-70b", "per": "entry"},
        {"suite": "examples"},
        {"suite": "user"},
        {"suite": "kernelbench-l1", "per": "entry"},
        {"suite": "never-ranked"},
        {"task_id": "alpha"},
        {"task_id": "alpha", "per": "entry"},
        {"task_id": "omega"},
        {"backend": "cuda", "policy": "openai", "suite": "examples", "per": "entry"},
    ],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()),
)
def test_filters_narrow(stack: Stack, seeded: dict[str, str], params: dict[str, Any]) -> None:
    params = {k: seeded[v] if k == "task_id" else v for k, v in params.items()}
    body = check_against_reference(stack, **params)
    for row in body["rows"]:
        for k in ("backend", "device", "policy", "model", "suite", "task_id"):
            if k in params:
                assert row[k] == params[k], (k, row)


def test_filter_narrows_before_the_best(stack: Stack, seeded: dict[str, str]) -> None:
    """The best under the filter: with policy=expert, alpha's row is a3 (not a2, an openai one)."""
    body = board(stack, policy="expert")
    assert [BY_KEY_OF[r["episode_id"]] for r in body["rows"]] == ["a3", "d1", "g1"]


@pytest.mark.parametrize("sort", ["eager", "compile", "reward", "task", "recent"])
@pytest.mark.parametrize("order", ["desc", "asc"])
@pytest.mark.parametrize("per", ["task", "entry"])
def test_sort_and_order(stack: Stack, seeded: dict[str, str], sort: str, order: str, per: str) -> None:
    body = check_against_reference(stack, sort=sort, order=order, per=per)
    assert [r["rank"] for r in body["rows"]] == list(range(1, len(body["rows"]) + 1))


def test_sort_by_hand(stack: Stack, seeded: dict[str, str]) -> None:
    def keys(**p: Any) -> list[str]:
        return [BY_KEY_OF[r["episode_id"]] for r in board(stack, **p)["rows"]]

    assert keys(sort="task", order="asc") == ["a2", "b2", "d1", "g2"]
    assert keys(sort="task") == ["g2", "d1", "b2", "a2"]
    assert keys(sort="recent") == ["d1", "g2", "b2", "a2"]
    assert keys(sort="eager", order="asc") == ["g2", "b2", "d1", "a2"]
    # compile: missing values last in both orders
    assert keys(sort="compile", per="entry")[-2:] == ["a4", "g1"]
    assert keys(sort="compile", per="entry", order="asc")[-2:] == ["a4", "g1"]


def test_limit_keeps_summary(stack: Stack, seeded: dict[str, str]) -> None:
    full = board(stack, per="entry")
    for limit in (1, 3, 8, 1000):
        body = check_against_reference(stack, per="entry", limit=limit)
        assert len(body["rows"]) == min(limit, 8)
        assert body["rows"] == full["rows"][:limit]
        assert body["summary"] == full["summary"], "the summary is over every ranked row"
    # the summary does not depend on the sort either
    assert board(stack, per="entry", sort="task", order="asc")["summary"] == full["summary"]


def test_facets_are_unfiltered(stack: Stack, seeded: dict[str, str]) -> None:
    counted = [e for e in EPISODES if e.counted]
    want = {
        "backends": sorted({e.backend for e in counted}),
        "devices": sorted({e.device for e in counted if e.device}),
        "policies": sorted({e.policy for e in counted}),
        "models": sorted({e.model for e in counted if e.model}),
        "suites": sorted({suite_of(e) for e in counted}),
    }
    assert want["devices"] == [CPU, H100, H200] and want["suites"] == ["examples", "kernelbench-l1", "user"]
    for params in ({}, {"backend": "cpu"}, {"suite": "never-ranked"}, {"per": "entry", "limit": 1}):
        assert board(stack, **params)["facets"] == want, params


def test_empty_board(stack: Stack, seeded: dict[str, str]) -> None:
    body = board(stack, device="no such device")
    assert body["rows"] == []
    assert body["summary"] == {
        "entries": 0, "tasks": 0, "geomean_speedup_vs_eager": None, "geomean_speedup_vs_compile": None,
        "share_faster_than_eager": None, "share_faster_than_compile": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    "query,field",
    [
        ("backend=gpu", "backend"),
        ("backend=", "backend"),
        ("backend=CUDA", "backend"),
        ("device=", "device"),
        ("device=" + "d" * 257, "device"),
        ("device=a%0Ab", "device"),
        ("policy=human", "policy"),
        ("model=", "model"),
        ("model=%ff%fe", "model"),
        ("suite=Examples", "suite"),
        ("suite=-x", "suite"),
        ("suite=" + "s" * 65, "suite"),
        ("suite=a%20b", "suite"),
        ("task_id=nope", "task_id"),
        ("task_id=", "task_id"),
        ("per=row", "per"),
        ("sort=speed", "sort"),
        ("order=up", "order"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("limit=1e3", "limit"),
        ("limit=", "limit"),
    ],
)
def test_bad_parameters(stack: Stack, query: str, field: str) -> None:
    err = assert_error(stack.api.get(f"/v1/leaderboard?{query}"), "invalid_query")
    assert err.get("field") == field, err
    assert err["message"].startswith(field + ":"), err


def test_task_suite_rules(stack: Stack) -> None:
    """suite on POST /v1/tasks: the default, the pattern, and the first creation's suite kept."""
    source = unique_task("suite kept")
    r = stack.api.post("/v1/tasks", {"source": source, "suite": "kernelbench-l2"})
    assert r.status_code == 201 and r.json()["task"]["suite"] == "kernelbench-l2", r.text
    again = stack.api.post("/v1/tasks", {"source": source, "suite": "examples"})
    assert again.status_code == 200 and again.json()["task"]["suite"] == "kernelbench-l2"
    got = stack.api.get(f"/v1/tasks/{r.json()['task']['id']}").json()
    assert got["suite"] == "kernelbench-l2"
    for bad in ("", "Upper", "-lead", ".lead", "a b", "x" * 65, 5, ["a"]):
        err = assert_error(
            stack.api.post("/v1/tasks", {"source": unique_task("bad suite"), "suite": bad}), "invalid_field"
        )
        assert err.get("field") == "suite", (bad, err)
    ok = stack.api.post(
        "/v1/tasks", {"source": unique_task("long suite"), "suite": "0" + "a._-" * 15 + "abc"}
    )
    assert ok.status_code == 201 and len(ok.json()["task"]["suite"]) == 64, ok.text


def test_task_baselines(stack: Stack, seeded: dict[str, str]) -> None:
    tid = seeded["delta"]
    assert stack.api.get(f"/v1/tasks/{tid}").json()["baselines"] == []
    stack.psql(
        "INSERT INTO baselines (task_id, backend, device, eager_ms, compile_ms, measured_at) VALUES"
        f" ('{tid}', 'cuda', '{H200}', 1.5, 0.75, '2026-02-03T04:05:06Z'),"
        f" ('{tid}', 'cpu', '{CPU}', 12.25, NULL, '2026-02-04T04:05:06Z'),"
        f" ('{tid}', 'cuda', '{H100}', 2.5, 1.25, '2026-02-05T04:05:06Z')"
    )
    got = stack.api.get(f"/v1/tasks/{tid}").json()
    assert got["baselines"] == [
        {"backend": "cpu", "device": CPU, "eager_ms": 12.25, "compile_ms": None,
         "measured_at": "2026-02-04T04:05:06.000000Z"},
        {"backend": "cuda", "device": H100, "eager_ms": 2.5, "compile_ms": 1.25,
         "measured_at": "2026-02-05T04:05:06.000000Z"},
        {"backend": "cuda", "device": H200, "eager_ms": 1.5, "compile_ms": 0.75,
         "measured_at": "2026-02-03T04:05:06.000000Z"},
    ]  # fmt: skip
    assert got["suite"] == "user"
    assert "baselines" not in stack.api.get("/v1/tasks?limit=1").json()["tasks"][0]
