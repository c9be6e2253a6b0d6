"""GET /v1/episodes/{id} (with turns, without, after=N), GET /v1/candidates/{id} and its tar
download, and server/tar.c on its own (compiled with a small driver, read back by Python's
tarfile and GNU tar). Episodes, turns and candidates are seeded by SQL (episodekit.py)."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest
from episodekit import add_candidate, add_episode, call, default_turns, new_task, turn
from servicekit import ROOT, Stack, assert_error

EPISODE_KEYS = {
    "id", "job_id", "task_id", "task_name", "backend", "status", "end_reason", "end_detail", "policy",
    "limits", "attempt",
    "n_turns", "tokens", "gpu_seconds", "env", "best_candidate_id", "result", "publish", "created_at",
    "started_at", "finished_at",
}  # fmt: skip
TURN_KEYS = {
    "idx", "assistant", "tool_results", "finish_reason", "rewards", "malformed", "prompt_tokens",
    "completion_tokens", "policy_ms", "tools_ms", "overhead_ms", "created_at",
}  # fmt: skip


def test_episode_with_turns(stack: Stack) -> None:
    task = new_task(stack)
    cand = add_candidate(stack, task, {"model_new.py": "class ModelNew: ...\n"})
    turns = default_turns()
    ep = add_episode(stack, task, turns, best_candidate_id=cand, policy="openai")
    r = stack.api.get(f"/v1/episodes/{ep}")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    e = r.json()
    assert set(e) == EPISODE_KEYS | {"turns"}, set(e) ^ (EPISODE_KEYS | {"turns"})
    assert e["id"] == ep and e["task_id"] == task and e["backend"] == "cpu"
    assert e["status"] == "finished" and e["end_reason"] == "submitted" and e["attempt"] == 1
    assert e["policy"] == {"name": "openai", "model": "m", "sampling": {"temperature": 0.7}}
    assert e["limits"] == {"max_turns": 200, "max_wall_s": 3600}
    assert e["n_turns"] == 3 and e["tokens"] == {"prompt": 12, "completion": 9}
    assert e["gpu_seconds"] == 1.5 and e["env"] == {"gpu": "cpu", "torch": "2.x"}
    assert e["best_candidate_id"] == cand
    assert e["result"] == {
        "reward": 3,
        "reward_version": "cuda-agent-v1",
        "speedup_vs_eager": 1.8,
        "speedup_vs_compile": 1.2,
        "device": "cpu",
        "verdict": {"status": "ok", "reward": 3},
    }
    for key in ("created_at", "started_at", "finished_at"):
        assert e[key].endswith("Z") and "T" in e[key], e[key]
    assert [t["idx"] for t in e["turns"]] == [0, 1, 2]
    for got, want in zip(e["turns"], turns):
        assert set(got) == TURN_KEYS, set(got) ^ TURN_KEYS
        assert got["assistant"] == want["assistant"] and got["tool_results"] == want["tool_results"]
        assert got["rewards"] == want["rewards"] and got["finish_reason"] == want["finish_reason"]
        assert got["policy_ms"] == 12.5 and got["tools_ms"] == 30.0 and got["overhead_ms"] == 1.25
        assert got["prompt_tokens"] == 4 and got["completion_tokens"] == 3 and got["malformed"] is False


def test_episode_without_turns_and_after(stack: Stack) -> None:
    task = new_task(stack)
    ep = add_episode(stack, task, finished=False, reward=None)
    r = stack.api.get(f"/v1/episodes/{ep}?turns=false")
    assert r.status_code == 200, r.text
    e = r.json()
    assert set(e) == EPISODE_KEYS, "turns=false leaves the turns out"
    assert e["status"] == "running" and e["result"] is None and e["finished_at"] is None

    for after, idxs in (("-1", [0, 1, 2]), ("0", [1, 2]), ("1", [2]), ("2", []), ("99", [])):
        r = stack.api.get(f"/v1/episodes/{ep}?after={after}")
        assert r.status_code == 200, r.text
        assert [t["idx"] for t in r.json()["turns"]] == idxs, after
    r = stack.api.get(f"/v1/episodes/{ep}?turns=true&after=1")
    assert [t["idx"] for t in r.json()["turns"]] == [2]


def test_episode_with_no_turns_yet(stack: Stack) -> None:
    ep = add_episode(stack, new_task(stack), [], finished=False, reward=None, status="queued")
    e = stack.api.get(f"/v1/episodes/{ep}").json()
    assert e["turns"] == [] and e["n_turns"] == 0 and e["best_candidate_id"] is None


def test_episode_errors(stack: Stack) -> None:
    r = stack.api.get(f"/v1/episodes/{uuid.uuid4()}")
    assert_error(r, "episode_not_found")
    assert_error(stack.api.get("/v1/episodes/not-a-uuid"), "invalid_id")
    ep = add_episode(stack, new_task(stack), finished=False)
    for query, field in (("turns=yes", "turns"), ("after=x", "after"), ("after=-2", "after")):
        err = assert_error(stack.api.get(f"/v1/episodes/{ep}?{query}"), "invalid_query")
        assert err["field"] == field
    assert_error(stack.api.post(f"/v1/episodes/{ep}", {}), "method_not_allowed")


FILES = {
    "model_new.py": "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n",
    "kernels/add.cu": "__global__ void add() {}\n" * 40,
    "kernels/deep/er/x.cpp": "",
    "README": "x" * 512,
    "a" * 120 + ".txt": "a long name",
    "d" * 60 + "/" + "e" * 90 + ".cu": "split by ustar's prefix",
}


def test_candidate_json(stack: Stack) -> None:
    task = new_task(stack)
    cid = add_candidate(stack, task, FILES, fmt="cuda-agent")
    r = stack.api.get(f"/v1/candidates/{cid}")
    assert r.status_code == 200, r.text
    c = r.json()
    assert set(c) == {"id", "task_id", "format", "sha256", "files", "created_at"}
    assert c["id"] == cid and c["task_id"] == task and c["format"] == "cuda-agent"
    assert c["files"] == FILES and c["created_at"] == "2026-03-04T05:06:07.000000Z"
    assert_error(stack.api.get(f"/v1/candidates/{uuid.uuid4()}"), "candidate_not_found")
    assert_error(stack.api.get("/v1/candidates/1234"), "invalid_id")


def test_candidate_download(stack: Stack) -> None:
    cid = add_candidate(stack, new_task(stack), FILES)
    r = stack.api.get(f"/v1/candidates/{cid}/download")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/x-tar"
    assert r.headers["Content-Disposition"] == f'attachment; filename="kforge-candidate-{cid[:8]}.tar"'
    assert len(r.content) % 512 == 0
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:") as tar:
        members = tar.getmembers()
        files = {m.name: tar.extractfile(m).read().decode() for m in members if m.isfile()}
        dirs = {m.name for m in members if m.isdir()}
        assert all(m.isfile() or m.isdir() for m in members)
        assert all(m.mtime == 1772600767 for m in members)  # 2026-03-04T05:06:07Z
        assert all(m.mode == (0o644 if m.isfile() else 0o755) for m in members)
    assert files == {"candidate/" + k: v for k, v in FILES.items()}
    assert dirs == {
        "candidate",
        "candidate/kernels",
        "candidate/kernels/deep",
        "candidate/kernels/deep/er",
        "candidate/" + "d" * 60,
    }
    names = [m.name for m in members]
    assert names.index("candidate/kernels") < names.index("candidate/kernels/add.cu")
    assert_error(stack.api.get(f"/v1/candidates/{uuid.uuid4()}/download"), "candidate_not_found")


def test_reads_need_a_key_when_public_reads_is_off(stack: Stack) -> None:
    ep = add_episode(stack, new_task(stack), [turn([call("bash", {"command": "ls"})])])
    private = stack.start_server(public_reads=False)
    for path in (f"/v1/episodes/{ep}", "/v1/export?limit=1"):
        assert_error(stack.api.s.get(private.url + path, timeout=10), "unauthorized")
        ok = stack.api.s.get(private.url + path, headers={"Authorization": f"Bearer {stack.key}"}, timeout=10)
        assert ok.status_code == 200, ok.text
    private.stop()


# ---- server/tar.c on its own ----------------------------------------------------------------

DRIVER = r"""
#include <stdio.h>
#include <string.h>
#include "tar.h"

