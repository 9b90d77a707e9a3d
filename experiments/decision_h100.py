"""The decision on a real GPU: kopt's paired sequential test against do_bench + the 1% rule.

Run on one idle H100 (about 4-5 minutes; --budget-s 400 caps the run: decisions stop early
rather than overrun, and the tables say how many were made; progress on stderr, the
markdown tables last on stdout; the same tables go to decision_h100.md and every decision
to decision_h100.json):

    python -m experiments.decision_h100 --out decision_h100.json

Smoke run without a GPU (Triton's interpreter, tiny sizes, CPU timers; the numbers mean
nothing, the plumbing runs end to end in a few seconds):

    python -m experiments.decision_h100 --smoke --out /tmp/decision_smoke.json

What it measures (kopt issue 5): false keeps, power and GPU time per decision, for kopt's
decision and for do_bench + the 1% rule measured in the same run, at three kernel durations
(--durations-us, default ~5, ~10 and ~700 µs per launch), with A/A pairs and A/B pairs whose
candidate is slower by a true, known amount; --decisions (default 50) of each.

- The kernel: y = 2x + 1 over n fp32 values (Triton), preceded in every program by a spin
  of `delay` cycles on %clock64 (inline PTX, `tl.inline_asm_elementwise`). Best and
  candidate are the same compiled kernel on the same buffers; only the runtime `delay`
  differs (0 for the best tree and for A/A). If the spin cannot be compiled or does not
  slow the kernel, a chain of `delay` multiply-adds per element stands in (said in the
  output). The smoke run always uses the multiply-adds: the interpreter cannot run PTX.
- Durations are per launch as a user's CUDA graph sees them: GPU time of one replay of k
  back-to-back launches (CUDA events, L2 flushed before the replay) / k, median of 7
  replays. n is searched so that this lands near each target; do_bench's reading of the
  same kernel (which adds its own L2 flush and launch gap) is reported beside it.
- The slowdown: per duration and --slowdowns (default 1 and 2 %), the delay is calibrated at
  start (measured, interleaved, until the kernel's time grows by about that much). Where the
  kernel is bandwidth-bound (targets >= --bytes-min-us), candidates that move 1% and 2%
  more bytes (--bytes-slowdowns; the same buffers, a longer prefix) are added.
- The truth of every condition is measured, not assumed: --truth-s GPU seconds of
  interleaved block pairs, half before and half after its decisions (buffers fixed for the
  whole condition), reported with a 99% interval over 20 batch means.
- kopt: blocks of about --block-us of GPU time (one CUDA-graph replay, L2 flushed before
  it), best and candidate in ABBA order, --pairs-per-look block pairs per look,
  `engine.decide.evaluate` after each look with the loop's real policy,
  `Policy.from_config(DecideConfig())`, until final. "kopt" takes one sample per look (the
  ab_command default); "kopt pooled" judges the same blocks with every block a sample
  (Policy.pool_blocks; valid here, one process and fixed buffers).
- The naive rule, interleaved with kopt's decisions: one `triton.testing.do_bench` reading
  (defaults) of best, then one of the candidate; keep if the candidate reads > 1% faster,
  regression if > 1% slower, else tie. "twice" also keeps when a sub-threshold gain is
  followed by a second reading pair showing a gain (the reference program's rule);
  "confirm" keeps only when two reading pairs both show > 1%.
- No candidate is faster, so every keep is a false keep; "regression" on an A/B row is the
  power. GPU-ms per decision: kopt's timed blocks; for do_bench the wall time of its calls
  (its flush and kernel keep the GPU busy throughout).

Needs torch and triton (the `kernels` extra). Failures print one line naming the phase and
write the traceback next to --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.decide import betainc, t_quantile
from kopt_supervisor.engine.decide.estimate import Pair, Policy
from kopt_supervisor.engine.decide.verdict import evaluate
from kopt_supervisor.kernels.harness.timing import CpuTimer, GraphTimer

KINDS = ("keep", "regression", "tie", "borderline")
KOPT = ("kopt", "kopt pooled")
NAIVE = ("do_bench 1%", "do_bench twice", "do_bench confirm")
METHODS = KOPT + NAIVE
BLOCK = 1024
"""Elements per Triton program."""


class SetupError(RuntimeError):
    """The experiment cannot run as asked (no GPU, a kernel that does not slow down, ...)."""


# --- pure: statistics -----------------------------------------------------------------------


def pct(log_ratio: float) -> float:
    return (math.exp(log_ratio) - 1.0) * 100.0


def batch_interval(logs: list[float], batches: int, confidence: float = 0.99) -> dict[str, float]:
    """Mean change in % of paired log-ratios, with a t interval over `batches` contiguous batch
    means (robust to the correlation of neighbouring pairs)."""
    if not logs:
        return {"pct": math.nan, "lo": math.nan, "hi": math.nan, "pairs": 0}
    b = max(2, min(batches, len(logs) // 2)) if len(logs) >= 4 else 1
    size = len(logs) // b
    means = [statistics.fmean(logs[i * size : (i + 1) * size]) for i in range(b)]
    m = statistics.fmean(logs)
    if b < 2:
        return {"pct": pct(m), "lo": math.nan, "hi": math.nan, "pairs": len(logs)}
    half = t_quantile(1 - (1 - confidence) / 2, b - 1) * statistics.stdev(means) / math.sqrt(b)
    return {"pct": pct(m), "lo": pct(m - half), "hi": pct(m + half), "pairs": len(logs)}


def upper_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """Clopper-Pearson upper limit of a rate seen k times in n (two-sided `confidence`)."""
    if n == 0:
        return math.nan
    if k >= n:
        return 1.0
    a = (1 - confidence) / 2
    lo, hi = k / n, 1.0
    for _ in range(60):  # P(X <= k | p) = 1 - I_p(k + 1, n - k) falls as p grows
        mid = (lo + hi) / 2
        if 1.0 - betainc(k + 1, n - k, mid) > a:
            lo = mid
        else:
            hi = mid
    return hi


# --- pure: searches -------------------------------------------------------------------------


def next_delay(history: list[tuple[int, float]], target: float) -> int | None:
    """The next delay to try so that the measured change (%) reaches `target`, from the
    (delay, change) pairs tried so far; the change grows with the delay, possibly only past
    a threshold (a delay hidden behind memory traffic). None: nothing left to try."""
    tried = {d for d, _ in history}
    below = [h for h in history if h[1] < target]
    above = [h for h in history if h[1] >= target]
    if below and above:
        lo = max(below)
        hi = min((h for h in above if h[0] > lo[0]), default=None)
        if hi is None or hi[0] - lo[0] <= 1:
            return None
        f = (target - lo[1]) / (hi[1] - lo[1]) if hi[1] > lo[1] else 0.5
        d = round(lo[0] + min(0.9, max(0.1, f)) * (hi[0] - lo[0]))
    elif above:
        d0, m0 = min(above)
        d = max(1, round(d0 * max(0.02, target / m0)))
    else:
        d0, m0 = max(below)
        d = round(d0 * (min(8.0, target / m0) if m0 > target / 8 else 8.0))
    d = max(1, d)
    return None if d in tried else d


def next_size(points: list[tuple[int, float]], target: float, step: int = BLOCK) -> int | None:
    """The next n to measure so that the time per launch (µs) reaches `target`: log-log
    interpolation between the closest measured sizes on either side (extrapolation from the
    two largest when every point is below). None: nothing left to try."""
    pts = sorted(points)
    tried = {n for n, _ in pts}
    below = [p for p in pts if p[1] < target]
    above = [p for p in pts if p[1] >= target]
    if not below:
        return None
    lo = max(below)
    hi = min((p for p in above if p[0] > lo[0]), default=None)
    if hi is None:
        if len(below) < 2:
            return None
        hi, lo = below[-1], below[-2]
    if hi[1] <= lo[1]:
        n = (lo[0] + hi[0]) / 2
    else:
        f = (math.log(target) - math.log(lo[1])) / (math.log(hi[1]) - math.log(lo[1]))
        n = math.exp(math.log(lo[0]) + f * (math.log(hi[0]) - math.log(lo[0])))
    n_r = max(step, int(round(n / step)) * step)
    return None if n_r in tried else n_r


# --- pure: the two deciders -------------------------------------------------------------------


class BlockTimer(Protocol):
    reps: int

    def block(self) -> float:
        """Times one block; microseconds per launch."""
        ...


@dataclass
class Tally:
    """Decisions of one method under one condition."""

    kinds: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    looks: list[int] = field(default_factory=list)
    gpu_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def add(self, kind: str, looks: int, gpu_s: float, wall_s: float, **extra: Any) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.looks.append(looks)
        self.gpu_s.append(gpu_s)
        self.wall_s.append(wall_s)
        self.decisions.append({"verdict": kind, "looks": looks, "gpu_s": gpu_s, "wall_s": wall_s, **extra})

    @property
    def n(self) -> int:
        return len(self.looks)

    def share(self, kind: str) -> float:
        return self.kinds.get(kind, 0) / self.n if self.n else math.nan

    def summary(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "counts": dict(self.kinds),
            **{k: self.share(k) for k in KINDS},
            "keep_upper95": upper_bound(self.kinds.get("keep", 0), self.n),
            "mean_looks": statistics.fmean(self.looks) if self.looks else math.nan,
            "mean_gpu_s": statistics.fmean(self.gpu_s) if self.gpu_s else math.nan,
            "mean_wall_s": statistics.fmean(self.wall_s) if self.wall_s else math.nan,
        }


def kopt_decision(
    best: BlockTimer,
    cand: BlockTimer,
    policies: dict[str, Policy],
    pairs_per_look: int,
    tallies: dict[str, Tally],
    logs: list[float],
) -> None:
    """One decision: ABBA block pairs, a look every `pairs_per_look` pairs; every policy judges
    the same blocks and stops on its own. Each pair's log(cand/best) is appended to `logs`."""
    pairs: list[Pair] = []
    gpu_s = 0.0
    t0 = time.perf_counter()
    open_ = dict(policies)
    # One discarded pair first, as any harness warms up: the first block after other work
    # (here do_bench's readings) runs slow, and it would always be best's (run 2 of this
    # script on an H100: A/A at ~5 µs read -0.80% during decisions against -0.18% truth).
    best.block()
    cand.block()
    for look in range(max(p.max_rounds for p in policies.values())):
        for j in range(pairs_per_look):
            order = "AB" if j % 2 == 0 else "BA"
            if order == "AB":
                b = best.block()
                c = cand.block()
            else:
                c = cand.block()
                b = best.block()
            gpu_s += (b * best.reps + c * cand.reps) / 1e6
            pairs.append(Pair("kernel", "all", b, c, look, order, j))
            logs.append(math.log(c / b))
        for name, policy in list(open_.items()):
            if look + 1 < policy.min_rounds:
                continue
            v = evaluate(pairs, policy, gpu_seconds=gpu_s)
            if v.final:
                c0 = v.classes[0]
                tallies[name].add(
                    v.kind,
                    look + 1,
                    gpu_s,
                    time.perf_counter() - t0,
                    reason=v.reason,
                    ratio=c0.ratio,
                    lo=c0.lo if math.isfinite(c0.lo) else None,
                    hi=c0.hi if math.isfinite(c0.hi) else None,
                    flags=list(v.flags),
                )
                del open_[name]
        if not open_:
            return


