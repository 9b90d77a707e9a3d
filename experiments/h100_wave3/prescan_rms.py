"""Find a real ~3% change of the bundled RMSNorm on this machine with the harness's kernel alone
(no kopt): one step of one launch parameter of one class, from the tuned params.json, that
makes that class about 3% slower. The power test commits that slower point as its start and
tries the step back (a real ~3% gain of one class) again and again.

    python prescan_rms.py --repo DIR --out FILE.json [--target-pct 3] [--budget-s 60] [--reps 3]

Imports the repo's solution and contract, and per class and parameter times the neighbours of
the tuned value in the tune space (kernels.catalog's), paired and alternating with the tuned
point, on the class's shapes (GPU: the production shapes, triton.testing.do_bench median;
CPU: the interpreter's small shapes, perf_counter median of 3). A step that launches every
shape of its class the same way (params.launch_meta) is skipped: it changes nothing. Per step
the geometric mean over the class's shapes of the median paired ratio; chosen: the step whose
slowdown lies in [target/2, 2 x target], closest to the target, else the smallest slowdown
above target/2 (said so). A screening figure: kopt's decisions measure the change themselves.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def choose(steps: list[dict[str, Any]], target_pct: float) -> dict[str, Any] | None:
    """The step (`slowdown_pct` each) in [target/2, 2 x target] closest to the target, else the
    smallest slowdown above target/2 (`in_window` False), else None."""
    inside = [s for s in steps if target_pct / 2 <= s["slowdown_pct"] <= 2 * target_pct]
    if inside:
        return {**min(inside, key=lambda s: abs(s["slowdown_pct"] - target_pct)), "in_window": True}
    above = [s for s in steps if s["slowdown_pct"] > target_pct / 2]
    if above:
        return {**min(above, key=lambda s: s["slowdown_pct"]), "in_window": False}
    return None


def neighbours(space: list[Any], value: Any) -> list[Any]:
    if value not in space:
        return []
    i = space.index(value)
    return [space[j] for j in (i - 1, i + 1) if 0 <= j < len(space)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--target-pct", type=float, default=3.0)
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    t_start = time.monotonic()

    import torch

    gpu = torch.cuda.is_available()
    if not gpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    repo = a.repo.resolve()
    sys.path.insert(0, str(repo))
    from solution import rmsnorm as K

    from kopt_supervisor.kernels import catalog
    from kopt_supervisor.kernels.harness.loader import load_module
    from kopt_supervisor.kernels.harness.params import launch_meta, min_programs
    from kopt_supervisor.kernels.harness.shapes import PRODUCTION, SMALL

    contract = load_module(repo / "contract.py", "wave3_prescan_contract")
    info = catalog.KERNELS["rmsnorm"]
    space = {p: v for p, v in info.space.items() if gpu or p in catalog.CPU_PARAMS}
    kind = PRODUCTION if gpu else SMALL
    device = torch.device("cuda" if gpu else "cpu")
    dtype = torch.bfloat16
    tuned = copy.deepcopy(K.PARAMS)
    gen = torch.Generator(device=device).manual_seed(1234)
    by_class: dict[str, list[tuple[str, Any, Any, Any, dict[str, Any]]]] = {}
    for shape in contract.SHAPES:
        if shape.kind != kind:
            continue
        (x, w), kw = contract.make_inputs(torch, shape.dims, dtype, str(device), gen)
        out = torch.empty_like(x)
        by_class.setdefault(K.class_key(*contract.class_args(shape.dims)), []).append((shape.name, x, w, out, kw))

    def timed(params: dict[str, Any], x: Any, w: Any, out: Any, kw: dict[str, Any]) -> float:
        K.PARAMS = params
        fn = lambda: K.rms_norm(x, w, out=out, **kw)  # noqa: E731 - the callable do_bench times
        if gpu:
            import triton

            return float(triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median"))
        fn()
        times = []
        for _ in range(3):
            s = time.perf_counter()
            fn()
            times.append(time.perf_counter() - s)
        return statistics.median(times) * 1e3

    def meta(params: dict[str, Any], cls: str, x: Any) -> dict[str, Any]:
        d = x.shape[-1]
        return launch_meta(
            params, cls, d, K.MAX_BLOCK_D, rows=x.numel() // d, min_programs=min_programs(torch, x.device)
        )

    steps: list[dict[str, Any]] = []
    skipped: list[str] = []
    cut = False
    for cls, cases in sorted(by_class.items()):
        base = {**tuned["*"], **tuned.get(cls, {})}
        for param, values in space.items():
            for value in neighbours(values, base[param]):
                name = f"{cls}: {param} {base[param]} -> {value}"
                if time.monotonic() - t_start > a.budget_s:
                    cut = True
                    break
                variant = copy.deepcopy(tuned)
                variant[cls] = {**variant.get(cls, {}), param: value}
                if all(meta(variant, cls, x) == meta(tuned, cls, x) for _, x, *_ in cases):
                    skipped.append(f"{name} (the same launch for every shape of the class)")
                    continue
                per_shape = {}
                for sname, x, w, out, kw in cases:
                    timed(tuned, x, w, out, kw)
                    timed(variant, x, w, out, kw)  # compile and warm both
                    ratios = []
                    for _ in range(a.reps):
                        b = timed(tuned, x, w, out, kw)
                        c = timed(variant, x, w, out, kw)
                        ratios.append(c / b)
                    per_shape[sname] = statistics.median(ratios)
                ratio = math.exp(sum(math.log(r) for r in per_shape.values()) / len(per_shape))
                steps.append(
                    {
                        "class": cls,
                        "param": param,
                        "tuned_value": base[param],
                        "slow_value": value,
                        "ratio": round(ratio, 5),
                        "slowdown_pct": round((ratio - 1) * 100, 3),
                        "per_shape": {k: round(v, 5) for k, v in per_shape.items()},
                        "name": name,
                    }
                )
                print(f"{name}: {(ratio - 1) * 100:+.2f}%", flush=True)
    K.PARAMS = tuned
    chosen = choose(steps, a.target_pct)
    result = {
        "device": torch.cuda.get_device_name() if gpu else "cpu (Triton interpreter)",
        "shapes": {cls: [c[0] for c in cases] for cls, cases in by_class.items()},
        "dtype": "bfloat16",
        "timer": "triton.testing.do_bench(warmup=5, rep=25, return_mode='median')"
        if gpu
        else "perf_counter, median of 3",
        "reps": a.reps,
        "tuned": tuned,
        "steps": steps,
        "skipped": skipped,
        "cut_by_budget": cut,
        "target_pct": a.target_pct,
        "chosen": chosen,
        "seconds": round(time.monotonic() - t_start, 2),
    }
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"chosen": chosen, "seconds": result["seconds"]}, indent=1))
    return 0 if chosen else 1


if __name__ == "__main__":
    raise SystemExit(main())