int main(void) {
    struct kf_buf out = {0};
    static char big[70000], name[300], longname[300];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
    memset(name, 'n', 100); name[100] = '\0';              /* exactly 100: no prefix */
    memset(longname, 'p', 255); longname[255] = '\0';      /* one long part: pax */
    char split[300];
    snprintf(split, sizeof split, "%0150d/%s", 0, "f.txt"); /* prefix 150 + name */
    int rc = kf_tar_add_dir(&out, "top", 1700000000)
          || kf_tar_add_file(&out, "top/empty", "", 0, 1700000000)
          || kf_tar_add_file(&out, "top/block", big, 512, 1700000001)
          || kf_tar_add_file(&out, "top/block1", big, 513, 1700000002)
          || kf_tar_add_file(&out, "top/big", big, sizeof big, 1700000003)
          || kf_tar_add_file(&out, name, "hundred", 7, 0)
          || kf_tar_add_file(&out, longname, "pax", 3, 0)
          || kf_tar_add_file(&out, split, "split", 5, 0)
          || kf_tar_add_dir(&out, "top/sub/", 0)
          || kf_tar_add_file(&out, "", "x", 1, 0) == 0  /* refused */
          || kf_tar_finish(&out);
    if (rc) return 1;
    fwrite(out.data, 1, out.len, stdout);
    kf_buf_free(&out);
    return 0;
}
"""


@pytest.fixture(scope="module")
def tar_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    d = tmp_path_factory.mktemp("tar")
    (d / "driver.c").write_text(DRIVER)
    exe = d / "driver"
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-fsanitize=address,undefined"]
    subprocess.run(
        [cc, *flags, f"-I{ROOT / 'server'}", f"-I{ROOT / 'lib'}", str(d / "driver.c"),
         str(ROOT / "server" / "tar.c"), str(ROOT / "lib" / "buf.c"), "-o", str(exe)],
        check=True, capture_output=True,
    )  # fmt: skip
    p = subprocess.run([str(exe)], capture_output=True, check=True)
    return p.stdout


def test_tar_writer_read_by_tarfile(tar_bytes: bytes) -> None:
    big = bytes(ord("a") + i % 26 for i in range(70000))
    want = {
        "top/empty": b"",
        "top/block": big[:512],
        "top/block1": big[:513],
        "top/big": big,
        "n" * 100: b"hundred",
        "p" * 255: b"pax",
        "0" * 150 + "/f.txt": b"split",
    }
    assert len(tar_bytes) % 512 == 0 and tar_bytes[-1024:] == bytes(1024)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
        members = tar.getmembers()
        got = {m.name: tar.extractfile(m).read() for m in members if m.isfile()}
        assert {m.name for m in members if m.isdir()} == {"top", "top/sub"}
        assert {m.name: m.mtime for m in members}["top/big"] == 1700000003
        assert all(m.uid == 0 and m.gid == 0 and m.uname == "kforge" for m in members)
    assert got == want


def test_tar_writer_read_by_gnu_tar(tar_bytes: bytes, tmp_path: Path) -> None:
    if not shutil.which("tar"):
        pytest.skip("no tar program")
    (tmp_path / "a.tar").write_bytes(tar_bytes)
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["tar", "-xf", str(tmp_path / "a.tar"), "-C", str(out)], check=True, capture_output=True)
    assert (out / "top" / "block1").read_bytes() == bytes(ord("a") + i % 26 for i in range(513))
    assert (out / ("p" * 255)).read_bytes() == b"pax"
    assert (out / ("0" * 150) / "f.txt").read_bytes() == b"split"
    assert (out / "top" / "sub").is_dir() and (out / "top" / "empty").read_bytes() == b""
