"""The built-in expert policy (first version: fused elementwise chains) through the whole
service on the cpu backend: it profiles, writes a kernel in variants, compiles, verifies and
profiles each, submits the fastest correct one; what it cannot handle ends `unsupported`,
naming the operator."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from servicekit import Stack, example_task

FAST = {"budget_s": 0.2, "no_compile": True}


def run_expert(stack: Stack, workers, name: str, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": {"name": name, "source": f"# {uuid.uuid4()}\n" + example_task(name)},
        "backend": "cpu",
        "options": FAST,
    }
    if policy is not None:
        body["policy"] = policy
    r = stack.api.post("/v1/optimize", body)
    assert r.status_code == 202, r.text
    w = workers()
    job = stack.api.wait_job(r.json()["job"]["id"], deadline_s=900, watch=[w])
    assert job["status"] == "succeeded", job
    ep = stack.api.get(f"/v1/episodes/{r.json()['episode']['id']}").json()
    return ep


def calls(ep: dict[str, Any]) -> list[list[str]]:
    return [[c["function"]["name"] for c in t["assistant"].get("tool_calls", [])] for t in ep["turns"]]


@pytest.mark.parametrize("name", ["silu_residual", "gelu"])
def test_expert_fuses_an_elementwise_chain(stack: Stack, workers, name: str) -> None:
    ep = run_expert(stack, workers, name, None if name == "gelu" else {"name": "expert"})
    assert ep["policy"]["name"] == "expert"  # the default policy when none is given
    assert ep["end_reason"] == "submitted", (ep["end_reason"], ep.get("result"))
    assert calls(ep) == [
        ["profile"],
        ["write_file", "write_file", "compile", "verify", "profile"],
        ["write_file", "compile", "verify", "profile"],
        ["write_file", "submit"],
    ]
    assert not any(t["malformed"] for t in ep["turns"])
    # every verify and profile of both variants found the kernel correct
    comps = [c for t in ep["turns"] for c in t["rewards"]]
    assert [c["tool"] for c in comps] == ["verify", "profile", "verify", "profile", "submit"]
    assert all(c["status"] == "ok" and c["correct"] for c in comps), comps
    res = ep["result"]
    assert res["verdict"]["status"] == "ok" and res["reward"] >= 1 and res["speedup_vs_eager"] > 0
    # the kernel it wrote: one fused pass, no PyTorch compute in model_new.py
    cand = stack.api.get(f"/v1/candidates/{ep['best_candidate_id']}").json()
    assert set(cand["files"]) == {"model_new.py", "kernels/kf_expert_ew.cpp"}
    assert "#pragma omp" in cand["files"]["kernels/kf_expert_ew.cpp"]
    assert "kf_expert_ew(" in cand["files"]["model_new.py"]


def test_expert_names_what_it_cannot_do(stack: Stack, workers) -> None:
    ep = run_expert(stack, workers, "matmul", {"name": "expert"})
    assert ep["end_reason"] == "unsupported", ep["end_reason"]
    assert calls(ep) == [["profile"]]  # it looked, then said why it stops
    r = stack.api.get(f"/v1/jobs/{ep['job_id']}").json()
    assert r["result"]["end_reason"] == "unsupported"
    assert "matmul" in json.dumps(r["result"]["end_detail"]), r["result"]
    assert ep["result"]["reward"] == -1


BIAS_TASK = '''"""relu(x + b) * 0.5 with a bias row b broadcast over the rows of x."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, b):
        return torch.relu(x + b) * 0.5


def get_inputs():
    return [torch.randn(2048, 1024), torch.randn(1024)]


def get_test_inputs():
    return [[torch.randn(300, 77), torch.randn(77)], [torch.randn(2, 3, 40, 64), torch.randn(64)]]


def get_init_inputs():
    return []
'''


def test_expert_broadcasts_a_bias_row(stack: Stack, workers) -> None:
    body = {
        "task": {"name": "bias_relu", "source": f"# {uuid.uuid4()}\n" + BIAS_TASK},
        "backend": "cpu",
        "options": FAST,
    }
    r = stack.api.post("/v1/optimize", body)
    assert r.status_code == 202, r.text
    w = workers()
    job = stack.api.wait_job(r.json()["job"]["id"], deadline_s=900, watch=[w])
    ep = stack.api.get(f"/v1/episodes/{r.json()['episode']['id']}").json()
    assert job["status"] == "succeeded" and ep["end_reason"] == "submitted", (ep["end_reason"], job)
    comps = [c for t in ep["turns"] for c in t["rewards"]]
    assert all(c["status"] == "ok" and c["correct"] for c in comps), comps
    assert ep["result"]["verdict"]["status"] == "ok" and ep["result"]["reward"] >= 1
    # correct on the judge's other shapes too: the strides come from the tensors at every call
    checks = ep["result"]["verdict"]["checks"]
    assert {"shape:0", "shape:1"} <= {c["kind"] for c in checks}  # 2D and 4D other shapes
    assert all(c["pass"] is not False for c in checks), checks
    cand = stack.api.get(f"/v1/candidates/{ep['best_candidate_id']}").json()
    assert "x.expand(shape).stride()" in cand["files"]["model_new.py"]
