"""Find a real launch change of the softmax example that moves its production shapes by about 3%
(the bring-your-own-kernel issue's "3% change"), before kopt decides it.

    python prescan.py --repo DIR --out FILE.json [--target-pct 3] [--direction slower|faster|any]

Imports `softmax.kernel` from DIR (the example's repo) and times, per production shape and
dtype, the kernel as committed against each variant of its launch globals (NUM_WARPS,
ROWS_PER_PROGRAM), paired and alternating; on a GPU with `triton.testing.do_bench` (median,
L2 flushed by do_bench), on the CPU (Triton's interpreter, small shapes) with the wall clock.
Per variant and class (dtype): the geometric mean over the shapes of the median paired ratio.
The chosen change is the variant whose classes all move in the asked direction by between
half and twice the target, closest to it; if none does, and on a GPU, an injected delay
(`torch.cuda._sleep`) calibrated to the target. This is a screening figure only: kopt's own
decision measures the candidate.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

GPU_SHAPES = [("attn-4k", 16384, 4096), ("attn-1k", 65536, 1024)]
"""examples/softmax/kopt_bench.py's production shapes."""
CPU_SHAPES = [("cpu-64", 4, 64), ("cpu-100", 3, 100), ("cpu-256", 2, 256)]
VARIANTS = [{"NUM_WARPS": w} for w in (1, 2, 8, 16)] + [{"ROWS_PER_PROGRAM": r} for r in (2, 4)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--target-pct", type=float, default=3.0)
    ap.add_argument("--direction", choices=("slower", "faster", "any"), default="slower")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()

    import torch

    gpu = torch.cuda.is_available()
    if not gpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, str(a.repo.resolve()))
    from softmax import kernel as K

    base = {"NUM_WARPS": K.NUM_WARPS, "ROWS_PER_PROGRAM": K.ROWS_PER_PROGRAM}
    device = "cuda" if gpu else "cpu"
    shapes = GPU_SHAPES if gpu else CPU_SHAPES
    dtypes = ["float16", "bfloat16"] if gpu else ["float16"]
    t0 = time.monotonic()

    def timed(x: Any, params: dict[str, int]) -> float:
        for k, v in {**base, **params}.items():
            setattr(K, k, v)
        fn = lambda: K.softmax(x)  # noqa: E731 - the callable do_bench times
        if gpu:
            import triton

            return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))
        fn()
        times = []
        for _ in range(3):
            s = time.perf_counter()
            fn()
            times.append(time.perf_counter() - s)
        return statistics.median(times) * 1e3

    ratios: dict[str, dict[str, list[float]]] = {}  # variant -> dtype -> per shape median ratio
    times_ms: dict[str, float] = {}
    for dname in dtypes:
        dtype = getattr(torch, dname)
        for sname, m, n in shapes:
            x = (torch.randn(m, n, device=device) * 4).to(dtype)
            timed(x, {})  # compile and warm the committed launch
            per_variant: dict[str, list[float]] = {}
            for _ in range(a.reps):
                for v in VARIANTS:
                    b = timed(x, {})
                    c = timed(x, v)
                    per_variant.setdefault(_name(v), []).append(c / b)
                    times_ms[f"{sname}/{dname}/base"] = b
                    times_ms[f"{sname}/{dname}/{_name(v)}"] = c
            for vname, rs in per_variant.items():
                ratios.setdefault(vname, {}).setdefault(dname, []).append(statistics.median(rs))
    per_class = {v: {d: _geomean(rs) for d, rs in by_d.items()} for v, by_d in ratios.items()}
    chosen = choose(per_class, a.target_pct, a.direction)
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if gpu else "cpu (Triton interpreter)",
        "committed": base,
        "shapes": shapes,
        "dtypes": dtypes,
        "reps": a.reps,
        "timer": "triton.testing.do_bench(warmup=10, rep=40, return_mode='median')"
        if gpu
        else "perf_counter, median of 3",
        "per_class_ratio": per_class,
        "times_ms_last_rep": times_ms,
        "target_pct": a.target_pct,
        "direction": a.direction,
    }
    if chosen is not None:
        v = VARIANTS[[_name(x) for x in VARIANTS].index(chosen)]
        ((name, value),) = v.items()
        result["chosen"] = {
            "kind": "set",
            "name": name,
            "value": value,
            "variant": chosen,
            "ratio_by_class": per_class[chosen],
            "real_change": True,
        }
    elif gpu:
        result["chosen"] = calibrate_delay(K, base, torch, shapes, dtypes, a.target_pct, timed)
    else:
        result["chosen"] = None
    result["seconds"] = round(time.monotonic() - t0, 2)
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"chosen": result["chosen"], "per_class_ratio": per_class}, indent=1))
    return 0


def _name(v: dict[str, int]) -> str:
    return ",".join(f"{k}={val}" for k, val in v.items())


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def choose(per_class: dict[str, dict[str, float]], target_pct: float, direction: str) -> str | None:
    """The variant whose every class moves in `direction` by between half and twice the target,
    closest to the target (its worst class); None if no variant does."""
    best: tuple[float, str] | None = None
    for v, by_class in per_class.items():
        pcts = [(r - 1) * 100 for r in by_class.values()]
        signs = {math.copysign(1, p) for p in pcts}
        if len(signs) != 1:
            continue
        sign = signs.pop()
        if direction == "slower" and sign < 0 or direction == "faster" and sign > 0:
            continue
        mags = [abs(p) for p in pcts]
        if min(mags) < target_pct / 2 or max(mags) > target_pct * 2:
            continue
        score = max(abs(m - target_pct) for m in mags)
        if best is None or score < best[0]:
            best = (score, v)
    return None if best is None else best[1]


def calibrate_delay(
    K: Any,
    base: dict[str, int],
    torch: Any,
    shapes: list[tuple[str, int, int]],
    dtypes: list[str],
    target_pct: float,
    timed: Any,
) -> dict[str, Any]:
    """torch.cuda._sleep cycles after each launch that cost about target_pct of the committed
    kernel on its production shapes (two points, linear in the cycles)."""
    orig = K.softmax

    def with_sleep(cycles: int) -> Any:
        def f(x: Any) -> Any:
            y = orig(x)
            torch.cuda._sleep(cycles)
            return y

        return f

    pcts: dict[int, list[float]] = {}
    for cycles in (2000, 8000):
        for dname in dtypes:
            for _, m, n in shapes:
                x = (torch.randn(m, n, device="cuda") * 4).to(getattr(torch, dname))
                K.softmax = orig
                b = timed(x, {})
                K.softmax = with_sleep(cycles)
                c = timed(x, {})
                K.softmax = orig
                pcts.setdefault(cycles, []).append((c / b - 1) * 100)
    lo, hi = statistics.mean(pcts[2000]), statistics.mean(pcts[8000])
    slope = (hi - lo) / 6000
    cycles = int(max(500, 2000 + (target_pct - lo) / slope)) if slope > 0 else 8000
    return {
        "kind": "delay",
        "cycles": cycles,
        "variant": f"torch.cuda._sleep({cycles})",
        "real_change": False,
        "calibration_pct": {str(k): v for k, v in pcts.items()},
        "why": "no launch variant moved every class by between half and twice the target",
    }


if __name__ == "__main__":
    raise SystemExit(main())
