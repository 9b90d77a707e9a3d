"""Benchmark the Triton softmax against torch.softmax.

    python bench.py                                  # the default sizes, fp16 and bf16
    python bench.py --rows 4096 --cols 1024,4096 --dtypes float16

Prints a table and writes it to results/softmax.csv. Times with triton.testing.do_bench on a
GPU; without one (TRITON_INTERPRET=1) with the wall clock over a few calls.
"""

import argparse
import csv
import os
import statistics
import time

import torch
import triton
from softmax import softmax

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def time_ms(fn, reps=5):
    if DEVICE == "cuda":
        return triton.testing.do_bench(fn, warmup=25, rep=100)
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", default="256,1024,4096,8192")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--out", default="results/softmax.csv")
    args = ap.parse_args()

    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for n in (int(c) for c in args.cols.split(",")):
            x = torch.randn(args.rows, n, device=DEVICE).to(dtype)
            err = (softmax(x).double() - torch.softmax(x.double(), dim=-1)).abs().max().item()
            triton_ms = time_ms(lambda x=x: softmax(x))
            torch_ms = time_ms(lambda x=x: torch.softmax(x, dim=-1))
            gbps = 2 * x.numel() * x.element_size() / triton_ms / 1e6
            rows.append({"M": args.rows, "N": n, "dtype": dtype_name, "triton_ms": round(triton_ms, 5),
                         "torch_ms": round(torch_ms, 5), "triton_gbps": round(gbps, 2), "max_abs_err": err})

    print(f"softmax on {DEVICE} ({torch.cuda.get_device_name() if DEVICE == 'cuda' else 'no GPU'})")
    print(f"{'M':>6} {'N':>6} {'dtype':>9} {'triton_ms':>10} {'torch_ms':>10} {'triton_gbps':>12} {'max_abs_err':>12}")
    for r in rows:
        print(f"{r['M']:>6} {r['N']:>6} {r['dtype']:>9} {r['triton_ms']:>10.4f} {r['torch_ms']:>10.4f} "
              f"{r['triton_gbps']:>12.1f} {r['max_abs_err']:>12.2e}")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
