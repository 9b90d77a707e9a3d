"""The pytarget's protected bench: imports the candidate's kernel module and times it in
this process with time.perf_counter_ns, writing kopt's CSV (shape, cls, n, us, err) with the
csv module.

Per config: the reference result (`ref`, a module-level name, as benches written in a hurry
have it), one checked call of the kernel (err: how many values differ from the reference),
then REPS timed calls whose results are thrown away (the fastest is the metric).
"""

import csv
import sys
import time

import kernel
import problem

CONFIGS = [("small", 75), ("small", 112), ("small", 150), ("large", 750), ("large", 1125)]
REPS = 7


def reference(xs: list[float], scale: float) -> list[float]:
    return [x * x * scale for x in xs]


out_csv = csv.writer(sys.stdout, lineterminator="\n")
out_csv.writerow(["shape", "cls", "n", "us", "err"])
for i, (cls, n) in enumerate(CONFIGS):
    xs = problem.inputs(n)
    ref = reference(xs, problem.SCALE)
    out = list(kernel.kernel(xs, problem.SCALE))
    err = sum(1 for a, b in zip(out, ref, strict=False) if abs(a - b) > 1e-12 * max(1.0, abs(b))) + abs(
        len(out) - len(ref)
    )
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter_ns()
        kernel.kernel(xs, problem.SCALE)
        times.append(time.perf_counter_ns() - t0)
    out_csv.writerow([f"s{i}", cls, n, f"{min(times) / 1000:.3f}", err])
