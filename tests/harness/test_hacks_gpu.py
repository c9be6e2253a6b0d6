"""GPU versions of the hacks whose mechanism is CUDA's own: side streams, stale device memory, TF32 and
half precision on an fp32 task, and cuBLAS/cuDNN reached through PyTorch. Run on a GPU host only.

Same protocol as test_hacks.py: the real CLI in a subprocess, ``--backend cuda``, and a precise verdict.
"""

from __future__ import annotations

import pytest
from test_hacks import brief, evaluate_backend

# skipped without a CUDA GPU by tests/conftest.py
pytestmark = pytest.mark.gpu

CUDA = ["--backend", "cuda", "--no-compile", "--budget", "0.5"]


@pytest.fixture(scope="module")
def cache(kforge_cache):
    return kforge_cache


def evaluate(cache, task, candidate):
    return evaluate_backend(cache, task, candidate, CUDA)


@pytest.mark.parametrize(
    "task,candidate",
    [("cuda_relu2.py", "cuda_honest_relu2"), ("cuda_matmul.py", "cuda_honest_matmul")],
    ids=["relu2", "matmul"],
)
def test_honest_cuda_candidate_passes_unflagged(cache, task, candidate):
    v = evaluate(cache, task, candidate)
    assert v["status"] == "ok" and v["flags"] == [] and v["reward"] >= 1, brief(v)
    assert v["timing"]["method"] == "judge_window", brief(v)


def test_side_stream_escapes_the_events(cache):
    # Correct outputs (the runner synchronises the whole device before reading them), but the kernel runs on
    # a non-blocking stream that the timing events, recorded on the default stream, never wait for.
    v = evaluate(cache, "cuda_relu2.py", "cuda_side_stream")
    assert v["status"] == "rejected" and v["reward"] == -1, brief(v)
    assert "escaped_timer" in v["flags"], brief(v)


def test_stale_device_memory_is_incorrect(cache):
    v = evaluate(cache, "cuda_relu2.py", "cuda_stale")
    assert v["status"] == "incorrect" and v["reward"] == -1, brief(v)


@pytest.mark.parametrize(
    "task,candidate",
    [("cuda_matmul.py", "cuda_tf32_matmul"), ("cuda_relu2.py", "cuda_half_relu2")],
    ids=["tf32_cublas", "fp16_kernel"],
)
def test_lower_precision_is_incorrect_and_flagged(cache, task, candidate):
    v = evaluate(cache, task, candidate)
    assert v["status"] == "incorrect" and v["reward"] == -1, brief(v)
    assert "precision_loss" in v["flags"], brief(v)


@pytest.mark.parametrize(
    "task,candidate",
    [("cuda_matmul.py", "cuda_vendor_matmul"), ("cuda_conv.py", "cuda_vendor_conv")],
    ids=["torch_matmul", "F_conv2d"],
)
def test_vendor_library_through_pytorch_is_rejected(cache, task, candidate):
    v = evaluate(cache, task, candidate)
    assert v["status"] == "rejected" and v["reward"] == -1, brief(v)
    assert "torch_compute" in v["flags"], brief(v)
