"""Is an fp32 matrix product done as three TF32 products (each operand split into a TF32 head and
an fp32 tail, the tail x tail term dropped) as accurate as cuBLAS's fp32 SGEMM, and is it faster?

    python3 bench/split_tf32_probe.py [--out FILE]

For each shape: the median time of torch's fp32 matmul (TF32 off), of one TF32 product, and of
the split product (the split pass included), and each one's largest error against a float64
product, absolute and relative to the largest output. GPU only."""

from __future__ import annotations

import argparse
import functools
import json

import torch
from plan_profile import median_ms

SHAPES = [  # (batch, m, k, n); batch 0 is a plain matrix product
    (0, 4096, 4096, 4096),
    (0, 8192, 2048, 4096),
    (0, 16384, 2048, 2048),
    (16, 2048, 1024, 2048),
    (0, 1024, 1024, 1024),
    (0, 128, 4096, 4096),
    (0, 1024, 32768, 1024),
]


MODES = ("fp32", "tf32", "split", "chunk2048", "chunk1024", "chunk512")


def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x = head + tail exactly, head rounded to TF32 (10 mantissa bits, nearest, ties away)."""
    head = ((x.view(torch.int32) + 0x1000) & -8192).view(torch.float32)
    return head, x - head


def product(a: torch.Tensor, b: torch.Tensor, mode: str) -> torch.Tensor:
    """mode: fp32, tf32, split (three products over the whole of k), or chunkN (the heads'
    product over k in chunks of N, each chunk's product summed in fp32)."""
    torch.backends.cuda.matmul.allow_tf32 = mode != "fp32"
    if mode in ("fp32", "tf32"):
        return a @ b
    ah, at = split(a)
    bh, bt = split(b)
    c = ah @ bt
    c += at @ bh
    k = a.shape[-1]
    kc = k if mode == "split" else min(k, int(mode[5:]))
    for j in range(0, k, kc):
        c += ah[..., j : j + kc] @ bh[..., j : j + kc, :]
    return c


def timed(fn, reps: int = 15) -> float:
    fn()  # warm-up: cuBLAS's first call of a shape
    return median_ms(fn, reps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    g = torch.Generator(device="cuda").manual_seed(1)
    for batch, m, k, n in SHAPES:
        lead = (batch,) if batch else ()
        a = torch.randn(*lead, m, k, device="cuda", generator=g)
        b = torch.randn(*lead, k, n, device="cuda", generator=g)
        ref = a.double() @ b.double()
        scale = float(ref.abs().max())
        row = {"shape": [batch, m, k, n]}
        for mode in MODES:
            out = product(a, b, mode)
            err = float((out.double() - ref).abs().max())
            row[mode] = {
                "ms": round(timed(functools.partial(product, a, b, mode)), 4),
                "max_err": err,
                "err_of_max": err / scale,
            }
        for mode in MODES[2:]:
            row[mode]["speedup"] = round(row["fp32"]["ms"] / row[mode]["ms"], 3)
            row[mode]["err_ratio"] = round(row[mode]["max_err"] / row["fp32"]["max_err"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del a, b, ref
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
