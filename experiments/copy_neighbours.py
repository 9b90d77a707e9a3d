"""Does the same-size copy's time depend on what is timed beside it? (validate_gpu's 4-way
interleave read hunyuanvideo's copy at 603-626 µs, its sweep, pairing the copy with one
kernel, implied ~570 µs.)

    python -m experiments.copy_neighbours [--kernel rmsnorm] [--shape hunyuanvideo-720p] [--blocks 21]

Times, in one process on one case (bf16), the copy alone, the copy beside the solution, and
the copy beside eager + compile + solution (validate_gpu's set), each an interleaved pass of
time_variants; prints the copy's and the solution's medians and the solution's % of copy.
Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import sys

from experiments import add_case_args, one_case


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_case_args(ap, blocks=21)
    args = ap.parse_args(argv)
    torch, k, case, timing = one_case(args)
    from validate_gpu import time_variants  # importable once one_case set the paths

    base_fn = getattr(k.baseline, k.contract.FUNC)
    sol_fn = getattr(k.solution, k.contract.FUNC)
    compiled = torch.compile(base_fn, dynamic=False)
    copy = (case.copy_calls, True)
    sol = (lambda n: case.calls(sol_fn, n), True)
    sets = {
        "copy alone": {"copy": copy},
        "copy + solution": {"copy": copy, "solution": sol},
        "copy + eager + compile + solution": {
            "copy": copy,
            "eager": (lambda n: case.calls(base_fn, n), True),
            "compile": (lambda n: case.calls(compiled, n, with_out=False), True),
            "solution": sol,
        },
    }
    print(f"{torch.cuda.get_device_name()}, {args.kernel} {args.shape}, {case.bytes / 1e6:.1f} MB\n")
    print("| pass | copy µs (p10–p90) | solution µs | solution % of copy |\n|---|---|---|---|")
    for rnd in range(2):
        for name, variants in sets.items():
            res = time_variants(torch, timing, case, variants, args.blocks)
            c, s = res["copy"], res.get("solution")
            print(
                f"| {name} (round {rnd + 1}) | {c['median_us']:.2f} ({c['p10_us']:.2f}–{c['p90_us']:.2f}) | "
                + (f"{s['median_us']:.2f} | {s['pct_of_copy']:.1f} |" if s else "— | — |")
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
