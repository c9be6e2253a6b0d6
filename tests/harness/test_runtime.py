"""kforge_runtime, the module through which a native candidate calls its kernels: each kind of
argument reaches C as the documented type (tensor: pointer to its first element; int and bool:
int64_t; float: float; kr.f64: double), the ctypes argument types follow the Python types when
they change between calls, and every refusal (wrong device, not contiguous, unsupported type,
non-zero status) is the documented error. A small C library built here with gcc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workers" / "harness"))

import kforge_runtime as kr  # noqa: E402

SRC = r"""
#include <stdint.h>
/* out[0..3] = (a, b, c, d) as doubles; returns status */
int mix(const float *x, double *out, int64_t a, float b, double c, int64_t d, int status) {
    out[0] = (double)a + x[0];
    out[1] = (double)b;
    out[2] = c;
    out[3] = (double)d;
    return status;
}
/* the first of n int64s of p, plus k */
int64_t first_plus(const int64_t *p, int64_t k) { return p[0] + k; }
/* y[0..n-1] += v; a negative n is refused with status 5 */
int add(float *y, float v, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        y[i] += v;
    return n < 0 ? 5 : 0;
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("rt")
    (d / "k.c").write_text(SRC)
    out = d / "libk.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(d / "k.c")], check=True)
    return str(out)


def test_every_argument_kind_arrives_as_its_c_type(lib: str) -> None:
    k = kr.Kernels(lib, "cpu")
    x = torch.tensor([0.5], dtype=torch.float32)
    out = torch.zeros(4, dtype=torch.float64)
    k.mix(x, out, 2**40, 1.25, kr.f64(1.0 / 3.0), True, 0)
    assert out[0].item() == 2**40 + 0.5  # int64 intact, the pointer to x's first element
    assert out[1].item() == 1.25  # float
    assert out[2].item() == 1.0 / 3.0  # double: not rounded to float
    assert out[3].item() == 1.0  # bool as int64
    assert k.calls == 1


def test_argument_types_follow_the_call(lib: str) -> None:
    """The ctypes types are set from each call's Python types: a position that got an int in one
    call (passed as int64_t, which a float parameter misreads) takes a float in the next."""
    k = kr.Kernels(lib, "cpu")
    y = torch.zeros(3)
    k.add(y, 2.5, 3)
    k.add(torch.zeros(3), 1, 3)  # the caller's mistake; its result is not looked at
    k.add(y, 0.25, 2)  # would raise (a float for an int64_t) if the int's type had stuck
    assert y.tolist() == [2.75, 2.75, 2.5]
    assert k.calls == 3


def test_addresses_passed_as_ints_reach_the_same_memory(lib: str) -> None:
    """A replayed call (expert_replay.c) passes each tensor as its address, an int: all-int
    arguments go to ctypes as they are, reach the same memory as the tensors did, are counted,
    and a non-zero status still raises."""
    k = kr.Kernels(lib, "cpu")
    y = torch.zeros(4)
    k.add(y, 1.5, 4)
    k.add(y.data_ptr() + 4, 2.0, 2)  # from y[1]: an address and a size, no tensor
    k.add(y, 0.5, 1)  # back to a tensor in the same position
    assert y.tolist() == [2.0, 3.5, 3.5, 1.5]
    x = torch.tensor([0.5], dtype=torch.float32)
    out = torch.zeros(4, dtype=torch.float64)
    with pytest.raises(kr.KernelError, match="mix returned 7"):
        k.mix(x.data_ptr(), out.data_ptr(), 3, 0.25, kr.f64(1.0), 4, 7)
    assert out.tolist() == [3.5, 0.25, 1.0, 4.0]
    assert k.calls == 4


def test_plain_calls_keep_their_types_between_full_calls(lib: str) -> None:
    """call_plain (a replayed call: ints and floats, its types' tuple kept by the caller) reaches
    the memory and the values that __call__ does, also after a full call with tensors set other
    argument types in between, is counted, and raises on a non-zero status."""
    k = kr.Kernels(lib, "cpu")
    y = torch.zeros(4)
    types = (int, float, int)
    k.add.call_plain([y.data_ptr() + 8, 2.5, 2], types)  # y[2:] += 2.5
    k.add(torch.zeros(3), 1, 3)  # argtypes set from a tensor and an int where the float goes
    k.add.call_plain([y.data_ptr(), 0.25, 4], types)  # would raise with the int's type kept
    assert y.tolist() == [0.25, 0.25, 2.75, 2.75]
    with pytest.raises(kr.KernelError, match="add returned 5"):
        k.add.call_plain([y.data_ptr(), 1.0, -1], types)
    assert y.tolist() == [0.25, 0.25, 2.75, 2.75]
    assert k.calls == 4


def test_a_parameter_and_a_view_at_an_offset_pass_their_first_element(lib: str) -> None:
    k = kr.Kernels(lib, "cpu")
    p = torch.nn.Parameter(torch.tensor([10, 20, 30], dtype=torch.int64), requires_grad=False)
    out = torch.zeros(4, dtype=torch.float64)
    x = torch.tensor([0.0, 7.0], dtype=torch.float32)[1:]
    k.mix(x, out, 1, 0.0, kr.f64(0.0), 0, 0)
    assert out[0].item() == 8.0
    y = torch.zeros(4)
    k.add(y[2:], 1.0, 2)
    assert y.tolist() == [0.0, 0.0, 1.0, 1.0]
    assert p.is_contiguous()


def test_refusals_are_the_documented_errors(lib: str) -> None:
    k = kr.Kernels(lib, "cpu")
    with pytest.raises(ValueError, match="argument 0 is not contiguous"):
        k.add(torch.zeros(4, 4).t(), 1.0, 16)
    with pytest.raises(ValueError, match="argument 0 is on meta, expected cpu"):
        k.add(torch.zeros(4, device="meta"), 1.0, 4)
    with pytest.raises(TypeError, match="argument 1 has unsupported type str"):
        k.add(torch.zeros(4), "1.0", 4)
    y = torch.zeros(2)
    k.add(y, 1.0, 2)  # still usable after the refusals
    assert y.tolist() == [1.0, 1.0]
    out = torch.zeros(4, dtype=torch.float64)
    with pytest.raises(kr.KernelError, match="mix returned 7"):
        k.mix(torch.zeros(1), out, 0, 0.0, kr.f64(0.0), 0, 7)
    with pytest.raises(AttributeError, match="exports no function 'nope'"):
        k.nope()


def test_a_cuda_backend_refuses_host_tensors(lib: str) -> None:
    k = kr.Kernels(lib, "cuda")
    with pytest.raises(ValueError, match="argument 0 is on cpu, expected cuda"):
        k.add(torch.zeros(2), 1.0, 2)
    assert k.calls == 0
