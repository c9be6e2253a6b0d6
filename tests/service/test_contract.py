"""The contract: schemathesis, with all of its checks, over every operation of openapi/openapi.yaml
against a real server, reports nothing (no failure, no error).

The run is bounded (a fixed seed, a few examples per operation, one worker: about 15 s here).
Two things make the server match what the document says of a deployment:
  - the server runs with the document's defaults for its limits, and wait_max_s=1 with the
    document's `wait` maximum set to 1 in the copy given to schemathesis (the document says
    "at most the server's wait_max_s"; a longer wait would hold each request for a verdict no
    worker gives here);
  - event streams last stream_max_s=1 (a job's stream stays open until the job ends, and no
    job ends here);
  - a heartbeat stands for a live worker of each class, so that /readyz answers 200 (its 503
    no_live_worker is checked by test_api_liveness.py; schemathesis counts any 5xx as a server
    error). No worker runs: the jobs stay queued."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from servicekit import ROOT, PgCluster, Stack

SPEC = ROOT / "openapi" / "openapi.yaml"
ST = Path(sys.executable).parent / "st"
SEED = 1
MAX_EXAMPLES = 10
# the documented defaults of the server's limits (LIMITS of servicekit are smaller)
DEFAULTS = {"max_body_bytes": 4194304, "max_files": 64, "max_file_bytes": 1048576, "max_source_bytes": 262144}


def _redis(port: int, *args: str) -> bytes:
    """One command in Redis's protocol (values may hold quotes and blanks)."""
    cmd = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(cmd.encode())
        return s.recv(256)


@pytest.fixture(scope="module")
def contract(pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(pg_cluster, tmp_path_factory.mktemp("stack-contract"), wait_max_s=1, stream_max_s=1, **DEFAULTS)
    for klass in ("cpu", "cuda"):
        beat = json.dumps({"class": klass, "gpu": None, "job": None, "pid": 0, "host": "contract"})
        assert _redis(s.redis.port, "SET", f"kforge:hb:contract-{klass}", beat, "EX", "3600") == b"+OK\r\n"
    yield s
    s.close()


def test_schemathesis_all_checks_report_nothing(contract: Stack, tmp_path: Path) -> None:
    spec = yaml.safe_load(SPEC.read_text())
    spec["components"]["schemas"]["EvaluationCreate"]["properties"]["wait"]["maximum"] = 1
    spec_copy = tmp_path / "openapi.yaml"
    spec_copy.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert contract.api.get("/readyz").status_code == 200
    cmd = [
        str(ST),
        "run",
        str(spec_copy),
        "--url",
        contract.server.url,
        "-H",
        f"Authorization: Bearer {contract.key}",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        # one worker: Python 3.11.7's ast.parse is not safe in threads (hypothesis calls it)
        "--workers",
        "1",
        "--request-timeout",
        "10",
        "--no-color",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=dict(os.environ))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-12000:]
    summary = out[out.rfind("SUMMARY") :]
    assert "Failures" not in summary and "Errors" not in summary, summary
    n_ops = sum(1 for item in spec["paths"].values() for method in item if method in ("get", "post"))
    assert f"Selected: {n_ops}/{n_ops}" in summary and f"Tested: {n_ops}" in summary, summary
    assert contract.server.alive(), contract.server.log.read_text()[-3000:]
