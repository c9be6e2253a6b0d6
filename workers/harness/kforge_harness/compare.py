"""Comparing a candidate's outputs with the reference's, with tolerances per dtype."""

from __future__ import annotations

from typing import Any

import torch

# (atol, rtol) per dtype; strict mode divides both by 10. fp32 is tight enough that TF32 or
# half-precision arithmetic on an fp32 task fails it.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}
# An output that fails the tolerance but whose relative L2 error ||out - ref|| / ||ref|| is under
# this suggests lower precision (TF32 lands near 1e-3, fp16 near 1e-3, bf16 near 1e-2) rather
# than a wrong computation.
NEAR_MISS_L2 = 3e-2
# A float32 output can miss the tolerance however it is computed: where the terms of a sum
# cancel (a matmul's outputs summed over 4096 features), the reference's own rounding error is
# far above atol, and only the reference's order of operations lands within it. For a near
# miss the judge then computes the reference in float64 as well (conditioned()); the candidate
# passes when it is within the tolerance of the float64 values widened by this many times the
# float32 reference's own largest error: as accurate as float32 arithmetic allows there, in any
# order of operations. TF32 or half-precision arithmetic lands thousands of times past that.
REF_ERROR_FACTOR = 4.0


def flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        for v in value:
            out.extend(flatten(v))
        return out
    return [value]


def tolerance_for(dtype: torch.dtype, override: dict[str, float] | None, strict: bool) -> tuple[float, float]:
    if override:
        atol, rtol = override["atol"], override["rtol"]
    else:
        atol, rtol = TOLERANCES.get(dtype, (0.0, 0.0))
    if strict:
        atol, rtol = atol / 10, rtol / 10
    return atol, rtol


