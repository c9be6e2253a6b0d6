"""Episodes, turns and candidates written straight into a stack's database, for the tests of the
read side (GET /v1/episodes/{id}, /v1/candidates/{id}[/download], /v1/export) while no agent loop
fills them. Tasks are made through the API; everything else through psql, as the worker will:
an optimize job, its episode, its turns, and the finish under the export lock."""

from __future__ import annotations

import json
import uuid
from typing import Any

from servicekit import Stack, unique_task

# The advisory lock under which the worker draws export_seq (server/export_get.h).
EXPORT_LOCK = 8127346001

SYSTEM = {"role": "system", "content": "You write CUDA kernels. (the skill guide)"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("bash", "write_file", "verify", "submit")
]


def lit(value: Any) -> str:
    """A JSON value as a SQL jsonb literal (dollar-quoted with a tag the text cannot hold)."""
    text = json.dumps(value)
    tag = "j" + uuid.uuid4().hex[:8]
    assert f"${tag}$" not in text
    return f"${tag}${text}${tag}$::jsonb"


def sql_text(value: str | None) -> str:
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


JSONB_COLUMNS = {
    "assistant",
    "tool_results",
    "rewards",
    "prompt_token_ids",
    "completion_token_ids",
    "logprobs",
}


def sql_value(column: str, value: Any) -> str:
    """A turns column's value as SQL (None is NULL)."""
    if value is None:
        return "NULL"
    if column in JSONB_COLUMNS:
        return lit(value)
    if isinstance(value, str):
        return sql_text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def new_task(stack: Stack, tag: str = "episode") -> str:
    r = stack.api.post("/v1/tasks", {"source": unique_task(tag), "backend": "cpu"})
    assert r.status_code == 201, r.text
    return r.json()["task"]["id"]


def call(name: str, args: dict[str, Any] | str, cid: str | None = None) -> dict[str, Any]:
    """An OpenAI-format tool call (arguments as the JSON string a policy sends)."""
    return {
        "id": cid or "call_" + uuid.uuid4().hex[:8],
        "type": "function",
        "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
    }


def turn(calls: list[dict[str, Any]], content: str = "", **extra: Any) -> dict[str, Any]:
    """One turn: the assistant message with calls, one tool message per call, token ids and
    logprobs as vLLM returns them, and timings; extra overrides any column."""
    t: dict[str, Any] = {
        "assistant": {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})},
        "tool_results": [
            {"role": "tool", "tool_call_id": c["id"], "content": f"ran {c['function']['name']}"}
            for c in calls
        ],
        "finish_reason": "tool_calls" if calls else "stop",
        "rewards": [],
        "malformed": False,
        "prompt_token_ids": [1, 2, 3, 4],
        "completion_token_ids": [7, 8, 9],
        "logprobs": {"content": [{"token": "a", "logprob": -0.5, "bytes": [97], "top_logprobs": []}]},
        "prompt_tokens": 4,
        "completion_tokens": 3,
        "policy_ms": 12.5,
        "tools_ms": 30.0,
        "overhead_ms": 1.25,
    }
    t.update(extra)
    return t


def default_turns() -> list[dict[str, Any]]:
    return [
        turn([call("bash", {"command": "nvidia-smi"})], "Looking at the GPU."),
        turn(
            [call("write_file", {"path": "kernels/k.cu", "content": "..."}), call("verify", {})],
            rewards=[
                {"tool": "verify", "status": "ok", "correct": True, "reward": 3, "speedup_vs_eager": 1.8}
            ],
        ),
        turn([call("submit", {})]),
    ]


def add_candidate(stack: Stack, task_id: str, files: dict[str, str], fmt: str = "native") -> str:
    cid = str(uuid.uuid4())
    stack.psql(
        "INSERT INTO candidates (id, task_id, format, files, sha256, created_at)"
        f" VALUES ('{cid}', '{task_id}', '{fmt}', {lit(files)}, '{'0' * 64}',"
        " '2026-03-04T05:06:07Z')"
    )
    return cid


