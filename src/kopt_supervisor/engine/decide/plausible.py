"""Plausibility per config: numbers too good, too regular or too cheap to be true (DESIGN §12).

The bench's numbers are the candidate's own claim when the candidate runs in the bench's
process. These pure checks read the paired samples (and, where the loop has them, each
bench process's wall time) for signs that the claim is not a measurement:

- `too_fast`: a class, or any single config, more than `suspicious_speedup` times faster.
  Per config, not only per class: one config 10x faster hides in its class as 2.2x.
- `below_floor`: a config whose typical candidate value beats its roofline floor.
- `mean_not_faster`: a class whose metric (a median over timed calls, or an estimate over
  blocks that leaves outliers out) shows a gain that the mean over the same calls (the
  bench's `<metric>_mean`, or the total over a look's blocks) does not show in any look:
  a few expensive calls among many cheap ones bend a median, never a total.
- `last_block_not_faster`: a class whose metric shows a gain that the look's last timed
  block (the bench's `<metric>_last`: the block that computes fresh inputs into NaN-filled
  outputs, the only one kopt's audit and the look's commitment check), set against each
  side's other blocks, does not show by half, in any look or on their mean: the work done
  only where it is checked, skipped in the blocks the median is made of.
- `repeated_values`: a config whose candidate values are bit-identical over >= 3 rounds
  while the best tree's vary (a forged or replayed CSV: real timings do not repeat to the
  last digit). Guarded against coarse timers and quantised medians, see `repeated_values`.
- `wall_time_unexplained`: the reported time fell by more than the bench process's wall
  time can explain (work moved outside the timed region: lazy results, work at import or
  at exit, results cached across calls).

Each returns an `Implausible` (a flag of `model.FLAGS`, a one-line reason naming the
configs, and what the finding does: `action`) or None; `check` runs them all. A speed that
is only surprising (the first three) escalates: a keep stands only once the stronger checks
agree (`verdict.evaluate` flags it needs_stronger_checks). A sign of a forged number
(`repeated_values`, `wall_time_unexplained` with timed seconds) sends it to review, and so
does `last_block_not_faster`: the stronger checks share its blind spot (the work really is
skipped, so the OS's accounting shows the saving; the profiler's pass calls the function
outside the timed blocks; the audit reads the last block), so they would agree.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from kopt_supervisor.engine.decide import geomean, mean, median, stdev, t_quantile
from kopt_supervisor.engine.decide.estimate import ClassResult, Pair, Policy

MAX_NAMED = 4
"""Configs named in one reason; the rest are counted."""
REPEAT_MIN_ROUNDS = 3
RESOLUTION_FACTOR = 100.0
"""A config's values must resolve the best tree's own round-to-round spread into at least
this many steps for a repeat to count: with a timer (or printed format) that coarse, three
equal readings of a real measurement happen about (1 / (2 sqrt(pi) * factor))^2 ~ 1e-5 of
the time per config; with a coarser one (a µs CPU timer on a 5 µs kernel) repeats are
normal and prove nothing."""
WALL_MATERIAL = 0.05
"""The timed saving must be at least this share of the best tree's process wall time
before the wall-time check says anything (below it, the wall time's own noise hides it)."""
WALL_EXPLAINED = 0.5
"""The wall time must fall by at least this share of the claimed timed saving."""
WALL_REPORTED_DROP = 0.20
"""Without timed seconds: the candidate's reported total must fall by this much..."""
WALL_NO_DROP = 0.01
"""...while its wall time provably fell by less than this share, for a note."""
WALL_CONFIDENCE = 0.99
"""One-sided confidence of the wall-time bounds."""
MEAN_SHARE = 0.5
"""`mean_not_faster`: the mean (or a look's total) must show at least this share of the
gain the metric claims (in log terms) in at least one look."""
MEAN_MIN_LOOKS = 2
"""...judged only with the means of at least this many looks."""
LAST_SHARE = 0.5
"""`last_block_not_faster`: the last timed block (the candidate's against best's, measured
against each side's own other blocks) must show at least this share of the gain the metric
claims (in log terms) in at least one look, and its mean over the looks must not be provably
short of it (LAST_CONFIDENCE). A
candidate whose timed blocks do a share f of its real work, but all of it in the last one,
claims its real gain r as f x r; this lets it claim at most r x r (twice its real gain in log
terms), and no gain when it has none, beyond one block's noise."""
LAST_MIN_LOOKS = 3
"""...judged only with the last blocks of at least this many looks (the default
[decide].min_rounds): one block is noisier than a median over blocks (on the 2-core CPU
machine under load, single blocks of the interpreted RMSNorm 3-40% from their look's
median), and the finding sends a keep to review, not to the stronger checks."""
LAST_CONFIDENCE = 0.99
"""...or when the mean over the looks shows less than LAST_SHARE at this one-sided confidence."""

REVIEW, ESCALATE, NOTE = "review", "escalate", "note"
"""What a finding does to a keep: review (the engineer decides), escalate (the keep stands
once the stronger checks agree), note (the reason says so; nothing else changes)."""
ACTIONS = (REVIEW, ESCALATE, NOTE)


@dataclass(frozen=True)
class Implausible:
    """One sign that the candidate's numbers are not a measurement of faster code."""

    flag: str
    """suspicious_speedup | faster_than_floor | mean_not_faster | last_block_not_faster |
    repeated_values | wall_time_unexplained"""
    reason: str
    """One line naming the configs."""
    configs: tuple[str, ...]
    cls: str
    """The class of the first config named (the verdict's focus)."""
    action: str = REVIEW
    """One of ACTIONS: what the finding does to a keep."""


@dataclass(frozen=True)
class BenchRun:
    """One process-level bench run, for the wall-time check."""

    side: str
    """"best" or "cand"."""
    round: int
    wall_s: float
    """The bench process's wall time (start to exit)."""
    timed_s: float | None = None
    """Seconds the bench says its timed calls took in this run (the sum over configs of the
    metric times the number of timed calls, in seconds), when the bench reports the count."""


def config_speedups(pairs: Iterable[Pair], policy: Policy) -> dict[str, float]:
    """config -> how many times faster the candidate is (1 / geometric mean of its cost
    ratios over the unflagged rounds; every round when all were flagged)."""
    by_config: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_config[p.config].append(p)
    out = {}
    for config, ps in by_config.items():
        use = [p for p in ps if not p.flagged] or ps
        ratio = geomean(policy.cost_ratio(p.best, p.cand) for p in use)
        if ratio is not None:
            out[config] = 1.0 / ratio
    return out


def too_fast(results: Sequence[ClassResult], pairs: Sequence[Pair], policy: Policy) -> Implausible | None:
    """Any class, or any single config, more than suspicious_speedup times faster."""
    limit = policy.suspicious_speedup
    cls_of = {p.config: p.cls for p in pairs}
    fast = sorted(((s, c) for c, s in config_speedups(pairs, policy).items() if s > limit), reverse=True)
    classes = [r for r in results if r.ratio > 0 and 1.0 / r.ratio > limit]
    if not fast and not classes:
        return None
    if fast:
        speed, first = fast[0]
        in_class = {r.cls: r for r in results}.get(cls_of[first])
        shown = f" (its class {cls_of[first]} {1.0 / in_class.ratio:.1f}x)" if in_class and in_class.ratio > 0 else ""
        others = _name([f"{c} {s:.1f}x" for s, c in fast[1:]], MAX_NAMED - 1)
        reason = (
            f"config {first} is {speed:.1f}x faster, more than the suspicious_speedup of {limit:g}x"
            f"{shown}{'; also ' + others if others else ''}: check that it computes the same thing"
        )
        return Implausible("suspicious_speedup", reason, tuple(c for _, c in fast), cls_of[first], ESCALATE)
    r = classes[0]
    return Implausible(
        "suspicious_speedup",
        f"{r.cls} is {1.0 / r.ratio:.1f}x faster, more than the suspicious_speedup of {limit:g}x: "
        "check that it computes the same thing",
        (),
        r.cls,
        ESCALATE,
    )


def below_floor(pairs: Sequence[Pair], policy: Policy, floors: dict[str, float]) -> Implausible | None:
    """Configs whose median candidate value (unflagged rounds) beats the roofline floor
    (for a throughput, exceeds the ceiling)."""
    values: dict[str, list[float]] = defaultdict(list)
    cls_of: dict[str, str] = {}
    for p in pairs:
        if p.config in floors and not p.flagged:
            values[p.config].append(p.cand)
            cls_of[p.config] = p.cls
    beats = []
    for config, vs in sorted(values.items()):
        typical = median(vs)
        floor = floors[config]
        if typical is not None and (typical < floor if policy.direction == "min" else typical > floor):
            beats.append((config, typical, floor))
    if not beats:
        return None
    named = _name([f"{c} measures {v:.4g} against a roofline floor of {f:.4g}" for c, v, f in beats])
    return Implausible(
        "faster_than_floor",
        f"{named}: faster than the hardware allows, check the measurement",
        tuple(c for c, _, _ in beats),
        cls_of[beats[0][0]],
        ESCALATE,
    )


def mean_not_faster(results: Sequence[ClassResult], pairs: Sequence[Pair], policy: Policy) -> Implausible | None:
    """Classes whose metric shows a gain that the mean over the same timed calls does not.

    A look's metric is a median over timed calls (or, for a look of several blocks, an
    estimate over blocks that leaves outlier blocks out and averages logs): a candidate whose calls
    are mostly cheap with a few expensive ones bends it, while the time its calls take in
    all stays. Per config and look, the cost ratio of the means: the bench's own
    (`Pair.best_mean` / `Pair.cand_mean`) for a look's single pair, or the totals over the
    look's blocks of the config (sum of cand / sum of best); where best's rows report a mean
    and the candidate's do not, no gain. Per class and look, the mean of their logs. A class
    the decision calls improved whose means show less than MEAN_SHARE of the claimed gain
    (log terms) in every one of its looks (at least MEAN_MIN_LOOKS of them) is named. Every
    look, not their average: an honest gain with noisy means falls short of half of it in
    one look now and then, rarely in all; a bent median falls short always.

    Nothing to compare without means or blocks, or for a throughput (a throughput's mean
    over calls is not the time they took).
    """
    hits = [
        (cls, claim, ls)
        for cls, (claim, ls) in _looks(results, pairs, policy, _mean_ratio).items()
        if len(ls) >= MEAN_MIN_LOOKS and all(m > MEAN_SHARE * claim for m in ls)
    ]
    if not hits:
        return None
    named = _name(
        [
            f"{c} {_signed(claim)} by its metric but at best {_signed(min(ls), 'mean')} by the mean over the same "
            f"calls (over {len(ls)} looks)"
            for c, claim, ls in hits
        ]
    )
    return Implausible(
        "mean_not_faster",
        f"{named}: a few expensive calls among many cheap ones bend a median, never the total",
        (),
        hits[0][0],
        ESCALATE,
    )


def last_block_not_faster(results: Sequence[ClassResult], pairs: Sequence[Pair], policy: Policy) -> Implausible | None:
    """Classes whose metric shows a gain that the last timed block of the looks does not.

    The served harness refreshes every timed buffer set's inputs and fills its outputs with
    NaN before a look's last timed block; kopt's audit and the look's commitment read what
    that block wrote. So that block cannot be cheap: it computes fresh inputs into outputs
    that are checked. Candidate code that does the work only there (computing when it finds
    NaN in its output and returning at once otherwise, or counting its calls to find the
    block) and skips it in the other blocks bends the median over blocks without an output
    kopt reads being wrong, and the work it skips really is skipped: the OS's accounting
    shows the saving, and the profiler's pass, outside the timed blocks, sees what the
    function does there.

    The signature is the last block's excess: per config and look, how much dearer the
    candidate's last block is than its metric, against the same for best's
    (`(cand_last / cand) / (best_last / best)`, `Pair.cand_last` and `best_last` being the
    bench's `<metric>_last`; where best's rows report one and the candidate's do not, no
    gain); per class and look, the mean of its logs. Honest code keeps best's proportions
    (the excess is one, up to noise); code that skips work outside the audited block has an
    excess as large as the share of its claim it skipped. A class the decision calls improved
    is named, and the keep goes to review, when from LAST_MIN_LOOKS looks on the excess
    exceeds (1 - LAST_SHARE) of the claimed gain (log terms: the last block shows less than
    LAST_SHARE of it) in every look, or on the mean over the looks at LAST_CONFIDENCE (a
    one-sided t bound from the looks' own spread). Each side's last block and metric come
    from the same process within a second or two, so a loaded machine's slowdowns, which
    move a whole look, largely cancel in the excess: on the 2-core CPU machine under the
    suite's load the last block alone varied 0.12-0.36 (log) from look to look, its excess
    0.08-0.09 (tests/kernels/test_last_block_hostile.py).

    What it bounds: partial work in the cheap blocks claims at most twice the real gain (log
    terms, LAST_SHARE), and none without one, beyond the excess's noise. What it cannot see:
    a claim within that noise (a GPU's last block calls each set once: a 16 µs config's
    excess varies ~10% from look to look), decisions of fewer looks, benches that report no
    last block (a look of several blocks: none is audited), and a throughput.
    """
    hits = [
        (cls, claim, ls)
        for cls, (claim, ls) in _looks(results, pairs, policy, _last_excess).items()
        if len(ls) >= LAST_MIN_LOOKS
        and (all(e > _excess_limit(claim) for e in ls) or _bound_above(ls, _excess_limit(claim), LAST_CONFIDENCE))
    ]
    if not hits:
        return None
    named = _name(
        [
            f"{c} {_signed(claim)} by its metric but about {_signed(claim + mean(ls))} in the last timed block "
            f"(the mean of {len(ls)} looks; against its own other blocks that block is {_signed(mean(ls))} "
            f"dearer than best's, at least {_signed(min(ls))})"
            if all(math.isfinite(v) for v in ls)
            else f"{c} {_signed(claim)} by its metric but the candidate's rows report no last timed block "
            f"(over {len(ls)} looks)"
            for c, claim, ls in hits
        ]
    )
    return Implausible(
        "last_block_not_faster",
        f"{named}: the last block computes the outputs kopt audits; work done only there and skipped in "
        "the blocks before it bends the median",
        (),
        hits[0][0],
        REVIEW,
    )


def last_block_unsure(results: Sequence[ClassResult], pairs: Sequence[Pair], policy: Policy) -> list[str]:
    """Classes whose last blocks lean towards `last_block_not_faster` without proving it: from
    LAST_MIN_LOOKS looks on, the mean excess over the looks shows less than LAST_SHARE of the
    claimed gain while neither of the finding's tests holds. `verdict.evaluate` takes another
    look before such a keep while looks are left: one lucky last block (or a few, on a loaded
    machine) must not end a decision that more looks would send to review."""
    out = []
    for cls, (claim, ls) in _looks(results, pairs, policy, _last_excess).items():
        if len(ls) < LAST_MIN_LOOKS or not all(math.isfinite(e) for e in ls):
            continue
        limit = _excess_limit(claim)
        if mean(ls) > limit and not all(e > limit for e in ls) and not _bound_above(ls, limit, LAST_CONFIDENCE):
            out.append(cls)
    return out


def _excess_limit(claim: float) -> float:
    """The last-block excess (log) above which a look shows less than LAST_SHARE of `claim`."""
    return -(1 - LAST_SHARE) * claim


def _looks(
    results: Sequence[ClassResult],
    pairs: Sequence[Pair],
    policy: Policy,
    ratio: Callable[[Sequence[Pair]], float | None],
) -> dict[str, tuple[float, list[float]]]:
    """Per class the decision calls improved (a latency): its claimed log ratio, and per look
    (in order) the mean over its configs of log `ratio` (of a config's unflagged pairs in one
    look; None leaves the config out)."""
    if policy.direction != "min":
        return {}
    claimed = {r.cls: math.log(r.ratio) for r in results if r.verdict == "improved" and 0 < r.ratio < 1}
    cells: dict[tuple[str, int, str], list[Pair]] = defaultdict(list)
    for p in pairs:
        if p.cls in claimed and not p.flagged:
            cells[(p.cls, p.round, p.config)].append(p)
    looks: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (cls, look, _), ps in cells.items():
        r = ratio(ps)
        if r is not None:
            looks[cls][look].append(math.log(r))
    return {
        cls: (claimed[cls], [mean(v) for _, v in sorted(by_look.items())]) for cls, by_look in sorted(looks.items())
    }


def _bound_above(values: list[float], limit: float, confidence: float) -> bool:
    """The values' mean is above `limit` at `confidence` (one-sided t bound; False when the
    values are not all finite or are fewer than 2)."""
    if len(values) < 2 or not all(math.isfinite(v) for v in values):
        return False
    return mean(values) - t_quantile(confidence, len(values) - 1) * stdev(values) / math.sqrt(len(values)) > limit


def _mean_ratio(ps: Sequence[Pair]) -> float | None:
    """A config's cost ratio of the means in one look (see `mean_not_faster`), or None."""
    if len(ps) > 1:
        return sum(p.cand for p in ps) / sum(p.best for p in ps)
    return _side_ratio(ps[0].best_mean, ps[0].cand_mean)


def _last_excess(ps: Sequence[Pair]) -> float | None:
    """A config's last-block excess in one look (see `last_block_not_faster`): the cost ratio
    of the last timed blocks over the ratio of the metric; None when best's rows report no
    last block or a look has several pairs (blocks of one look: none is audited)."""
    if len(ps) != 1:
        return None
    last = _side_ratio(ps[0].best_last, ps[0].cand_last)
    if last is None or math.isinf(last):
        return last
    if not (ps[0].best > 0 and ps[0].cand > 0):
        return None
    return last / (ps[0].cand / ps[0].best)


def _side_ratio(best: float, cand: float) -> float | None:
    """cand / best of a figure each side's rows may report: None when best's does not; no
    gain (inf) when best's does and the candidate's does not."""
    if not (math.isfinite(best) and best > 0):
        return None
    return cand / best if math.isfinite(cand) and cand > 0 else math.inf


def _signed(log_ratio: float, what: str = "") -> str:
    """A log cost ratio as a signed percentage; inf: the candidate's rows report none of `what`."""
    if math.isfinite(log_ratio):
        return f"{(math.exp(log_ratio) - 1.0) * 100.0:+.1f}%"
    return f"none (no {what} in the candidate's rows)"


def repeated_values(pairs: Sequence[Pair], *, min_rounds: int = REPEAT_MIN_ROUNDS) -> Implausible | None:
    """Configs whose candidate values are bit-identical across >= min_rounds rounds while
    the best tree's values for the same config vary (a forged, cached or replayed CSV).

    Robust to coarse timers: a repeat counts only when the values' finest printed step
    (over both sides: what the bench's timer and format can resolve) is at most
    1/RESOLUTION_FACTOR of the best tree's own spread. A µs CPU timer on a 5 µs kernel, or a
    bench printing two digits, repeats honestly and is never flagged. When both sides
    repeat (a deterministic clock, a simulator) nothing is compared, so nothing is flagged.
    Robust to quantised medians too: where both sides' rows report their mean over the same
    calls (`Pair.best_mean`, `Pair.cand_mean`), a repeated median whose mean shows a measurement
    (`_mean_measured`) does not count. A median over a few block means, each a block's event
    time over its calls, takes values on the event clock's grid: on the H200 (2026-12-02) a real
    num_warps 1->2 step read 2.71563 us on a 2.7 us config in three looks (its means 2.71611,
    2.71504, 2.71661), and a 13.56 us config did the same, both sent to review as forged. A
    replayed row repeats its mean too.
    Limits: a forger who adds noise to the median, or to the mean column by as much as best's
    means vary over a hundred, or whose best side is as frozen, passes this check.
    """
    by_config: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        if not p.flagged:
            by_config[p.config].append(p)
    hits = []
    for config, ps in sorted(by_config.items()):
        if len({p.round for p in ps}) < min_rounds:
            continue
        cand = [p.cand for p in ps]
        best = [p.best for p in ps]
        if len(set(cand)) != 1 or len(set(best)) < 2:
            continue
        if _mean_measured(ps, min_rounds):
            continue  # the mean over the same calls shows a measurement: a quantised median
        step = min(_decimal_step(v) for v in cand + best)
        spread = stdev(best)
        if spread > 0 and step <= spread / RESOLUTION_FACTOR:
            hits.append((config, ps[0].cls, cand[0], len({p.round for p in ps})))
    if not hits:
        return None
    named = _name([f"{c} ({v:.6g} in all {n} rounds)" for c, _, v, n in hits])
    return Implausible(
        "repeated_values",
        f"the candidate's values repeat to the last digit while best's vary: {named}: "
        "a forged or cached result, not a measurement?",
        tuple(c for c, _, _, _ in hits),
        hits[0][1],
    )


def _mean_measured(ps: Sequence[Pair], min_rounds: int) -> bool:
    """A config's repeated candidate median whose mean over the same calls shows a measurement:
    both sides report a mean in every look (a column the candidate's rows alone carry is its
    own word; a hostile review, tests/security/test_review_s30_hostile.py), no `min_rounds`
    looks repeat the same (median, mean) row (a replay with one look edited), and the
    candidate's means spread at least best's means' spread / RESOLUTION_FACTOR (a mean moved by
    one ulp is no measurement; the H200's honest means spread a seventh of best's)."""
    cand = [p.cand_mean for p in ps]
    best = [p.best_mean for p in ps]
    if len(ps) < 2 or not all(math.isfinite(m) for m in cand + best):
        return False
    if max(Counter((p.cand, p.cand_mean) for p in ps).values()) >= min_rounds:
        return False
    spread = stdev(cand)
    return spread > 0 and spread >= stdev(best) / RESOLUTION_FACTOR


def wall_time_unexplained(runs: Sequence[BenchRun], pairs: Sequence[Pair], policy: Policy) -> Implausible | None:
    """The reported time fell by more than the bench process's wall time can explain.

    With timed seconds for every run (`BenchRun.timed_s`): per round, the claimed saving
    (best's timed seconds minus the candidate's) against the wall-time saving. When the
    claim is material (at least WALL_MATERIAL of best's wall time) and the wall time fell by
    less than WALL_EXPLAINED of it, the timed work went somewhere else: review. "Fell by
    less" is either bound: the mean saving's WALL_CONFIDENCE upper bound, or every round
    on its own (one slow process, a cold first run, widens the first bound so far that three
    rounds could prove nothing; an honest candidate falls short of half its claim in every
    round only when the wall time's noise exceeds that half every time). It can also be
    compilation or autotuning that grew by as much in the candidate's process; the engineer
    tells.

    Without timed seconds (the metric's share of the process is unknown): for a latency,
    when the candidate's reported total (the sum of its configs' metric) fell by
    WALL_REPORTED_DROP or more while its wall time provably fell by less than WALL_NO_DROP,
    a note (not a review): a bench whose timed calls are a small share of its process
    (imports, compilation, checks) shows the same honestly.

    Needs process-level rounds with both sides (a per-side wall time) and at least 3 of them.
    """
    by_round: dict[int, dict[str, BenchRun]] = defaultdict(dict)
    for run in runs:
        by_round[run.round][run.side] = run
    complete = {
        r: sides
        for r, sides in by_round.items()
        if {"best", "cand"} <= set(sides) and all(s.wall_s > 0 and math.isfinite(s.wall_s) for s in sides.values())
    }
    if len(complete) < 3:
        return None
    n = len(complete)
    t = t_quantile(WALL_CONFIDENCE, n - 1)
    if all(s.timed_s is not None for sides in complete.values() for s in sides.values()):
        claimed = [_f(sides["best"].timed_s) - _f(sides["cand"].timed_s) for sides in complete.values()]
        saved = [sides["best"].wall_s - sides["cand"].wall_s for sides in complete.values()]
        wall = mean([sides["best"].wall_s for sides in complete.values()])
        claim = mean(claimed)
        upper = mean(saved) + t * stdev(saved) / math.sqrt(n)
        every_round = all(s < WALL_EXPLAINED * c for s, c in zip(saved, claimed, strict=True))
        if claim >= WALL_MATERIAL * wall and (upper < WALL_EXPLAINED * claim or every_round):
            bound = (
                f"by at most {max(upper, 0.0):.3g} s ({WALL_CONFIDENCE:.0%})"
                if upper < WALL_EXPLAINED * claim
                else f"by less than half of it in each of its {n} runs (at most {max(max(saved), 0.0):.3g} s)"
            )
            return Implausible(
                "wall_time_unexplained",
                f"the candidate's timed calls took {claim:.3g} s less per run ({claim / wall:.0%} of best's "
                f"{wall:.3g} s process) but its process wall time fell {bound}: work outside the timed region "
                "(lazy results, work at import or exit, a cache), or compilation that grew as much",
                (),
                _focus(pairs),
            )
        return None
    if policy.direction != "min":
        return None
    totals: dict[int, dict[str, float]] = defaultdict(lambda: {"best": 0.0, "cand": 0.0})
    for p in pairs:
        if p.round in complete and not p.flagged:
            totals[p.round]["best"] += p.best
            totals[p.round]["cand"] += p.cand
    rounds = [r for r in complete if totals[r]["best"] > 0]
    if len(rounds) < 3:
        return None
    ratio = geomean([totals[r]["cand"] / totals[r]["best"] for r in rounds])
    reported_drop = 0.0 if ratio is None else 1.0 - ratio
    wall_drop = [1.0 - complete[r]["cand"].wall_s / complete[r]["best"].wall_s for r in rounds]
    upper = mean(wall_drop) + t_quantile(WALL_CONFIDENCE, len(rounds) - 1) * stdev(wall_drop) / math.sqrt(len(rounds))
    if reported_drop >= WALL_REPORTED_DROP and upper < WALL_NO_DROP:
        return Implausible(
            "wall_time_unexplained",
            f"the candidate's reported time fell {reported_drop:.0%} but its process wall time did not fall "
            f"(at most {max(upper, 0.0):.1%}, {WALL_CONFIDENCE:.0%}): work may have moved outside the timed "
            "region, or the timed calls are a small share of the process",
            (),
            _focus(pairs),
            NOTE,
        )
    return None


def check(
    results: Sequence[ClassResult],
    pairs: Sequence[Pair],
    policy: Policy,
    *,
    floors: dict[str, float] | None = None,
    runs: Sequence[BenchRun] = (),
) -> tuple[Implausible, ...]:
    """Every finding, review-worthy ones first."""
    found = [
        too_fast(results, pairs, policy),
        below_floor(pairs, policy, floors or {}),
        mean_not_faster(results, pairs, policy),
        last_block_not_faster(results, pairs, policy),
        repeated_values(pairs),
        wall_time_unexplained(runs, pairs, policy) if runs else None,
    ]
    return tuple(sorted((f for f in found if f is not None), key=lambda f: ACTIONS.index(f.action)))


def _f(x: float | None) -> float:
    return math.nan if x is None else x


def _focus(pairs: Sequence[Pair]) -> str:
    return sorted({p.cls for p in pairs})[0] if pairs else ""


def _name(items: list[str], at_most: int = MAX_NAMED) -> str:
    shown = ", ".join(items[:at_most])
    return shown + (f" (+{len(items) - at_most} more)" if len(items) > at_most else "")


def _decimal_step(v: float) -> float:
    """The finest decimal step v is printed with: 5.123 -> 0.001, 5.0 -> 1, 1.2e-05 -> 1e-06."""
    if not math.isfinite(v) or v == 0:
        return math.inf
    exponent = Decimal(repr(float(v))).normalize().as_tuple().exponent
    return 10.0**exponent if isinstance(exponent, int) else math.inf
