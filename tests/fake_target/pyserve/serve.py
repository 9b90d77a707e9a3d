"""The pyserve target's protected per-tree server: kopt's per-tree serve protocol
(docs/files.md, "The per-tree serve protocol") over a real pure-Python computation, the
candidate's `solution.normalise` (a row-wise RMS normalisation), timed in this process with
time.process_time per call, as kopt's harness times a CPU target.

    python serve.py            one look with a random seed: the CSV on stdout
    python serve.py --serve    `look N SEED PATH` -> `done N`, `audit N SEED PATH` ->
                               `audited N`, `load` -> `loaded`; EOF: it leaves

What it reads from its tree (the working directory): shapes.csv (one config per row: shape,
cls, n) and problem.json (`rows` per input, the tolerance `atol`/`rtol`), both tracked data
files outside [target].sources, and solution.py (the candidate's). Per config and look:

- the contract check: inputs of their own drawn from SEED, the reference computed here, the
  solution's output compared with it (`err`: how many values differ by more than the
  tolerance, or the length difference). A written-in-a-hurry check, as benches have them: a
  NaN compares as "not different" and passes (the hole kopt's own audit is for);
- CALLS timed calls, each on a buffer set of its own drawn from SEED (never the check's
  inputs; no reference is computed for them), each call's output copied into an
  array('d') inside its timed span (as a kernel writes its output tensor: nothing is
  computed later, when the output is read) and kept until the next look;
- the row: shape, cls, n, `us` (the median per-call CPU time, microseconds), `us_mean` (the
  mean over the same calls), `err`, `calls` (= CALLS, fixed: the same in every tree).

With each look, `PATH.sets.json` commits to every timed set's output summaries (the same
summary, no samples) before kopt draws the audit seed.

`audit N SEED PATH` summarises, per config of look N, the timed set and positions that the
audit SEED picks by kopt's shared rule (kopt_supervisor.kernels.harness.audit's audit_set and
audit_positions, imported: the module needs no torch), sums in float64 over the finite
elements. An exception in a look (the candidate's function raised) is `fail N WHY`.
"""

import csv
import json
import math
import random
import statistics
import sys
import time
from array import array

import solution

from kopt_supervisor.kernels.harness.audit import audit_positions, audit_set, input_seed

CALLS = 24
"""Timed calls per config and look, each on a buffer set of its own (S = CALLS)."""
COLUMNS = ("shape", "cls", "n")
EPS = 1e-6


def configs():
    with open("shapes.csv", newline="") as f:
        return [(r["shape"], r["cls"], int(r["n"])) for r in csv.DictReader(f)]


def problem():
    with open("problem.json") as f:
        return json.load(f)


def key_of(shape, cls, n):
    return f"shape={shape},cls={cls},n={n}"


def draw(seed, key, purpose, rows, n):
    """One buffer set: `rows` x `n` values in [-0.5, 0.5) and a weight per column, from SEED."""
    rnd = random.Random(input_seed(seed, key, purpose)).random
    xs = [rnd() - 0.5 for _ in range(rows * n)]
    w = [0.5 + rnd() for _ in range(n)]
    return xs, w


def reference(xs, w, n):
    out = []
    for r in range(0, len(xs), n):
        row = xs[r : r + n]
        inv = 1.0 / math.sqrt(math.fsum(x * x for x in row) / n + EPS)
        out.extend(x * inv * wi for x, wi in zip(row, w, strict=True))
    return out


def check(out, ref, atol, rtol):
    """How many values differ from the reference (NaN compares as equal: the bench's hole)."""
    bad = sum(1 for a, b in zip(out, ref, strict=False) if abs(a - b) > atol + rtol * abs(b))
    return bad + abs(len(out) - len(ref))