def naive_decision(read_best: Callable[[], float], read_cand: Callable[[], float], tallies: dict[str, Tally]) -> float:
    """The 1% rule on one reading each, and its twice-in-a-row and confirm variants (a second
    reading pair only when the first showed a gain). Returns the first pair's change in %."""
    t0 = time.perf_counter()
    a1, b1 = read_best(), read_cand()
    first = time.perf_counter() - t0
    g1 = 1.0 - b1 / a1
    one = "keep" if g1 > 0.01 else "regression" if g1 < -0.01 else "tie"
    tallies["do_bench 1%"].add(one, 1, first, first, gain=g1)
    if g1 > 0:
        a2, b2 = read_best(), read_cand()
        both = time.perf_counter() - t0
        g2 = 1.0 - b2 / a2
        twice_wall = first if g1 > 0.01 else both
        tallies["do_bench twice"].add(
            "keep" if (g1 > 0.01 or g2 > 0) else "tie", 1 if g1 > 0.01 else 2, twice_wall, twice_wall, gain=g1, gain2=g2
        )
        tallies["do_bench confirm"].add(
            "keep" if (g1 > 0.01 and g2 > 0.01) else "tie",
            2 if g1 > 0.01 else 1,
            both if g1 > 0.01 else first,
            both if g1 > 0.01 else first,
            gain=g1,
            gain2=g2,
        )
    else:
        for name in ("do_bench twice", "do_bench confirm"):
            tallies[name].add(one, 1, first, first, gain=g1)
    return (b1 / a1 - 1.0) * 100.0


