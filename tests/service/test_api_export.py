"""GET /v1/export: the trajectory and sft records, keyset paging on export_seq (every episode
exactly once, also while other transactions keep finishing episodes), the filters, gzip, the
query errors, and examples/export_to_dataset.py against the live server. Episodes are seeded by
SQL (episodekit.py) and finished the way the worker does, under the export lock."""

from __future__ import annotations

import base64
import gzip
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from episodekit import SYSTEM, TOOLS, add_episode, call, default_turns, finish, messages_of, new_task, turn
from servicekit import ROOT, Stack, assert_error

EXAMPLE = ROOT / "examples" / "export_to_dataset.py"
TRAJECTORY_KEYS = {
    "schema_version", "episode_id", "job_id", "task", "policy", "limits", "env", "tools", "messages",
    "turns", "final", "created_at", "finished_at",
}  # fmt: skip
TURN_KEYS = {
    "idx", "prompt_token_ids", "completion_token_ids", "logprobs", "finish_reason", "rewards",
    "malformed", "prompt_tokens", "completion_tokens",
}  # fmt: skip
TRAILER_KEYS = {"next_cursor", "resume_cursor", "count", "schema_version"}


def parse(text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """An NDJSON page: its records and its trailer (the last line)."""
    assert text.endswith("\n"), text[-200:]
    lines = [json.loads(x) for x in text.split("\n")[:-1]]
    assert lines, "no trailer"
    trailer = lines[-1]
    assert set(trailer) == TRAILER_KEYS, trailer
    assert trailer["schema_version"] == 1 and trailer["count"] == len(lines) - 1
    return lines[:-1], trailer


def page(stack: Stack, **params: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    r = stack.api.get("/v1/export", params={k: str(v) for k, v in params.items()}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/x-ndjson; charset=utf-8", r.headers
    return parse(r.text)


def export_all(stack: Stack, **params: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10000):
        q = dict(params, **({"cursor": cursor} if cursor else {}))
        records, trailer = page(stack, **q)
        out += records
        assert trailer["resume_cursor"] == (trailer["next_cursor"] or trailer["resume_cursor"])
        cursor = trailer["next_cursor"]
        if cursor is None:
            return out
    raise AssertionError("the export never ended")


def seq_of(cursor: str) -> int:
    return int(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())


def ids(records: list[dict[str, Any]]) -> list[str]:
    return [r.get("episode_id") for r in records]


def test_trajectory_record(stack: Stack) -> None:
    task = new_task(stack, "trajectory")
    turns = default_turns()
    ep = add_episode(
        stack, task, turns, policy="openai", policy_config={"model": "q", "base_url": "http://x"}
    )
    add_episode(stack, task, finished=False)  # not finished: never exported
    records, trailer = page(stack, task_id=task)
    assert ids(records) == [ep] and trailer["next_cursor"] is None
    rec = records[0]
    assert set(rec) == TRAJECTORY_KEYS, set(rec) ^ TRAJECTORY_KEYS
    info = stack.api.get(f"/v1/tasks/{task}").json()
    job = stack.psql(f"SELECT job_id FROM episodes WHERE id = '{ep}'")
    assert rec["schema_version"] == 1 and rec["episode_id"] == ep and rec["job_id"] == job
    assert rec["task"] == {"id": task, "name": info["name"], "sha256": info["sha256"], "backend": "cpu"}
    assert rec["policy"] == {"name": "openai", "model": "q", "base_url": "http://x"}
    assert rec["limits"] == {"max_turns": 200, "max_wall_s": 3600} and rec["env"]["torch"] == "2.x"
    assert rec["tools"] == TOOLS
    prompt = [SYSTEM, {"role": "user", "content": f"Optimize task {task}."}]
    assert rec["messages"] == messages_of(turns, prompt)
    assert [m["role"] for m in rec["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "tool", "assistant", "tool",
    ]  # fmt: skip
    assert len(rec["turns"]) == 3
    for i, (got, want) in enumerate(zip(rec["turns"], turns)):
        assert set(got) == TURN_KEYS and got["idx"] == i
        for key in TURN_KEYS - {"idx"}:
            assert got[key] == want[key], key
    assert rec["final"] == {
        "reward": 3,
        "reward_version": "cuda-agent-v1",
        "speedup_vs_eager": 1.8,
        "speedup_vs_compile": 1.2,
        "device": "cpu",
        "end_reason": "submitted",
        "status": "finished",
    }
    assert rec["created_at"].endswith("Z") and rec["finished_at"].endswith("Z")
    seq = int(stack.psql(f"SELECT export_seq FROM episodes WHERE id = '{ep}'"))
    assert seq_of(trailer["resume_cursor"]) == seq, "the cursor is base64url of export_seq"


def test_text_beyond_ascii(stack: Stack) -> None:
    """Text of any language comes back as sent: the reply says it is UTF-8 (a client that
    guessed could read it as another encoding), and a line ends only at \\n, never at U+2028 or
    U+0085 inside a string (PostgreSQL leaves those unescaped; str.splitlines would split there)."""
    task = new_task(stack, "unicode")
    text = 'tiles of 4×4 → ‘faster’ … naïve Ωμέγα 注意力\u2028line\u0085next \\"q\\"'
    turns = [turn([call("write_file", {"path": "kernels/k.cu", "content": f"// {text}"})], text)]
    ep = add_episode(stack, task, turns)
    r = stack.api.get("/v1/export", params={"task_id": task}, timeout=60)
    assert r.status_code == 200 and r.encoding == "utf-8", r.headers
    records, _ = parse(r.text)
    assert ids(records) == [ep]
    assistant = next(m for m in records[0]["messages"] if m["role"] == "assistant")
    assert assistant["content"] == text
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"])["content"] == f"// {text}"


def test_sft_record(stack: Stack) -> None:
    task = new_task(stack, "sft")
    turns = [turn([call("bash", {"command": "ls"})], "thinking"), turn([], "Done.")]
    add_episode(stack, task, turns)
    records, _ = page(stack, task_id=task, format="sft")
    assert len(records) == 1 and set(records[0]) == {"messages", "tools"}
    prompt = [SYSTEM, {"role": "user", "content": f"Optimize task {task}."}]
    assert records[0]["messages"] == messages_of(turns, prompt) and records[0]["tools"] == TOOLS
    assert records[0]["messages"][-1] == {"role": "assistant", "content": "Done."}


def test_empty_page(stack: Stack) -> None:
    task = new_task(stack, "empty")
    records, trailer = page(stack, task_id=task)
    assert records == [] and trailer == {
        "next_cursor": None,
        "resume_cursor": None,
        "count": 0,
        "schema_version": 1,
    }
    records, trailer = page(stack, task_id=task, cursor="MTIzNDU")  # "12345"
    assert records == [] and trailer["next_cursor"] is None and trailer["resume_cursor"] == "MTIzNDU"


def test_paging_gives_every_episode_once(stack: Stack) -> None:
    task = new_task(stack, "paging")
    made = [add_episode(stack, task, [turn([call("bash", {"n": i})])]) for i in range(23)]
    for limit in (1, 4, 23, 100):
        got = export_all(stack, task_id=task, limit=limit)
        assert ids(got) == made, limit  # export_seq order is finishing order
    # a full page ends with a cursor even when nothing follows only if a record does follow
    records, trailer = page(stack, task_id=task, limit=23)
    assert len(records) == 23 and trailer["next_cursor"] is None
    records, trailer = page(stack, task_id=task, limit=22)
    assert trailer["next_cursor"] is not None
    records, trailer = page(stack, task_id=task, cursor=trailer["next_cursor"])
    assert ids(records) == made[22:] and trailer["next_cursor"] is None
    # everything, unfiltered, small pages: each exported episode once, in export_seq order
    everything = export_all(stack, limit=7, format="trajectory")
    assert len(set(ids(everything))) == len(everything)
    want = stack.psql("SELECT id FROM episodes WHERE export_seq IS NOT NULL ORDER BY export_seq").split("\n")
    assert ids(everything) == want


def test_no_gaps_while_episodes_finish(stack: Stack) -> None:
    """Two writers finish episodes (each holding its transaction open a little after drawing
    export_seq) while a reader pages with small limits, following next_cursor and, once caught up,
    resume_cursor: every episode comes exactly once."""
    task = new_task(stack, "concurrent")
    todo = [add_episode(stack, task, [turn([call("bash", {"i": i})])], finished=False) for i in range(40)]
    random.Random(7).shuffle(todo)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while True:
                with lock:
                    if not todo:
                        return
                    ep = todo.pop()
                finish(stack, ep, hold_s=rng.choice([0, 0, 0.02, 0.05]))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    seen: list[str] = []
    cursor = None
    deadline = time.monotonic() + 120
    while True:
        done = not any(t.is_alive() for t in threads)
        records, trailer = page(stack, task_id=task, limit=3, **({"cursor": cursor} if cursor else {}))
        seen += ids(records)
        cursor = trailer["next_cursor"] or trailer["resume_cursor"]
        if done and not records and trailer["next_cursor"] is None:
            break
        assert time.monotonic() < deadline, "the reader never caught up"
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(seen) == len(set(seen)) == 40, (len(seen), len(set(seen)))
    want = stack.psql(f"SELECT id FROM episodes WHERE task_id = '{task}' ORDER BY export_seq").split("\n")
    assert seen == want


def test_filters(stack: Stack) -> None:
    task = new_task(stack, "filters")
    early = add_episode(stack, task, finished_at="2001-01-01T00:00:00Z", reward=-1)
    mid = add_episode(stack, task, finished_at="2001-06-01T12:00:00Z", reward=1, policy="openai")
    late = add_episode(stack, task, finished_at="2002-01-01T00:00:00Z", reward=2)
    none = add_episode(stack, task, finished_at="2003-01-01T00:00:00Z", reward=None)
    top = add_episode(stack, task, finished_at="2004-01-01T00:00:00Z", reward=3, policy="openai")

    def got(**params: Any) -> list[str]:
        return ids(export_all(stack, task_id=task, **params))

    assert got() == [early, mid, late, none, top]
    assert got(since="2001-03-01T00:00:00Z") == [mid, late, none, top]
    assert got(since="2001-06-01T12:00:00Z") == [mid, late, none, top], "since is inclusive"
    assert got(until="2002-01-01T00:00:00Z") == [early, mid], "until is exclusive"
    assert got(since="2001-01-01T00:00:00.5Z", until="2002-01-01T00:00:01Z") == [mid, late]
    assert got(since="2001-06-01T14:00:00+02:00", until="2001-06-01T14:00:00+01:00") == [mid]
    assert got(until="2001-06-01T07:00:00-05:00") == [early], "offsets count"
    r = stack.api.get(f"/v1/export?task_id={task}&since=2001-06-01T14:00:00+02:00")  # '+' unescaped
    assert ids(parse(r.text)[0]) == [mid, late, none, top]
    assert got(policy="openai") == [mid, top] and got(policy="expert") == [early, late, none]
    assert got(min_reward=2) == [late, top] and got(min_reward=-1) == [early, mid, late, top]
    assert got(min_reward=4) == []
    assert got(min_reward=1, policy="openai", since="2002-01-01T00:00:00Z") == [top]
    assert ids(export_all(stack, task_id=new_task(stack, "other"))) == []


def test_rft_filter(stack: Stack) -> None:
    task = new_task(stack, "rft")
    same = call("bash", {"command": "nvcc k.cu"})
    good = add_episode(stack, task, reward=3)
    small = add_episode(stack, task, reward=1)
    add_episode(stack, task, reward=-1)  # incorrect
    add_episode(stack, task, reward=0)  # not positive
    add_episode(stack, task, reward=None)  # no result
    bad = default_turns()
    bad[1]["malformed"] = True
    add_episode(stack, task, bad, reward=3)  # a malformed turn
    repeat = [turn([same]), turn([call("bash", same["function"]["arguments"])]), turn([call("submit", {})])]
    add_episode(stack, task, repeat, reward=3)  # two consecutive identical calls (other ids)
    pair = [
        turn([same, call("verify", {})]),
        turn([call("bash", same["function"]["arguments"]), call("verify", {})]),
    ]
    add_episode(stack, task, pair, reward=2)  # identical lists of two calls
    apart = [turn([same]), turn([call("verify", {})]), turn([same])]
    ok_apart = add_episode(stack, task, apart, reward=3)  # the same call, not consecutive
    args = [turn([call("bash", {"command": "a"})]), turn([call("bash", {"command": "b"})])]
    ok_args = add_episode(stack, task, args, reward=2)  # same tool, other arguments
    names = [turn([call("bash", {})]), turn([call("verify", {})])]
    ok_names = add_episode(stack, task, names, reward=2)  # same arguments, other tool
    quiet = [turn([], "hmm"), turn([], "done")]
    ok_quiet = add_episode(stack, task, quiet, reward=1)  # no calls at all is no repetition
    want = [good, small, ok_apart, ok_args, ok_names, ok_quiet]
    assert ids(export_all(stack, task_id=task, rft="true")) == want
    assert len(export_all(stack, task_id=task, rft="false")) == 12
    sft = export_all(stack, task_id=task, rft="true", format="sft", min_reward=2)
    assert len(sft) == 4 and all(set(r) == {"messages", "tools"} for r in sft)


def test_gzip(stack: Stack) -> None:
    task = new_task(stack, "gzip")
    for i in range(5):
        add_episode(stack, task, [turn([call("bash", {"i": i})]) for _ in range(3)])
    path = f"/v1/export?task_id={task}&limit=3"
    plain = stack.api.get(path, headers={"Accept-Encoding": "identity"}, timeout=30)
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    assert plain.headers["Vary"] == "Accept-Encoding"
    with stack.api.get(path, headers={"Accept-Encoding": "gzip"}, stream=True, timeout=30) as z:
        assert z.status_code == 200 and z.headers["Content-Encoding"] == "gzip"
        raw = z.raw.read(decode_content=False)
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw) == plain.content
    records, trailer = parse(plain.text)
    assert len(records) == 3 and trailer["next_cursor"]
    for ae in ("gzip;q=0", "deflate", "br, identity"):
        r = stack.api.get(path, headers={"Accept-Encoding": ae}, timeout=30)
        assert "Content-Encoding" not in r.headers and r.content == plain.content, ae
    r = stack.api.get(path, headers={"Accept-Encoding": "br;q=1.0, GZIP;q=0.5"}, stream=True, timeout=30)
    assert r.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(r.raw.read(decode_content=False)) == plain.content


def test_large_export_streams(stack: Stack) -> None:
    """Episodes of a few MB each (long token id lists): the fetches shrink to stay near their
    byte budget, and the stream, plain or gzipped, carries every record whole."""
    task = new_task(stack, "large")
    made = [add_episode(stack, task) for _ in range(6)]
    stack.psql(
        "UPDATE turns SET prompt_token_ids = (SELECT jsonb_agg(g) FROM generate_series(1, 250000) g)"
        f" WHERE episode_id IN (SELECT id FROM episodes WHERE task_id = '{task}')"
    )
    path = f"/v1/export?task_id={task}&limit=1000"
    plain = stack.api.get(path, headers={"Accept-Encoding": "identity"}, timeout=120)
    assert len(plain.content) > 6 * 3 * 250000 * 6
    records, trailer = parse(plain.text)
    assert ids(records) == made and trailer["next_cursor"] is None
    assert all(len(t["prompt_token_ids"]) == 250000 for r in records for t in r["turns"])
    with stack.api.get(path, headers={"Accept-Encoding": "gzip"}, stream=True, timeout=120) as z:
        assert gzip.decompress(z.raw.read(decode_content=False)) == plain.content


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("cursor=!!", "cursor"),
        ("cursor=MA=", "cursor"),  # padded
        ("cursor=YWJj", "cursor"),  # "abc"
        ("cursor=MDE", "cursor"),  # "01"
        ("cursor=MTIzNDV", "cursor"),  # stray low bits
        ("cursor=" + "MTEx" * 7, "cursor"),  # 21 digits
        ("cursor=", "cursor"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("limit=-1", "limit"),
        ("since=2026-02-30T00:00:00Z", "since"),
        ("since=2026-01-01", "since"),
        ("until=yesterday", "until"),
        ("until=2026-01-01T24:00:00Z", "until"),
        ("task_id=x", "task_id"),
        ("policy=gpt", "policy"),
        ("min_reward=1.5", "min_reward"),
        ("min_reward=", "min_reward"),
        ("rft=yes", "rft"),
        ("format=csv", "format"),
    ],
)
def test_bad_query(stack: Stack, query: str, field: str) -> None:
    err = assert_error(stack.api.get("/v1/export?" + query), "invalid_query")
    assert err["field"] == field, err


def test_example_round_trip(stack: Stack, tmp_path: Path) -> None:
    task = new_task(stack, "example")
    good = add_episode(stack, task, reward=3, policy="openai")
    worse = add_episode(stack, task, reward=-1)
    noids = [turn([call("bash", {})], prompt_token_ids=None, completion_token_ids=None, logprobs=None)]
    plain = add_episode(stack, task, noids + default_turns(), reward=2)

    def run(*args: str) -> str:
        p = subprocess.run(
            [
                sys.executable,
                str(EXAMPLE),
                "--url",
                stack.api.url,
                "--key",
                stack.key,
                "--task-id",
                task,
                "--page-size",
                "1",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        return p.stderr

    def lines(path: Path) -> list[dict[str, Any]]:
        return [json.loads(x) for x in path.read_text().splitlines()]

    sft, rft, ppo = tmp_path / "sft.jsonl", tmp_path / "rft.jsonl", tmp_path / "ppo.jsonl"
    run("--format", "sft", "--out", str(sft))
    want = export_all(stack, task_id=task, format="sft")
    assert lines(sft) == want and len(want) == 3
    run("--format", "rft", "--out", str(rft), "--arguments-as-objects")
    got = lines(rft)
    assert len(got) == 2 and all(set(r) == {"messages", "tools"} for r in got)
    calls = [c for m in got[0]["messages"] for c in m.get("tool_calls", [])]
    assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)
    run("--format", "ppo", "--out", str(ppo))
    rows = lines(ppo)
    want_rows = [
        (good, 0),
        (good, 1),
        (good, 2),
        (worse, 0),
        (worse, 1),
        (worse, 2),
        (plain, 1),
        (plain, 2),
        (plain, 3),
    ]
    assert [(r["episode_id"], r["turn"]) for r in rows] == want_rows
    assert [r["reward"] for r in rows] == [0, 0, 3, 0, 0, -1, 0, 0, 2]
    assert [r["done"] for r in rows] == [False, False, True] * 3
    assert rows[0]["prompt_token_ids"] == [1, 2, 3, 4] and rows[0]["completion_token_ids"] == [7, 8, 9]
    assert rows[0]["logprobs"] == [-0.5] and rows[0]["task_id"] == task and rows[0]["final_reward"] == 3

    # incremental: the state file keeps the cursor; the second run appends only what is new
    state, inc = tmp_path / "state", tmp_path / "inc.jsonl"
    run("--format", "sft", "--out", str(inc), "--state", str(state))
    assert len(lines(inc)) == 3 and state.read_text().strip()
    run("--format", "sft", "--out", str(inc), "--state", str(state))
    assert len(lines(inc)) == 3
    add_episode(stack, task, [turn([], "new")])
    run("--format", "sft", "--out", str(inc), "--state", str(state))
    assert len(lines(inc)) == 4 and lines(inc)[-1]["messages"][-1]["content"] == "new"

    help_text = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0 and "--format" in help_text.stdout and "TRL" in help_text.stdout
