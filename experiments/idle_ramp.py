"""Is the GPU slower for a while after it sat idle? Block times of one kernel right after a pause.

    python -m experiments.idle_ramp [--kernel rmsnorm] [--shape hunyuanvideo-720p] [--pauses 0,0.2,1,3]

Builds the harness's timer for the solution and the same-size copy (CUDA graph, L2 flushed
before each block), then for each pause: sleeps that long with the GPU idle, and times 40
blocks back to back, alternating copy and solution. Prints every block's µs, so a ramp after
the pause shows as slow first blocks. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from experiments import add_case_args, one_case


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_case_args(ap, blocks=40)
    ap.add_argument("--pauses", default="0,0.2,1,3")
    args = ap.parse_args(argv)
    torch, k, case, timing = one_case(args)
    fn = getattr(k.solution, k.contract.FUNC)
    copy = timing.timer(case.copy_calls, case.bytes)
    sol = timing.timer(lambda n: case.calls(fn, n), case.bytes)
    print(f"{torch.cuda.get_device_name()}, {args.kernel} {args.shape}, {case.bytes / 1e6:.1f} MB")
    for pause in (float(p) for p in args.pauses.split(",")):
        torch.cuda.synchronize()
        time.sleep(pause)
        t0 = time.perf_counter()
        copies, sols = [], []
        for _ in range(args.blocks):
            copies.append(copy.block())
            sols.append(sol.block())
        wall = time.perf_counter() - t0
        print(
            f"\npause {pause:.1f} s, then {args.blocks} block pairs in {wall:.2f} s; "
            f"median copy {statistics.median(copies):.2f} µs, solution {statistics.median(sols):.2f} µs; "
            f"first 5 vs last 20 medians: copy {statistics.median(copies[:5]):.2f} / "
            f"{statistics.median(copies[-20:]):.2f}, solution {statistics.median(sols[:5]):.2f} / "
            f"{statistics.median(sols[-20:]):.2f}"
        )
        print("copy     " + " ".join(f"{x:.0f}" if x > 100 else f"{x:.2f}" for x in copies))
        print("solution " + " ".join(f"{x:.0f}" if x > 100 else f"{x:.2f}" for x in sols))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