def _close(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> tuple[bool, float, float]:
    """Elementwise |out - ref| <= atol + rtol*|ref| where ref is finite; NaN and infinities
    must match exactly. Returns (ok, max abs error, max relative error) over finite elements."""
    if ref.numel() == 0:
        return True, 0.0, 0.0
    if bool(torch.isfinite(ref).all()) and bool(torch.isfinite(out).all()):
        # the common case, in far fewer passes over the tensors (large outputs dominate a
        # check): in float32 for floats of 32 bits or fewer (a difference of two float32 values
        # is exact to 2^-24 of their size, far below any tolerance), in float64 otherwise
        wide = torch.float64 if ref.dtype in (torch.float64, torch.int64, torch.int32) else torch.float32
        r = ref.detach().to(wide)
        o = out.detach().to(r.device, wide)
        diff = (o - r).abs_()
        scale = r.abs()
        ok = bool((diff <= scale * rtol + atol).all())
        return ok, float(diff.max()), float((diff / scale.clamp_min_(1e-30)).max())
    r = ref.detach().to(torch.float64)
    o = out.detach().to(r.device, torch.float64)
    finite = torch.isfinite(r)
    special_ok = bool((torch.isnan(o) == torch.isnan(r)).all()) and bool(
        (torch.where(finite, torch.zeros_like(o), o) == torch.where(finite, torch.zeros_like(r), r))[
            ~torch.isnan(r)
        ].all()
    )
    diff = torch.where(finite, (o - r).abs(), torch.zeros_like(o))
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    bound = torch.where(finite, atol + rtol * r.abs(), torch.zeros_like(r))
    ok = special_ok and bool((diff <= bound).all())
    max_abs = float(diff.max())
    rel = torch.where(finite, diff / r.abs().clamp_min(1e-30), torch.zeros_like(diff))
    max_rel = float(rel.max())
    return ok, max_abs, max_rel


def _relative_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    r = ref.detach().to(torch.float64)
    o = out.detach().to(r.device, torch.float64)
    finite = torch.isfinite(r) & torch.isfinite(o)
    if not bool(finite.all()):
        return float("inf")
    denom = float(torch.linalg.vector_norm(r))
    err = float(torch.linalg.vector_norm(o - r))
    return err / denom if denom > 0 else (0.0 if err == 0 else float("inf"))


def compare(
    outputs: Any,
    reference: Any,
    override: dict[str, float] | None = None,
    strict: bool = False,
    slack: list[float] | None = None,
) -> dict[str, Any]:
    """Checks structure, type, shape, dtype and values. Returns a check record (``pass`` etc.).
    ``slack``: added to each output's atol, in order (a near miss's, from ``conditioned``)."""
    outs, refs = flatten(outputs), flatten(reference)
    rec: dict[str, Any] = {"pass": False, "max_abs_err": None, "max_rel_err": None}
    if len(outs) != len(refs):
        rec["reason"] = f"expected {len(refs)} outputs, got {len(outs)}"
        return rec
    max_abs = max_rel = 0.0
    loose_ok = True
    for i, (o, r) in enumerate(zip(outs, refs)):
        if not isinstance(r, torch.Tensor):
            if o != r:
                rec["reason"] = f"output {i}: expected {r!r}, got {o!r}"
                return rec
            continue
        if not isinstance(o, torch.Tensor):
            rec["reason"] = f"output {i} is not a tensor"
            return rec
        if tuple(o.shape) != tuple(r.shape):
            rec["reason"] = f"output {i}: shape {list(o.shape)}, expected {list(r.shape)}"
            return rec
        if o.dtype != r.dtype:
            rec["reason"] = f"output {i}: dtype {o.dtype}, expected {r.dtype}"
            return rec
        if r.dtype.is_floating_point:
            atol, rtol = tolerance_for(r.dtype, override, strict)
            if slack and i < len(slack):
                atol += slack[i]
        else:
            atol, rtol = 0.0, 0.0
        ok, a, rl = _close(o, r, atol, rtol)
        max_abs, max_rel = max(max_abs, a), max(max_rel, rl)
        if not ok:
            rec.update(max_abs_err=max_abs, max_rel_err=max_rel, atol=atol, rtol=rtol)
            rec["reason"] = f"output {i}: values differ beyond atol={atol:g} rtol={rtol:g}"
            loose_ok = loose_ok and r.dtype.is_floating_point and _relative_l2(o, r) <= NEAR_MISS_L2
            rec["near_miss"] = loose_ok
            return rec
    rec.update({"pass": True, "max_abs_err": max_abs, "max_rel_err": max_rel})
    return rec


def conditioned(
    outputs: Any, ref32: Any, ref64: Any, override: dict[str, float] | None, strict: bool
) -> dict[str, Any]:
    """The check of a near miss against the float64 reference ``ref64`` (see REF_ERROR_FACTOR):
    each floating output within its tolerance of ref64 plus its slack, REF_ERROR_FACTOR times
    the largest |ref32 - ref64| over its finite elements; every other output exactly equal to
    ref32's. The record's ``slack`` lists the slack of each output (0 where exact)."""
    outs, r32s, r64s = flatten(outputs), flatten(ref32), flatten(ref64)
    rec: dict[str, Any] = {"pass": False, "slack": [], "max_abs_err": 0.0}
    if not len(outs) == len(r32s) == len(r64s):
        rec["reason"] = "the float64 reference has another structure"
        return rec
    for i, (o, a, b) in enumerate(zip(outs, r32s, r64s)):
        if not isinstance(a, torch.Tensor):
            ok = o == a
        elif not (isinstance(o, torch.Tensor) and o.shape == a.shape and o.dtype == a.dtype):
            ok = False
        elif not a.dtype.is_floating_point:
            ok = _close(o, a, 0.0, 0.0)[0]
        elif not (isinstance(b, torch.Tensor) and b.shape == a.shape):
            ok = False
        else:
            atol, rtol = tolerance_for(a.dtype, override, strict)
            r64 = b.detach().to(a.device, torch.float64)
            own = (a.detach().to(torch.float64) - r64).abs()
            own = torch.where(torch.isfinite(own), own, torch.zeros_like(own))
            slack = REF_ERROR_FACTOR * float(own.max()) if own.numel() else 0.0
            ok, err, _ = _close(o, r64, atol + slack, rtol)
            rec["slack"].append(slack)
            rec["max_abs_err"] = max(rec["max_abs_err"], err)
            if not ok:
                rec["reason"] = f"output {i}: beyond the float64 reference's tolerance plus {slack:.3g}"
                return rec
            continue
        rec["slack"].append(0.0)
        if not ok:
            rec["reason"] = f"output {i} differs from the reference"
            return rec
    rec["pass"] = True
    return rec