def measure_pairs(best: BlockTimer, cand: BlockTimer, gpu_s: float, min_pairs: int, max_pairs: int) -> list[float]:
    """log(cand/best) of ABBA block pairs until `gpu_s` of timed blocks (within the bounds)."""
    logs: list[float] = []
    spent = 0.0
    while len(logs) < max_pairs and (len(logs) < min_pairs or spent < gpu_s):
        if len(logs) % 2 == 0:
            b = best.block()
            c = cand.block()
        else:
            c = cand.block()
            b = best.block()
        spent += (b * best.reps + c * cand.reps) / 1e6
        logs.append(math.log(c / b))
    return logs


# --- the kernel (Triton) ----------------------------------------------------------------------

_KERNEL: Any = None


def stream_kernel() -> Any:
    """The Triton kernel, built once: y = 2x + 1 over n fp32 values, each program first
    delayed by `delay` units: cycles of a %clock64 spin (SPIN) or multiply-adds per element."""
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import triton
    import triton.language as tl

    @triton.jit
    def clock64():
        return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)

    @triton.jit(do_not_specialize=["delay"])
    def stream(x_ptr, y_ptr, n, delay, zero, BLOCK: tl.constexpr, SPIN: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        if SPIN:
            # spin until `delay` cycles have passed; the count bounds the loop even if the
            # clock did not advance
            start = clock64()
            now = start
            spins = start * 0
            while (now - start < delay) & (spins < delay):
                now = clock64()
                spins += 1
            x = tl.load(x_ptr + offs, mask=mask)
            y = x * 2.0 + 1.0
        else:
            x = tl.load(x_ptr + offs, mask=mask)
            acc = x
            for _ in range(delay):
                acc = acc * 0.5 + 0.25
            y = x * 2.0 + 1.0 + acc * zero  # zero is 0.0 at run time: y is exact
        tl.store(y_ptr + offs, y, mask=mask)

    _KERNEL = stream
    return stream


def launcher(spin: bool) -> Callable[[Any, Any, int, int], None]:
    """launch(x, y, n, delay): one launch of the kernel over the first n values."""
    import triton

    kernel = stream_kernel()

    def launch(x: Any, y: Any, n: int, delay: int) -> None:
        kernel[(triton.cdiv(n, BLOCK),)](x, y, n, delay, 0.0, BLOCK=BLOCK, SPIN=spin)

    return launch


@dataclass
class Arm:
    """One side of a comparison: the kernel over the first n values of shared buffers."""

    name: str
    n: int
    delay: int
    run: Callable[[], None]


# --- timing backends (side effects) -----------------------------------------------------------


class Backend:
    """Buffers, arms, block timers and do_bench readings on one device (CUDA or, for the
    smoke run, the CPU with Triton's interpreter)."""

    def __init__(self, torch: Any, smoke: bool) -> None:
        self.torch, self.smoke = torch, smoke
        self.device = "cpu" if smoke else "cuda"
        self.spin = False
        self.launch = launcher(False)
        self.flush_buffer = None
        if not smoke:
            props = torch.cuda.get_device_properties(0)
            l2 = int(getattr(props, "L2_cache_size", 50 << 20) or (50 << 20))
            self.flush_buffer = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")

    def use_spin(self, spin: bool) -> None:
        self.spin = spin
        self.launch = launcher(spin)

    def buffers(self, n: int) -> tuple[Any, Any]:
        x = self.torch.rand(n, device=self.device, dtype=self.torch.float32)
        return x, self.torch.empty_like(x)

    def arm(self, name: str, bufs: tuple[Any, Any], n: int, delay: int) -> Arm:
        x, y = bufs
        launch = self.launch
        return Arm(name, n, delay, lambda: launch(x, y, n, delay))

    def flush(self) -> None:
        if self.flush_buffer is not None:
            self.flush_buffer.zero_()

    def timer(self, arm: Arm, reps: int) -> BlockTimer:
        if self.smoke:
            arm.run()
            return CpuTimer(arm.run, reps, warm_blocks=0)
        return GraphTimer(self.torch, arm.run, reps, self.flush)

    def one_launch_us(self, arm: Arm) -> float:
        """The fastest of 3 single launches (after an L2 flush), in µs."""
        arm.run()  # compiled and warm before it is timed
        best = math.inf
        for _ in range(3):
            if self.smoke:
                t0 = time.perf_counter()
                arm.run()
                best = min(best, (time.perf_counter() - t0) * 1e6)
                continue
            self.flush()
            s, e = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            s.record()
            arm.run()
            e.record()
            e.synchronize()
            best = min(best, s.elapsed_time(e) * 1000.0)
        return best

    def reading(self, arm: Arm) -> float:
        """One reading as users take it: triton.testing.do_bench with its defaults (the mean
        over ~100 ms of calls, L2 flushed before each), in µs. Smoke: mean wall of 5 calls."""
        if self.smoke:
            t0 = time.perf_counter()
            for _ in range(5):
                arm.run()
            return (time.perf_counter() - t0) * 1e6 / 5
        import triton.testing

        return float(triton.testing.do_bench(arm.run)) * 1000.0

    def per_launch_us(self, arm: Arm, block_us: float, max_reps: int) -> tuple[float, int]:
        """(µs per launch in a block of about block_us, launches per block): median of 7 blocks."""
        est = self.one_launch_us(arm)
        reps = max(1, min(max_reps, round(block_us / max(est, 1e-3))))
        timer = self.timer(arm, reps)
        return statistics.median(timer.block() for _ in range(7)), reps

    def sms(self) -> int:
        return 1 if self.smoke else int(self.torch.cuda.get_device_properties(0).multi_processor_count)

    def release(self) -> None:
        """Hands freed device memory back (between sizes and durations)."""
        if not self.smoke:
            self.torch.cuda.empty_cache()


def open_backend(smoke: bool) -> tuple[Backend, dict[str, Any]]:
    """The backend for this run and what to record about the machine."""
    import torch
    import triton

    if not smoke and not torch.cuda.is_available():
        raise SetupError("no CUDA device visible to torch: run on a GPU machine, or pass --smoke")
    info = {
        "device": "cpu (smoke: Triton interpreter)" if smoke else torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": getattr(torch.version, "cuda", None),
        "triton": triton.__version__,
    }
    return Backend(torch, smoke), info


# --- setup steps ----------------------------------------------------------------------------


class Progress:
    """Progress lines on stderr with the elapsed seconds; `phase` names the current step for
    the one-line failure message."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.phase = "starting"

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def log(self, msg: str) -> None:
        print(f"[{self.elapsed():5.0f} s] {msg}", file=sys.stderr, flush=True)


def choose_delay(backend: Backend, prog: Progress) -> tuple[str, float]:
    """Which delay the kernel uses and how many delay units add one µs to a one-wave launch:
    the %clock64 spin if it compiles and slows the kernel, else the multiply-add chain."""
    n = BLOCK * 4 if backend.smoke else 1 << 16
    bufs = backend.buffers(n)
    trials = [("multiply-add chain", False, 20 if backend.smoke else 20_000)]
    if not backend.smoke:
        trials.insert(0, ("%clock64 spin", True, 200_000))
    why = []
    cause: Exception | None = None
    for kind, spin, units in trials:
        try:
            backend.use_spin(spin)
            base = backend.arm("probe", bufs, n, 0)
            slow = backend.arm("probe", bufs, n, units)
            base.run()
            slow.run()
            added = min(backend.one_launch_us(slow) for _ in range(2)) - min(
                backend.one_launch_us(base) for _ in range(2)
            )
        except Exception as exc:  # a compiler that rejects the inline PTX: fall back, say why
            cause = exc
            why.append(f"{kind}: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
            continue
        floor = 0.0 if backend.smoke else 20.0
        if added > floor:
            if why:
                prog.log(f"note: {'; '.join(why)}; using the {kind}")
            prog.log(f"delay: {kind}, {units} units added {added:.1f} µs to a one-wave launch")
            return kind, units / added
        why.append(f"{kind}: {units} units added only {added:.1f} µs")
    raise SetupError("no in-kernel delay slows the kernel (" + "; ".join(why) + ")") from cause


def size_for_durations(
    backend: Backend, targets_us: list[float], block_us: float, prog: Progress, max_n: int
) -> dict[float, dict[str, Any]]:
    """Per target, n such that the time per launch in a CUDA graph is near it: a doubling scan,
    then up to 4 log-log refinements (within 10%)."""
    if backend.smoke:
        out = {}
        for i, t in enumerate(targets_us):
            n = BLOCK * (i + 1)
            bufs = backend.buffers(n)
            us, reps = backend.per_launch_us(backend.arm("size", bufs, n, 0), block_us, 1)
            out[t] = {"n": n, "per_launch_us": us, "probes": [(n, us)]}
        return out
    cache: dict[int, float] = {}

    def measure(n: int) -> float:
        if n not in cache:
            bufs = backend.buffers(n)
            cache[n] = backend.per_launch_us(backend.arm("size", bufs, n, 0), block_us, 1000)[0]
            del bufs
            backend.release()
        return cache[n]

    n = 1 << 12
    while n <= max_n:
        if measure(n) > 1.5 * max(targets_us):
            break
        n <<= 1
    out = {}
    for t in targets_us:
        for _ in range(4):
            closest = min(cache.items(), key=lambda p: abs(math.log(p[1] / t)))
            if abs(closest[1] / t - 1) <= 0.10:
                break
            nxt = next_size(list(cache.items()), t)
            if nxt is None or nxt > max_n:
                break
            measure(nxt)
        n_t, us = min(cache.items(), key=lambda p: abs(math.log(p[1] / t)))
        out[t] = {"n": n_t, "per_launch_us": us, "probes": sorted(cache.items())}
        prog.log(f"size: ~{t:g} µs per launch -> n = {n_t} ({us:.2f} µs per launch)")
    return out


def calibrate_delay(
    backend: Backend,
    bufs: tuple[Any, Any],
    n: int,
    reps: int,
    base: BlockTimer,
    target_pct: float,
    guess: int,
    args: argparse.Namespace,
) -> tuple[int, list[tuple[int, float]]]:
    """The delay whose measured change is closest to target_pct (within --calib-tol of it
    when --calib-iters allow), and every (delay, change %) tried."""
    history: list[tuple[int, float]] = []
    d: int | None = max(1, guess)
    for _ in range(args.calib_iters):
        assert d is not None
        timer = backend.timer(backend.arm("calib", bufs, n, d), reps)
        logs = measure_pairs(base, timer, args.calib_s, 4 if backend.smoke else 20, 400)
        history.append((d, pct(statistics.fmean(logs))))
        if abs(history[-1][1] - target_pct) <= args.calib_tol * target_pct:
            break
        d = next_delay(history, target_pct)
        if d is None:
            break
    best = min(history, key=lambda h: abs(h[1] - target_pct))
    return best[0], history


# --- the experiment ---------------------------------------------------------------------------


@dataclass
class Condition:
    """One comparison of a duration: best vs a candidate that is identical (A/A) or slower by
    a delay or by more bytes."""

    name: str
    kind: str
    """"aa", "delay" or "bytes"."""
    planned_pct: float
    cand: Arm
    cand_timer: BlockTimer
    calibration: list[tuple[int, float]] = field(default_factory=list)
    truth_logs: list[float] = field(default_factory=list)
    truth_before: float = math.nan
    truth_after: float = math.nan
    decision_logs: list[float] = field(default_factory=list)
    naive_changes: list[float] = field(default_factory=list)
    tallies: dict[str, Tally] = field(default_factory=lambda: {m: Tally() for m in METHODS})

    def report(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "planned_pct": self.planned_pct,
            "delay": self.cand.delay,
            "n_cand": self.cand.n,
            "calibration": self.calibration,
            "truth": {
                **batch_interval(self.truth_logs, 20),
                "before_pct": self.truth_before,
                "after_pct": self.truth_after,
            },
            "during_decisions_pct": pct(statistics.fmean(self.decision_logs)) if self.decision_logs else math.nan,
            "do_bench_change_pct": statistics.fmean(self.naive_changes) if self.naive_changes else math.nan,
            "methods": {m: {**t.summary(), "decisions": t.decisions} for m, t in self.tallies.items()},
        }


def policies_for(smoke: bool) -> dict[str, Policy]:
    """The loop's real policy (kopt.toml defaults), and the same with every block a sample."""
    policy = Policy.from_config(DecideConfig())
    if smoke:
        policy = dataclasses.replace(policy, max_rounds=min(policy.max_rounds, 4))
    return {"kopt": policy, "kopt pooled": dataclasses.replace(policy, pool_blocks=True)}


def run_duration(
    backend: Backend,
    target: float,
    size: dict[str, Any],
    args: argparse.Namespace,
    policies: dict[str, Policy],
    units_per_us: float,
    prog: Progress,
    deadline: Callable[[float], float],
) -> dict[str, Any]:
    """Every condition of one duration: calibration, truth before, interleaved decisions until
    --decisions or the deadline, truth after."""
    n = size["n"]
    bytes_pcts = args.bytes_slowdowns if target >= args.bytes_min_us else []
    n_of = {s: max(n + BLOCK, int(round(n * (1 + s / 100) / BLOCK)) * BLOCK) for s in bytes_pcts}
    bufs = backend.buffers(max([n, *n_of.values()]))
    best = backend.arm("A", bufs, n, 0)
    prog.phase = f"measuring the ~{target:g} µs kernel"
    per_launch, _ = backend.per_launch_us(best, args.block_us, 1 if backend.smoke else 1000)
    reps = 1 if backend.smoke else max(1, round(args.block_us / per_launch))
    best_timer = backend.timer(best, reps)
    do_bench_us = statistics.median(backend.reading(best) for _ in range(3))
    programs = -(-n // BLOCK)
    waves = max(1, -(-programs // (backend.sms() * 16)))
    prog.log(
        f"~{target:g} µs: n = {n}, {per_launch:.2f} µs per launch in a graph, do_bench {do_bench_us:.2f} µs, "
        f"{reps} launches per block, {programs} programs ({waves} wave(s) at 16 per SM)"
    )

    twin = backend.arm("A'", bufs, n, 0)  # the identical tree: same kernel, same buffers, its own graph
    conds = [Condition("A/A", "aa", 0.0, twin, backend.timer(twin, reps))]
    for s in args.slowdowns:
        prog.phase = f"calibrating the +{s:g}% delay at ~{target:g} µs"
        guess = round(s / 100 * per_launch / waves * units_per_us)
        delay, history = calibrate_delay(backend, bufs, n, reps, best_timer, s, guess, args)
        prog.log(
            f"~{target:g} µs +{s:g}%: delay {delay} (tried " + ", ".join(f"{d}: {m:+.2f}%" for d, m in history) + ")"
        )
        cand = backend.arm(f"+{s:g}% delay", bufs, n, delay)
        conds.append(Condition(f"+{s:g}% delay", "delay", s, cand, backend.timer(cand, reps), history))
    for s in bytes_pcts:
        cand = backend.arm(f"+{s:g}% bytes", bufs, n_of[s], 0)
        conds.append(Condition(f"+{s:g}% bytes", "bytes", s, cand, backend.timer(cand, reps)))

    truth_pairs = (4, 40) if backend.smoke else (20, 100_000)
    prog.phase = f"measuring the truth at ~{target:g} µs (before)"
    for c in conds:
        logs = measure_pairs(best_timer, c.cand_timer, args.truth_s / 2, *truth_pairs)
        c.truth_logs += logs
        c.truth_before = pct(statistics.fmean(logs))
    prog.phase = f"deciding at ~{target:g} µs"
    end_by = deadline(prog.elapsed())
    done = 0
    for i in range(args.decisions):
        if prog.elapsed() > end_by:
            prog.log(f"note: ~{target:g} µs stopped at {i} decisions per condition (time budget)")
            break
        for c in conds:
            kopt_decision(best_timer, c.cand_timer, policies, args.pairs_per_look, c.tallies, c.decision_logs)
            c.naive_changes.append(
                naive_decision(lambda: backend.reading(best), lambda c=c: backend.reading(c.cand), c.tallies)
            )
        done = i + 1
        if done % 10 == 0:
            prog.log(f"~{target:g} µs: {done}/{args.decisions} decisions per condition")
    prog.phase = f"measuring the truth at ~{target:g} µs (after)"
    for c in conds:
        logs = measure_pairs(best_timer, c.cand_timer, args.truth_s / 2, *truth_pairs)
        c.truth_logs += logs
        c.truth_after = pct(statistics.fmean(logs))
    return {
        "target_us": target,
        "n": n,
        "per_launch_us": per_launch,
        "sizing_probes": size.get("probes", []),
        "do_bench_us": do_bench_us,
        "reps_per_block": reps,
        "programs": programs,
        "waves": waves,
        "decisions_per_condition": done,
        "conditions": {c.name: c.report() for c in conds},
    }


Opener = Callable[[bool], tuple[Backend, dict[str, Any]]]


def run(
    args: argparse.Namespace, prog: Progress, report: dict[str, Any], opener: Opener = open_backend
) -> dict[str, Any]:
    """The whole experiment; fills `report` as it goes (a failure still leaves what was done)."""
    prog.phase = "importing torch and triton"
    backend, info = opener(args.smoke)
    report.update(
        {
            "date": datetime.date.today().isoformat(),
            "command": " ".join(["python -m experiments.decision_h100", *args.argv]),
            **info,
            "python": platform.python_version(),
            "pairs_per_look": args.pairs_per_look,
            "block_us": args.block_us,
            "budget_s": args.budget_s,
            "durations": {},
        }
    )
    policies = policies_for(args.smoke)
    report["policy"] = {k: dataclasses.asdict(p) for k, p in policies.items()}
    prog.phase = "checking the in-kernel delay"
    kind, units_per_us = choose_delay(backend, prog)
    report.update({"delay": kind, "delay_units_per_us": units_per_us})
    prog.phase = "sizing the kernels"
    sizes = size_for_durations(backend, args.durations_us, args.block_us, prog, 1 << 29)
    weights = {
        t: 1 + len(args.slowdowns) + (len(args.bytes_slowdowns) if t >= args.bytes_min_us else 0)
        for t in args.durations_us
    }
    for k, target in enumerate(args.durations_us):
        setup_started = prog.elapsed()
        later = args.durations_us[k:]

        def deadline(
            now: float, target: float = target, later: list[float] = later, setup_started: float = setup_started
        ) -> float:
            # this duration's share of what is left, keeping its own and later setups' time
            setup = max(now - setup_started, 1.0)
            left = args.budget_s - now - setup * len(later)
            return now + max(0.0, left) * weights[target] / sum(weights[t] for t in later)

        report["durations"][f"{target:g}"] = run_duration(
            backend, target, sizes[target], args, policies, units_per_us, prog, deadline
        )
        backend.release()
    report["seconds"] = prog.elapsed()
    return report


# --- the tables -------------------------------------------------------------------------------


def _p(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def _s(x: float, digits: int = 2) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.{digits}f}%"


def markdown(report: dict[str, Any]) -> str:
    """The run's tables: kernels, truths, every (duration, condition, method), a summary."""
    pol = report.get("policy", {}).get("kopt", {})
    lines = [
        f"{report.get('device')}, {report.get('date')}, torch {report.get('torch')} (CUDA {report.get('cuda')}), "
        f"triton {report.get('triton')}; {report.get('seconds', math.nan):.0f} s; delay: {report.get('delay')}; "
        f"kopt policy: Policy.from_config(DecideConfig()) (confidence {pol.get('confidence')}, min_effect "
        f"{pol.get('min_effect_pct')}%, looks {pol.get('min_rounds')}-{pol.get('max_rounds')}), "
        f"{report.get('pairs_per_look')} block pairs per look",
        "",
        "Kernels (per launch: one CUDA-graph replay of k launches / k, L2 flushed before it, median of 7):",
        "",
        "| target | n | µs per launch | do_bench µs | launches per block | programs (waves) | decisions per condition |",
        "|---|---|---|---|---|---|---|",
    ]
    durs = report.get("durations", {})
    for d in durs.values():
        lines.append(
            f"| ~{d['target_us']:g} µs | {d['n']} | {d['per_launch_us']:.2f} | {d['do_bench_us']:.2f} "
            f"| {d['reps_per_block']} | {d['programs']} ({d['waves']}) | {d['decisions_per_condition']} |"
        )
    lines += [
        "",
        "True change of each candidate (interleaved block pairs, half before and half after its "
        "decisions; 99% interval over 20 batch means), against what kopt's decision blocks and "
        "do_bench's first reading pairs saw on average:",
        "",
        "| target | condition | delay | true change [99%] | before / after | kopt's blocks | do_bench |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in durs.values():
        for name, c in d["conditions"].items():
            t = c["truth"]
            lines.append(
                f"| ~{d['target_us']:g} µs | {name} | {c['delay']} | {_s(t['pct'])} [{_s(t['lo'])}, "
                f"{_s(t['hi'])}] | {_s(t['before_pct'])} / {_s(t['after_pct'])} "
                f"| {_s(c['during_decisions_pct'])} | {_s(c['do_bench_change_pct'])} |"
            )
    lines += [
        "",
        'Decisions (no candidate is faster: every keep is a false keep; on A/B rows "regression" is the power):',
        "",
        "| target | condition | method | n | keep | regression | tie | review | looks | GPU-ms | wall-ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in durs.values():
        for name, c in d["conditions"].items():
            for m, s in c["methods"].items():
                lines.append(
                    f"| ~{d['target_us']:g} µs | {name} ({_s(c['truth']['pct'])}) | {m} | {s['n']} "
                    f"| {_p(s['keep'])} | {_p(s['regression'])} | {_p(s['tie'])} | {_p(s['borderline'])} "
                    f"| {s['mean_looks']:.1f} | {s['mean_gpu_s'] * 1e3:.1f} | {s['mean_wall_s'] * 1e3:.1f} |"
                )
    ab_names: list[str] = []
    for d in durs.values():
        ab_names += [k for k in d["conditions"] if k != "A/A" and k not in ab_names]
    lines += [
        "",
        "Summary: false keeps (95% upper limit), power (regressions caught) per true slowdown, "
        "mean GPU-ms per decision (kopt: its timed blocks; do_bench: the wall time of its calls):",
        "",
        "| target | method | A/A false keeps | A/B false keeps | "
        + " | ".join(f"power {k}" for k in ab_names)
        + " | GPU-ms |",
        "|---|---|---|---|" + "---|" * len(ab_names) + "---|",
    ]
    for d in durs.values():
        conds = d["conditions"]
        for m in METHODS:
            aa = conds["A/A"]["methods"][m]
            ab = [c["methods"][m] for k, c in conds.items() if k != "A/A"]
            k_ab, n_ab = sum(s["counts"]["keep"] for s in ab), sum(s["n"] for s in ab)
            power = [_p(conds[k]["methods"][m]["regression"]) if k in conds else "—" for k in ab_names]
            gpu = statistics.fmean(c["methods"][m]["mean_gpu_s"] for c in conds.values()) * 1e3
            lines.append(
                f"| ~{d['target_us']:g} µs | {m} | {aa['counts']['keep']}/{aa['n']} (≤ {_p(aa['keep_upper95'])}) "
                f"| {k_ab}/{n_ab} (≤ {_p(upper_bound(k_ab, n_ab))}) | " + " | ".join(power) + f" | {gpu:.1f} |"
            )
    return "\n".join(lines) + "\n"


# --- command line -----------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m experiments.decision_h100", description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--out", default="decision_h100.json", help="JSON with every decision (tables: same name, .md)")
    ap.add_argument("--decisions", type=int, default=50, help="decisions per duration and condition (default 50)")
    ap.add_argument("--durations-us", default="5,10,700", help="target µs per launch (default 5,10,700)")
    ap.add_argument("--slowdowns", default="1,2", help="calibrated in-kernel delays, %% (default 1,2)")
    ap.add_argument("--bytes-slowdowns", default="1,2", help="extra bytes, %%, where bandwidth-bound (default 1,2)")
    ap.add_argument(
        "--bytes-min-us",
        type=float,
        default=100.0,
        help="bytes conditions only at targets >= this many µs (default 100)",
    )
    ap.add_argument("--pairs-per-look", type=int, default=8, help="ABBA block pairs per look (default 8)")
    ap.add_argument("--block-us", type=float, default=250.0, help="GPU time of one block (default 250 µs)")
    ap.add_argument("--truth-s", type=float, default=1.0, help="GPU s per condition measuring its truth (default 1)")
    ap.add_argument("--calib-s", type=float, default=0.1, help="GPU s per calibration step (default 0.1)")
    ap.add_argument("--calib-iters", type=int, default=8, help="calibration steps at most (default 8)")
    ap.add_argument("--calib-tol", type=float, default=0.15, help="calibration within this share of the target")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=400.0,
        help="wall seconds for the whole run; decisions stop early to keep it (default 400)",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="no GPU: Triton's interpreter, tiny sizes, CPU timers, at most 4 looks of 2 pairs",
    )
    a = ap.parse_args(argv)
    a.argv = list(argv)

    def floats(opt: str, text: str, low: float) -> list[float]:
        try:
            vals = [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            ap.error(f"{opt} must be comma-separated numbers, not {text!r}")
        if any(not math.isfinite(v) or v <= low for v in vals):
            ap.error(f"{opt} values must be > {low:g}, not {text!r}")
        return vals

    a.durations_us = floats("--durations-us", a.durations_us, 0)
    a.slowdowns = floats("--slowdowns", a.slowdowns, 0)
    a.bytes_slowdowns = floats("--bytes-slowdowns", a.bytes_slowdowns, 0)
    if not a.durations_us:
        ap.error("--durations-us needs at least one duration")
    for name in ("decisions", "pairs_per_look", "calib_iters"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("block_us", "truth_s", "calib_s", "calib_tol", "budget_s"):
        if not getattr(a, name) > 0:
            ap.error(f"--{name.replace('_', '-')} must be > 0")
    if a.smoke:
        a.pairs_per_look = min(a.pairs_per_look, 2)
        a.calib_iters = min(a.calib_iters, 2)
        a.truth_s = min(a.truth_s, 0.01)
        a.calib_s = min(a.calib_s, 0.005)
    return a


def main(argv: list[str] | None = None, opener: Opener = open_backend) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.smoke:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            print(
                "decision_h100: --smoke must set TRITON_INTERPRET=1 before triton is imported; "
                "run it as its own process",
                file=sys.stderr,
            )
            return 2
        os.environ["TRITON_INTERPRET"] = "1"
    out = Path(args.out)
    prog = Progress()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"decision_h100: cannot create the folder of --out {out}: {exc}", file=sys.stderr)
        return 2
    report: dict[str, Any] = {}
    failed = None
    try:
        run(args, prog, report, opener)
    except (Exception, KeyboardInterrupt) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        failed = f"failed while {prog.phase}: {type(exc).__name__}: {first}"
        report["failed"] = failed
        try:
            out.with_suffix(".traceback.txt").write_text(traceback.format_exc())
        except OSError:
            pass
    report.setdefault("seconds", prog.elapsed())
    text = ""
    if report.get("durations"):
        try:
            text = markdown(report)
        except Exception as exc:  # the JSON still carries every number
            print(f"decision_h100: could not format the tables: {type(exc).__name__}: {exc}", file=sys.stderr)
    try:
        out.write_text(json.dumps({**report, "markdown": text}, indent=1, default=str))
        if text:
            out.with_suffix(".md").write_text(text)
        print(f"wrote {out}" + (f" and {out.with_suffix('.md')}" if text else ""), file=sys.stderr)
    except OSError as exc:
        print(f"decision_h100: could not write {out}: {exc}", file=sys.stderr)
    if failed:
        print(f"decision_h100: {failed} (traceback in {out.with_suffix('.traceback.txt')})", file=sys.stderr)
    sys.stderr.flush()
    if text:
        print(text, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