def add_episode(
    stack: Stack,
    task_id: str,
    turns: list[dict[str, Any]] | None = None,
    *,
    policy: str = "expert",
    reward: int | None = 3,
    status: str = "running",
    finished: bool = True,
    finished_at: str | None = None,
    best_candidate_id: str | None = None,
    policy_config: dict[str, Any] | None = None,
    owner: str | None = None,
    publish: str = "none",
) -> str:
    """An optimize job and its episode with turns; finished (export_seq drawn under the export
    lock) unless finished=False. finished_at fixes the finish time (else now()). The job is
    owner's (None: no owner's, as before owners existed: admin keys see it); publish is the
    episode's (none, results, sources). Returns its id."""
    turns = default_turns() if turns is None else turns
    job, ep = str(uuid.uuid4()), str(uuid.uuid4())
    prompt = [SYSTEM, {"role": "user", "content": f"Optimize task {task_id}."}]
    config = policy_config if policy_config is not None else {"model": "m", "sampling": {"temperature": 0.7}}
    parts = [
        "BEGIN",
        "INSERT INTO jobs (id, kind, class, backend, task_id, status, attempt, owner)"
        f" VALUES ('{job}', 'optimize', 'cpu', 'cpu', '{task_id}', 'running', 1, {sql_text(owner)})",
        "INSERT INTO episodes (id, job_id, task_id, backend, policy, policy_config, limits, status,"
        " attempt, prompt, tools, env, n_turns, prompt_tokens, completion_tokens, gpu_seconds,"
        " best_candidate_id, final_verdict, final_reward, reward_version, speedup_vs_eager,"
        " speedup_vs_compile, device, started_at, publish)"
        f" VALUES ('{ep}', '{job}', '{task_id}', 'cpu', '{policy}', {lit(config)},"
        f" {lit({'max_turns': 200, 'max_wall_s': 3600})}, '{status}', 1, {lit(prompt)}, {lit(TOOLS)},"
        f" {lit({'gpu': 'cpu', 'torch': '2.x'})}, {len(turns)}, {4 * len(turns)}, {3 * len(turns)}, 1.5,"
        f" {sql_text(best_candidate_id)}::uuid,"
        f" {lit({'status': 'ok', 'reward': reward}) if reward is not None else 'NULL'},"
        f" {'NULL' if reward is None else reward}, 'cuda-agent-v1', 1.8, 1.2, 'cpu', now(),"
        f" {sql_text(publish)})",
    ]
    for i, t in enumerate(turns):
        cols = ", ".join(t)
        vals = ", ".join(sql_value(k, v) for k, v in t.items())
        parts.append(f"INSERT INTO turns (episode_id, idx, {cols}) VALUES ('{ep}', {i}, {vals})")
    parts.append("COMMIT")
    stack.psql(";\n".join(parts))
    if finished:
        finish(stack, ep, finished_at=finished_at)
    return ep


def finish(stack: Stack, episode_id: str, finished_at: str | None = None, hold_s: float = 0) -> None:
    """Finishes an episode as the worker does: under the export lock, export_seq drawn in the
    transaction that commits it (hold_s keeps the transaction open after the draw)."""
    at = sql_text(finished_at) + "::timestamptz" if finished_at else "now()"
    stack.psql(
        f"BEGIN; SELECT pg_advisory_xact_lock({EXPORT_LOCK});"
        f" UPDATE episodes SET status = 'finished', end_reason = 'submitted', finished_at = {at},"
        f" export_seq = nextval('episodes_export_seq') WHERE id = '{episode_id}';"
        f" SELECT pg_sleep({hold_s}); COMMIT"
    )


def messages_of(prompt_turns: list[dict[str, Any]], prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation the export must give: the prompt, then each turn's assistant message and
    its tool messages."""
    out = list(prompt)
    for t in prompt_turns:
        out.append(t["assistant"])
        out.extend(t["tool_results"])
    return out
