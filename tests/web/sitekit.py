"""The site the web UI tests browse: a real stack (PostgreSQL, Redis, kforge-server serving web/,
two cpu kforge-workers) seeded through the API with tasks in two suites, real agent episodes of two
policies (the built-in expert, and the openai policy against tests/fakellm with two model names),
an evaluation (so that a task has a baseline), and a task that its check finds unfit. The
episodes are published with their sources, so the pages read them without a key; the evaluation
and the checks stay the stack key's (a test that opens them gives the tab the key).

The jobs are enqueued while no worker runs, so that the first test can watch one of them go live
from `queued`; the workers start when a test first needs them (start_workers) or needs the
results (wait_seeded). Everything runs on the cpu backend with the smallest timing budget and no
torch.compile baseline; each judge run still costs 10 to 30 s of this machine, so the seeds are
few: the expert stops after two turns, the scripted policies write the example kernels.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from fakellm.server import Handle, start_fake_llm
from servicekit import EXAMPLES, ROOT, PgCluster, Process, Stack, candidate_files, example_task

WEB = ROOT / "web"
FAST = {"budget_s": 0.1, "no_compile": True}
WORKERS = 2
SUITE_A = "examples"
SUITE_B = "web-demo"
SEED_DEADLINE_S = 600.0

# A module the check finds unfit: its output does not depend on its input.
UNFIT_TASK = '''"""Always zeros: the check refuses it (the output does not depend on the input)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
'''


def kernel_script(task: str, compile_first: bool) -> dict[str, Any]:
    """A scripted openai policy that writes the example kernel of task (examples/candidates) and
    submits it; with compile_first, it builds it in the first turn and submits in the second."""
    files = candidate_files(EXAMPLES / "candidates" / task / "cpu")
    writes = [
        {"id": f"call_w{i}", "name": "write_file", "arguments": {"path": path, "content": text}}
        for i, (path, text) in enumerate(sorted(files.items()))
    ]
    submit = {"id": "call_s", "name": "submit", "arguments": {}}
    if not compile_first:
        return {
            "turns": [{"content": f"The {task} kernel, submitted as it is.", "tool_calls": [*writes, submit]}]
        }
    build = {"id": "call_c", "name": "compile", "arguments": {}}
    return {
        "turns": [
            {"content": f"I write the {task} kernel, then build it.", "tool_calls": [*writes, build]},
            {"content": "It builds: submitting.", "tool_calls": [submit]},
        ]
    }


def chatty_script() -> dict[str, Any]:
    """A scripted openai policy that thinks for 3 s (long enough to be seen running), looks
    around for two turns and stops: no judge, seconds."""
    return {
        "turns": [
            {
                "fault": "sleep",
                "seconds": 3,
                "then": {
                    "content": "Let me look at the workspace.",
                    "tool_calls": [{"id": "c1", "name": "glob", "arguments": {"pattern": "*"}}],
                },
            },
            {
                "content": "And the reference.",
                "tool_calls": [{"id": "c2", "name": "read_file", "arguments": {"path": "model.py"}}],
            },
            {"content": "I stop here."},
        ]
    }


class Site:
    """The seeded stack. tasks: name -> Task; jobs and episodes: label -> id."""

    def __init__(self, cluster: PgCluster, root: Path) -> None:
        self.stack = Stack(cluster, root, web_dir=str(WEB))
        self.api = self.stack.api
        self.url = self.stack.server.url
        self.workers: list[Process] = []
        self.fakes: list[Handle] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, str] = {}
        self.episodes: dict[str, str] = {}
        self._seeded = False
        self._seed()

    # ---- seeding, through the API ------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any], status: int) -> dict[str, Any]:
        r = self.api.post(path, body)
        assert r.status_code == status, (path, r.status_code, r.text)
        return r.json()

    def _task(self, name: str, suite: str, source: str | None = None) -> dict[str, Any]:
        text = source if source is not None else example_task(name)
        body = {
            "source": f"# kforge web test {uuid.uuid4()}\n{text}",
            "name": name,
            "suite": suite,
            "backend": "cpu",
        }
        task = self._post("/v1/tasks", body, 201)["task"]
        self.tasks[name] = task
        return task

    def _optimize(self, label: str, task: str, policy: dict[str, Any], **extra: Any) -> None:
        """An episode published with its sources: the leaderboard, task and episode pages show
        it to a reader without a key."""
        body = {
            "task_id": self.tasks[task]["id"],
            "backend": "cpu",
            "policy": policy,
            "options": FAST,
            "publish": "sources",
            **extra,
        }
        got = self._post("/v1/optimize", body, 202)
        self.jobs[label] = got["job"]["id"]
        self.episodes[label] = got["episode"]["id"]

    def _fake(self, script: dict[str, Any], model: str) -> dict[str, Any]:
        _, handle = start_fake_llm(script)
        self.fakes.append(handle)
        return {"name": "openai", "base_url": handle.url + "/v1", "model": model}

    def _seed(self) -> None:
        """Three tasks (one unfit), three episodes, one evaluation: about fourteen runs of the harness."""
        self._task("gelu", SUITE_A)
        self._task("silu_residual", SUITE_B)
        self._task("zeros", SUITE_B, UNFIT_TASK)
        # the first job, the one a test watches go live
        self._optimize("openai-gelu", "gelu", self._fake(kernel_script("gelu", True), "fakellm-1"))
        self._optimize("expert-gelu", "gelu", {"name": "expert"}, limits={"max_turns": 2})
        self._optimize(
            "openai-silu_residual",
            "silu_residual",
            self._fake(kernel_script("silu_residual", False), "fakellm-2"),
        )
        files = candidate_files(EXAMPLES / "candidates" / "gelu" / "cpu")
        body = {
            "task_id": self.tasks["gelu"]["id"],
            "candidate": {"format": "native", "files": files},
            "backend": "cpu",
            "options": FAST,
        }
        self.jobs["evaluate-gelu"] = self._post("/v1/evaluations", body, 202)["job"]["id"]

    # ---- the worker ----------------------------------------------------------------------------

    def start_workers(self) -> None:
        """Two cpu workers: the judge's runs wait on process starts as much as on the CPU."""
        self.workers = [w for w in self.workers if w.alive()]
        while len(self.workers) < WORKERS:
            self.workers.append(self.stack.worker())

    def stop_workers(self) -> None:
        for w in self.workers:
            w.stop(timeout=30)
        self.workers = []

    def wait_seeded(self) -> None:
        """Runs every seeded job to its end; the episodes must have earned a positive reward."""
        if self._seeded:
            return
        self.start_workers()
        for label, job_id in self.jobs.items():
            job = self.api.wait_job(job_id, deadline_s=SEED_DEADLINE_S, watch=self.workers)
            assert job["status"] == "succeeded", (label, job)
        for label, ep_id in self.episodes.items():
            ep = self.api.get(f"/v1/episodes/{ep_id}").json()
            assert (ep["result"] or {}).get("reward", -1) >= 1, (label, ep["end_reason"], ep["result"])
        task = self.api.get(f"/v1/tasks/{self.tasks['zeros']['id']}").json()
        assert task["status"] == "invalid", task
        self._seeded = True

    def queued_job(self) -> str:
        """A job that is queued while no worker runs: the first seeded one when nothing ran yet,
        else (the seeds already ran) a new short episode enqueued after them."""
        if not self.workers and not self._seeded:
            return self.jobs["openai-gelu"]
        self.wait_seeded()
        self.stop_workers()
        got = self._post(
            "/v1/optimize",
            {
                "task_id": self.tasks["gelu"]["id"],
                "backend": "cpu",
                "policy": self._fake(chatty_script(), "fakellm-1"),
                "publish": "results",
            },
            202,
        )
        return got["job"]["id"]

    # ---- reads ---------------------------------------------------------------------------------

    def get(self, path: str, **params: Any) -> Any:
        r = self.api.get(path, params=params)
        assert r.status_code == 200, (path, params, r.status_code, r.text)
        return r.json()

    def log_files(self) -> list[Path]:
        return self.stack.log_files()

    def close(self) -> None:
        for h in self.fakes:
            h.close()
        self.stack.close()