def look(seed):
    """One look: the CSV rows and, per config, the outputs of its timed calls."""
    p = problem()
    rows, atol, rtol = int(p["rows"]), float(p["atol"]), float(p["rtol"])
    lines = [["shape", "cls", "n", "us", "us_mean", "err", "calls"]]
    kept = []
    for shape, cls, n in configs():
        key = key_of(shape, cls, n)
        xs, w = draw(seed, key, "check", rows, n)
        ref = reference(xs, w, n)
        err = check(array("d", solution.normalise(xs, w, n)), ref, atol, rtol)
        del xs, w, ref
        sets = [draw(seed, key, f"set{i}", rows, n) for i in range(CALLS)]
        outs, times = [], []
        for xs, w in sets:
            t0 = time.process_time()
            y = array("d", solution.normalise(xs, w, n))
            times.append(time.process_time() - t0)
            outs.append(y)
        del sets
        us = statistics.median(times) * 1e6
        us_mean = statistics.fmean(times) * 1e6
        lines.append([shape, cls, n, f"{us:.3f}", f"{us_mean:.3f}", err, CALLS])
        kept.append(({"shape": shape, "cls": cls, "n": n}, key, outs, atol, rtol))
    return lines, kept


def summary(ys, positions):
    try:  # fsum is finite only when every element is: then two passes in C, not five in Python
        total = math.fsum(ys)
    except (ValueError, OverflowError):  # inf + -inf, or a finite overflow (raised again below)
        total = math.inf
    if math.isfinite(total):
        nan, inf, abs_sum = 0, 0, math.fsum(map(abs, ys))
    else:
        finite = [y for y in ys if math.isfinite(y)]
        nan = sum(1 for y in ys if math.isnan(y))
        inf = sum(1 for y in ys if math.isinf(y))
        total, abs_sum = math.fsum(finite), math.fsum(abs(y) for y in finite)
    return {
        "numel": len(ys),
        "nan": nan,
        "inf": inf,
        "sum": total,
        "abs_sum": abs_sum,
        "samples": [[i, ys[i]] for i in positions],
    }


def commitment(kept):
    """Every timed set's output summaries, written with the look (before any audit seed)."""
    return json.dumps(
        {
            "version": 1,
            "configs": [
                {"config": config, "sets": [[summary(ys, [])] for ys in outs]}
                for config, _key, outs, _atol, _rtol in kept
            ],
        }
    )


def audit(seed, kept):
    entries = []
    for config, key, outs, atol, rtol in kept:
        rng, chosen = audit_set(seed, key, len(outs))
        ys = outs[chosen]
        entries.append(
            {
                "config": config,
                "sets": len(outs),
                "set": chosen,
                "atol": atol,
                "rtol": rtol,
                "outputs": [summary(ys, audit_positions(rng, len(ys)))],
            }
        )
    return json.dumps({"version": 1, "configs": entries})


def write_csv(lines, out):
    csv.writer(out, lineterminator="\n").writerows(lines)


def serve():
    kept, last = [], None
    for line in sys.stdin:
        words = line.split()
        if words == ["load"]:
            print("loaded", flush=True)
            continue
        if len(words) != 4 or words[0] not in ("look", "audit"):
            print(f"fail ? not a request: {line.strip()[:60]!r}", flush=True)
            continue
        verb, n, seed, path = words
        if verb == "audit":
            if n != last:
                print(f"fail {n} no look {n} to audit", flush=True)
                continue
            text = audit(int(seed), kept)
            with open(path, "w") as f:
                f.write(text)
            print(f"audited {n}", flush=True)
            continue
        kept, last = [], None
        try:
            lines, kept = look(int(seed))
        except Exception as exc:  # the candidate's function broke the look: a bench failure
            print(f"fail {n} {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            continue
        with open(path, "w", newline="") as f:
            write_csv(lines, f)
        with open(path + ".sets.json", "w") as f:
            f.write(commitment(kept))
        last = n
        print(f"done {n}", flush=True)


if "--serve" in sys.argv[1:]:
    serve()
else:
    write_csv(look(random.SystemRandom().randrange(2**63))[0], sys.stdout)
