"""--gpu-lock: a harness waits for the GPU lock after its build and before it touches the device,
so that several workers of one GPU build side by side but time one at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kforge_harness.gpulock import GpuLock

ROOT = Path(__file__).resolve().parents[2]


def test_evaluate_waits_for_the_gpu_lock_after_building(tmp_path, kforge_cache):
    lock_path = str(tmp_path / "gpu0.lock")
    held = GpuLock(lock_path)
    held.acquire()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "workers" / "harness"), KFORGE_CACHE=str(kforge_cache))
    cmd = [sys.executable, "-m", "kforge_harness", "evaluate", "--no-jail", "--backend", "cpu"]
    cmd += ["--task", str(ROOT / "examples" / "tasks" / "gelu.py")]
    cmd += ["--candidate", str(ROOT / "examples" / "candidates" / "gelu" / "cpu")]
    cmd += ["--no-compile", "--budget", "0.2", "--progress", "--gpu-lock", lock_path]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the build happens without the lock: the "building" line comes, "verifying" does not
        assert p.stderr is not None
        first = p.stderr.readline()
        assert json.loads(first) == {"progress": "building"}
        time.sleep(3.0)
        assert p.poll() is None, "evaluate finished while another job held the GPU"
    finally:
        held.release()
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    v = json.loads(out.strip().splitlines()[-1])
    assert v["status"] == "ok", v.get("message")
    # the lock was held for 3 s from the "building" line; the build itself ran in that time
    assert v["gpu_lock_wait_s"] >= 3.0 - v["build"]["seconds"] - 0.5, (v["gpu_lock_wait_s"], v["build"])
    # held from the end of the wait to the verdict: the checks and the timing ran under it, the
    # build and the wait did not
    assert v["gpu_lock_held_s"] >= sum(c["seconds"] for c in v["checks"])
    assert time.monotonic() - t0 - v["gpu_lock_held_s"] >= 2.5
    assert '{"progress": "verifying"}' in err
