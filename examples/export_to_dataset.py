#!/usr/bin/env python3
"""Pull finished kforge episodes from GET /v1/export into a JSONL dataset for a trainer.

Standard library only. It pages through /v1/export with the cursor (gzip on), checks that every
page ended with its trailer line, and writes one JSON object per line:

  --format sft   chat records {"messages": [...], "tools": [...]}: OpenAI-format messages (the
                 system prompt, the task, then each assistant turn with its tool calls and the
                 tool results) and the tool definitions. TRL's SFTTrainer reads this as a
                 conversational language-modeling dataset (a "messages" column; a "tools" column
                 is passed to the chat template); verl's multi-turn SFT reads the same columns
                 (data.multiturn.enable=true, messages_key=messages, tools_key=tools) once the
                 JSONL is converted to parquet.
  --format rft   the same records, of rejection-fine-tuning episodes only (rft=true: a positive
                 final reward, no malformed turn, no two consecutive turns with the same calls).
  --format ppo   one record per turn that has token ids: {"episode_id", "task_id", "turn",
                 "prompt_token_ids", "completion_token_ids", "logprobs" (one float per
                 completion token, or null), "turn_rewards" (the reward components of the
                 turn's verify/profile/submit calls), "reward" (the episode's final reward,
                 given at its last turn, 0 before), "final_reward", "done"}: what a value model
                 or PPO needs, with the policy's own token ids so nothing is re-tokenized.

Many chat templates (Qwen, Llama) want tool_call arguments as objects while the OpenAI format
sends them as JSON strings: --arguments-as-objects decodes them.

Incremental pulls: --state FILE reads the cursor to start from (when the file exists) and writes
the resume cursor at the end, so the next run gets only episodes that finished since. Records
are appended to --out then (never rewritten).

Examples:
  python examples/export_to_dataset.py --url http://127.0.0.1:8080 --key "$(cat var/api-key)" \
      --format sft --out sft.jsonl
  python examples/export_to_dataset.py --format rft --min-reward 2 --out rft.jsonl
  python examples/export_to_dataset.py --format ppo --policy openai --state ppo.cursor --out ppo.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any, TextIO


def fetch_page(
    base: str, params: dict[str, str], key: str | None, timeout: float
) -> Iterator[dict[str, Any]]:
    """The lines of one page of /v1/export, parsed, trailer included."""
    url = base.rstrip("/") + "/v1/export?" + urllib.parse.urlencode(params)
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        body = e.read()
        if e.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        raise SystemExit(f"export: HTTP {e.code}: {body.decode('utf-8', 'replace')[:500]}") from e
    with resp:
        stream = gzip.GzipFile(fileobj=resp) if resp.headers.get("Content-Encoding") == "gzip" else resp
        for raw in stream:
            if raw.strip():
                yield json.loads(raw)


def pages(
    base: str, query: dict[str, str], cursor: str | None, key: str | None, timeout: float
) -> Iterator[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """(records, trailer) of each page, from cursor until the export is caught up."""
    while True:
        params = dict(query)
        if cursor:
            params["cursor"] = cursor
        records: list[dict[str, Any]] = []
        trailer: dict[str, Any] | None = None
        for line in fetch_page(base, params, key, timeout):
            if trailer is not None:
                raise SystemExit("export: a line came after the page's trailer")
            if "error" in line and len(line) == 1:
                raise SystemExit(f"export: cut short by the server: {line['error']}")
            if "next_cursor" in line:
                trailer = line
            else:
                records.append(line)
        if trailer is None:
            raise SystemExit("export: a page ended without its trailer line (connection lost?)")
        if trailer.get("count") != len(records):
            raise SystemExit(f"export: the trailer counts {trailer.get('count')} records, got {len(records)}")
        yield records, trailer
        cursor = trailer["next_cursor"]
        if cursor is None:
            return


def decode_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages whose tool_calls carry arguments as objects (left as text when not JSON)."""
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if calls:
            m = dict(m)
            m["tool_calls"] = []
            for c in calls:
                fn = dict(c.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except json.JSONDecodeError:
                        pass
                m["tool_calls"].append({**c, "function": fn})
        out.append(m)
    return out


def token_logprobs(logprobs: Any) -> list[float] | None:
    """One float per completion token from an OpenAI/vLLM choices[0].logprobs object."""
    if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
        return [float(t["logprob"]) for t in logprobs["content"]]
    if isinstance(logprobs, dict) and isinstance(logprobs.get("token_logprobs"), list):
        return [float(x) for x in logprobs["token_logprobs"]]
    return None


def ppo_records(traj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    turns = [t for t in traj["turns"] if t.get("prompt_token_ids") and t.get("completion_token_ids")]
    final = traj["final"]["reward"]
    for i, t in enumerate(turns):
        last = i == len(turns) - 1
        yield {
            "episode_id": traj["episode_id"],
            "task_id": traj["task"]["id"],
            "turn": t["idx"],
            "prompt_token_ids": t["prompt_token_ids"],
            "completion_token_ids": t["completion_token_ids"],
            "logprobs": token_logprobs(t.get("logprobs")),
            "turn_rewards": t["rewards"],
            "reward": (final or 0) if last else 0,
            "final_reward": final,
            "done": last,
        }


def write(args: argparse.Namespace, out: TextIO) -> tuple[int, int, str | None]:
    """Pulls and writes; returns (episodes, lines written, resume cursor)."""
    query: dict[str, str] = {"limit": str(args.page_size)}
    query["format"] = "trajectory" if args.format == "ppo" else "sft"
    if args.format == "rft":
        query["rft"] = "true"
    for name in ("since", "until", "task_id", "policy", "min_reward"):
        value = getattr(args, name)
        if value is not None:
            query[name] = str(value)
    cursor = args.cursor
    if args.state and os.path.exists(args.state):
        cursor = open(args.state, encoding="utf-8").read().strip() or None
    episodes = lines = 0
    resume = cursor
    for records, trailer in pages(args.url, query, cursor, args.key, args.timeout):
        for rec in records:
            episodes += 1
            if args.format == "ppo":
                rows = list(ppo_records(rec))
            else:
                rows = [{"messages": rec["messages"], "tools": rec["tools"]}]
                if args.arguments_as_objects:
                    rows[0]["messages"] = decode_arguments(rows[0]["messages"])
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                lines += 1
        resume = trailer.get("resume_cursor") or resume
    return episodes, lines, resume


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--url", default=os.environ.get("KFORGE_URL", "http://127.0.0.1:8080"), help="the server (KFORGE_URL)"
    )
    ap.add_argument(
        "--key",
        default=os.environ.get("KFORGE_API_KEY"),
        help="an API key: the export is its owner's episodes (an admin key's: all) (KFORGE_API_KEY)",
    )
    ap.add_argument("--format", required=True, choices=("sft", "rft", "ppo"), help="the dataset to write")
    ap.add_argument("--out", required=True, help="the JSONL file to write ('-': stdout)")
    ap.add_argument("--since", help="finished at or after this RFC 3339 time")
    ap.add_argument("--until", help="finished before this RFC 3339 time")
    ap.add_argument("--task-id", dest="task_id", help="only this task's episodes")
    ap.add_argument("--policy", choices=("openai", "expert"), help="only this policy's episodes")
    ap.add_argument(
        "--min-reward", dest="min_reward", type=int, help="only episodes with final reward >= this"
    )
    ap.add_argument("--cursor", help="start after this cursor (a trailer's resume_cursor)")
    ap.add_argument("--state", help="read the start cursor from this file and write the resume cursor to it")
    ap.add_argument("--page-size", type=int, default=100, help="episodes per request, 1..1000 (default 100)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per request")
    ap.add_argument(
        "--arguments-as-objects",
        action="store_true",
        help="decode tool_call arguments (JSON strings) into objects",
    )
    args = ap.parse_args(argv)
    if not 1 <= args.page_size <= 1000:
        ap.error("--page-size must be from 1 to 1000")
    mode = "a" if args.state else "w"
    out = sys.stdout if args.out == "-" else open(args.out, mode, encoding="utf-8")
    try:
        episodes, lines, resume = write(args, out)
    finally:
        if out is not sys.stdout:
            out.close()
    if args.state and resume:
        with open(args.state, "w", encoding="utf-8") as f:
            f.write(resume + "\n")
    print(f"export_to_dataset: {episodes} episodes, {lines} lines, resume cursor {resume}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
