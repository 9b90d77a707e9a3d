"""Can a keep's confirmation conclude at MIN_LOOKS (2 looks)? Issue 26: "a keep's confirmation,
in seconds". Each rule is run look by look, as the loop runs `confirmation.judge`, over
simulated fresh looks with the noise measured on the H200, and over the H200's own A/A looks.

    .venv/bin/python -m experiments.confirmation_looks --h200-aa .device/run3/part2/part2.tgz
    .venv/bin/python -m experiments.confirmation_looks --draws 2000 --only H200
    .venv/bin/python -m experiments.confirmation_looks --max-looks --jobs 2 --h200-aa .device/run3/part2/part2.tgz

10,000 draws a case (the default) take ~25 min on this project's 2 shared cores; the figures
and what was chosen: docs/decision.md, "A clear gain at two looks". --h200-aa replays the A/A
looks of a wave-3 part2 run (comment-only candidates on the tuned RMSNorm, 12 x 12 looks).

--max-looks weighs MAX_LOOKS's rule instead (2026-11-29; docs/decision.md, "Half a claim at
MAX_LOOKS"): per case, A/A claims of 2-49% and true gains of 2-49% claimed as they are, the
share confirmed / refuted / undecided and the mean looks, for
- ml_before: MAX_LOOKS confirms on the estimate keeping half the claim alone (a class
  `judge` finds "half_in_noise" taken as "half_shown");
- ml_after: `judge` as it is (`confirmation.beyond_noise`: the six looks' interval at
  [decide].confidence, as one planned look, below no-change);
- ml_sd3: in place of beyond_noise, half the claim at least CONSISTENT_NOISE_MULTIPLE times the
  decision's look-to-look sd bound (`decided_sd`, as `consistent` asks);
- ml_ci98, ml_ci95: beyond_noise at 98% and 95%.
~12 min for 10,000 draws over 2 cores (--jobs 2).

--extend weighs the extension past MAX_LOOKS (2026-11-29; docs/decision.md, "More looks for
half a claim in noise"): per case (A/A claims of 2, 3, 10, 49%; true gains of 2, 3, 5, 10, 49%
claimed as they are), EXTENDED_MAX_LOOKS fresh looks a draw, the share confirmed (before
MAX_LOOKS + at it + after it) / refuted / undecided and the mean looks, for `point` (MAX_LOOKS
on the estimate alone, before 97b6dec), `97b6dec` (`judge(..., extend_to=MAX_LOOKS)`) and
`extend` (`judge` as it is). Its H200 table: each 12-look A/A iteration of a class, rotated by
an even offset, the claim's interval from the class's next iteration. --replay-run WS replays
a run's recorded confirmations (WS/run.db, WS/kopt.toml) through the three rules; one the
extension sends past its recorded looks is finished --resamples times from its own looks.

    .venv/bin/python -m experiments.confirmation_looks --extend --jobs 2 --h200-aa .device/run3/part2/part2.tgz \
        --replay-run /work/.device/3/part4/x/raw/ws_wave3-power

The noise (per config and look, on log(candidate/best)): lognormal with sd `sigma`; a part
`rho` of it shared by every config of the look (a side's clocks or a load spike move all its
configs); a first/second position effect per config that alternates with the look's order
(AB, BA, ...), its sign drawn once per confirmation ("shared") or per config ("mixed");
outliers: a whole look moved by +-30% (2% of looks) and single values by +-20% (1%).

The rules (each adds an early confirmation to the rule before issue 26, `before`, or replaces
its interval; refutation and the MAX_LOOKS rule stay `judge`'s: since 2026-11-29 MAX_LOOKS
asks `beyond_noise`, so the "in all" A/A figures of these tables are lower than the ones
docs/decision.md quotes for issue 26; the early ones are unchanged):

- before: `confirmation.judge` given the claim without its interval (so `consistent` never
  applies): the interval over looks, alpha spent over looks 2..6.
- after: `confirmation.judge` as it is: `before`, and a claimed class is also confirmed when
  `confirmation.consistent` (every config of every look keeps half a claim of at least 26%,
  that half at least 3 times the decision's look-to-look sd bound, `decided_sd`).
- cfg_t: the class's configs as replicates: per config the order-balanced mean of its looks,
  Student's t over configs (df K-1) at the upper side's share of alpha_k; below no-change and
  half the claim shown.
- cfg_pool: configs x looks as replicates: the spread of the configs around each look's mean
  (df L(K-1)), the balanced mean's standard error from it.
- cfg_half_every: cfg_t against half the claim (a one-sided test of "at least half the claimed
  gain is there"), and every look's class mean showing half the claim.
- min_cfg: every config's own interval over looks below no-change (the minimum over configs).
- half_1s: the interval over looks, one-sided at the whole alpha_k, below half the claim.
- front: alpha_k spent half at look 2, the rest over looks 3..6 in proportion to k (one
  interval for refuting and confirming, as today; the same total alpha).
- floor: every config in every look shows half the claim, for claims of at least 26% (half
  the gain at least 13%): valid only while the noise every config of a look shares stays
  below ~7% sd, an assumption about the target rather than something the looks show.
- floor_rel: floor, and half the claimed gain at least 3 times the look-to-look sd that the
  decision's interval allows with the normal quantile in place of its t (a looser bound than
  `decided_sd`'s, which knows the decision's alpha_k).

The claim's interval comes from a decision simulated with the same noise (6 looks, the gain
as claimed); `fresh_scale` makes the fresh looks noisier than the decision's (on the H200 the
fresh looks of one keep spread 7.5 times more than its decision's: 1.5% against 0.2%).

What each case reports: A/A (no change, a claim that is not there): the confirmations before
MAX_LOOKS (the early rule's own error) and in all; -49% claimed and true: confirmed at 2
looks, mean looks; -40% claimed, -10% true (half the claim not there): confirmed.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import math
import multiprocessing
import random
import re
import sys
import tarfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist

from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.decide import mean, stdev, t_quantile
from kopt_supervisor.engine.decide.confirmation import (
    CONFIRMING,
    CONSISTENT_NOISE_MULTIPLE,
    EXTENDED_MAX_LOOKS,
    MAX_LOOKS,
    MIN_LOOKS,
    Confirmation,
    beyond_noise,
    decided_sd,
    judge,
)
from kopt_supervisor.engine.decide.estimate import (
    ClassResult,
    Pair,
    Policy,
    Sample,
    Verdict,
    alpha_at_look,
    class_samples,
    estimate_class,
    interval,
)

POLICY = Policy.from_config(DecideConfig())
RULE = replace(POLICY, min_rounds=MIN_LOOKS, max_rounds=MAX_LOOKS)
"""The confirmation's alpha spending (what judge passes to estimate_class)."""
FLOOR_HALF = 0.14
"""floor: the smallest half-gain (in log) the rule takes early: 14% is two sds of 7% noise."""
LOOK_SPIKE = (0.02, 0.30)
VALUE_SPIKE = (0.01, 0.20)
AA_CLAIMS = (0.98, 0.95, 0.90, 0.80, 0.60, 0.51)
CASES: tuple[tuple[str, float, float], ...] = (
    *((f"AA{c:.2f}", c, 1.0) for c in AA_CLAIMS),
    ("T49", 0.51, 0.51),
    ("S40", 0.60, 0.90),
)


@dataclass(frozen=True)
class Scenario:
    name: str
    sigmas: tuple[float, ...]
    """Per config: the sd of its log ratio in a look."""
    rho: float
    """The part of each config's variance every config of the look shares."""
    pos: tuple[float, ...]
    """Per config: the position effect (added in AB looks, taken away in BA looks)."""
    pos_sign: str = "shared"
    """"shared": one random sign per confirmation; "mixed": one per config."""
    fresh_scale: float = 1.0
    """The fresh looks' noise (sigma and position) as a multiple of the decision's."""

    @property
    def k(self) -> int:
        return len(self.sigmas)


def _k(n: int, v: float) -> tuple[float, ...]:
    return (v,) * n


SCENARIOS = (
    Scenario("H200 naive start (K=2, 0.3%, rho .5)", _k(2, 0.003), 0.5, _k(2, 0.003), "mixed"),
    Scenario("H200 tuned narrow (K=2, 2.4/4.2%, pos 9.5/4.3%)", (0.024, 0.042), 0.42, (0.095, 0.043)),
    Scenario("K=3, 1%, rho .5, pos +-2%", _k(3, 0.01), 0.5, _k(3, 0.02), "mixed"),
    Scenario("K=3, 3%, rho .5, pos 7% shared", _k(3, 0.03), 0.5, _k(3, 0.07)),
    Scenario("K=3, 7%, rho .5, pos +-7%", _k(3, 0.07), 0.5, _k(3, 0.07), "mixed"),
    Scenario("K=6, 1%, rho .5, pos +-2%", _k(6, 0.01), 0.5, _k(6, 0.02), "mixed"),
    Scenario("K=6, 7%, rho .9, pos 7% shared", _k(6, 0.07), 0.9, _k(6, 0.07)),
    Scenario("K=6, 3%, rho .95 (one shared disturbance)", _k(6, 0.03), 0.95, _k(6, 0.0)),
    Scenario("beyond 7%: K=3, 15%, rho 1", _k(3, 0.15), 1.0, _k(3, 0.0)),
    Scenario("fresh 5x the decision's: K=3, 2% -> 10%, rho 1", _k(3, 0.02), 1.0, _k(3, 0.0), fresh_scale=5.0),
)


def draw(rng: random.Random, sc: Scenario, scale: float = 1.0, n: int = MAX_LOOKS) -> list[list[float]]:
    """n looks (MAX_LOOKS) x K configs of noise on log(candidate/best)."""
    signs = [rng.choice((-1.0, 1.0))] * sc.k if sc.pos_sign == "shared" else [rng.choice((-1.0, 1.0)) for _ in sc.pos]
    looks = []
    for look in range(n):
        order = 1.0 if look % 2 == 0 else -1.0
        shared = rng.gauss(0.0, 1.0)
        spike = rng.choice((-1.0, 1.0)) * LOOK_SPIKE[1] if rng.random() < LOOK_SPIKE[0] else 0.0
        row = []
        for c in range(sc.k):
            e = scale * sc.sigmas[c] * (math.sqrt(sc.rho) * shared + math.sqrt(1.0 - sc.rho) * rng.gauss(0.0, 1.0))
            e += scale * order * signs[c] * sc.pos[c] + spike
            if rng.random() < VALUE_SPIKE[0]:
                e += rng.choice((-1.0, 1.0)) * VALUE_SPIKE[1]
            row.append(e)
        looks.append(row)
    return looks


Z = NormalDist().inv_cdf(1.0 - (1.0 - POLICY.confidence) / 2.0)
DECISION_LOOKS = 6


def claim_of(ratio: float, decision: list[list[float]]) -> tuple[Verdict, Verdict, float]:
    """The keep's claim (the class improved at `ratio`, with the interval the decision's looks
    give around it), the same claim without an interval (`before`), and floor_rel's upper
    bound on the decision's look-to-look sd."""
    x = [[v + math.log(ratio) for v in row] for row in decision[:DECISION_LOOKS]]
    ps = pairs_of(x)
    r = estimate_class("c", ps, class_samples(ps, POLICY)["c"], POLICY, final=False)
    w = (math.log(r.hi) - math.log(r.lo)) / 2.0 if r.lo > 0 and math.isfinite(r.hi) else math.inf
    c = ClassResult(
        "c", DECISION_LOOKS, r.n, 100.0, 100.0 * ratio, ratio, ratio * math.exp(-w), ratio * math.exp(w), "improved"
    )
    bare = replace(c, lo=0.0, hi=math.inf)
    return Verdict("keep", "claim", (c,)), Verdict("keep", "claim", (bare,)), w * math.sqrt(r.n) / Z


def pairs_of(x: list[list[float]]) -> list[Pair]:
    return [
        Pair(f"c/{c}", "c", 100.0, 100.0 * math.exp(v), look, "AB" if look % 2 == 0 else "BA")
        for look, row in enumerate(x)
        for c, v in enumerate(row)
    ]


# ---------------------------------------------------------------- the candidate early rules
# Each: (looks so far, log of half the claim, alpha_k of this look) -> the claimed class shown.


def _balanced(values: Sequence[float]) -> float:
    """Order-balanced mean of per-look values (look 0 AB, look 1 BA, ...)."""
    ab, ba = values[0::2], values[1::2]
    return (mean(list(ab)) + mean(list(ba))) / 2.0 if ba else mean(list(ab))


def _inv(n_looks: int) -> float:
    na, nb = (n_looks + 1) // 2, n_looks // 2
    return (1.0 / na + 1.0 / nb) / 4.0


def cfg_t(x: list[list[float]], half: float, a: float, *, vs_half: bool = False, every_look: bool = False) -> bool:
    k = len(x[0])
    r = [_balanced([row[c] for row in x]) for c in range(k)]
    m = mean(r)
    if k < 2:
        return False
    bound = m + t_quantile(1.0 - a / 2.0, k - 1) * stdev(r) / math.sqrt(k)
    if every_look and any(mean(row) > half for row in x):
        return False
    return bound < half if vs_half else (bound < 0.0 and m <= half)


def cfg_pool(x: list[list[float]], half: float, a: float) -> bool:
    k, n = len(x[0]), len(x)
    df = n * (k - 1)
    if df < 1:
        return False
    ss = sum((v - mean(row)) ** 2 for row in x for v in row)
    m = _balanced([mean(row) for row in x])
    se = math.sqrt(ss / df * _inv(n) / k)
    return m + t_quantile(1.0 - a / 2.0, df) * se < 0.0 and m <= half


def min_cfg(x: list[list[float]], half: float, a: float) -> bool:
    m = _balanced([mean(row) for row in x])
    for c in range(len(x[0])):
        iv = interval(
            [Sample(look, 0, "AB" if look % 2 == 0 else "BA", row[c], False) for look, row in enumerate(x)], a
        )
        if not iv.hi < 0.0:
            return False
    return m <= half


def half_1s(x: list[list[float]], half: float, a: float) -> bool:
    iv = interval(
        [Sample(look, 0, "AB" if look % 2 == 0 else "BA", mean(row), False) for look, row in enumerate(x)], 2 * a
    )
    return iv.hi < half


def floor(x: list[list[float]], half: float, a: float) -> bool:
    return -half >= FLOOR_HALF and all(v <= half for row in x for v in row)


REL_MULTIPLE = 3.0


EARLY: dict[str, Callable[[list[list[float]], float, float], bool]] = {
    "cfg_t": cfg_t,
    "cfg_pool": cfg_pool,
    "cfg_half_every": lambda x, h, a: cfg_t(x, h, a, vs_half=True, every_look=True),
    "min_cfg": min_cfg,
    "half_1s": half_1s,
    "floor": floor,
}
RULES = ("before", "after", *EARLY, "floor_rel", "front")


def front_alpha(k: int, final: bool) -> float:
    """alpha spent half at look 2, the rest in proportion to k over looks 3..6."""
    alpha = 1.0 - POLICY.confidence
    weights = {2: 0.5, **{j: 0.5 * j / 18.0 for j in range(3, 7)}}
    return alpha * (sum(w for j, w in weights.items() if j >= k) if final else weights[k])


def front(x: list[list[float]], half: float, final: bool) -> str:
    """The rule of today for one claimed class, with front_alpha."""
    iv = interval(
        [Sample(look, 0, "AB" if look % 2 == 0 else "BA", mean(row), False) for look, row in enumerate(x)],
        front_alpha(len(x), final),
    )
    if iv.lo > half:
        return "refuted"
    if final:
        return "confirmed" if iv.mean <= half else "undecided"
    return "confirmed" if iv.hi < 0.0 and iv.mean <= half else "looking"


def outcomes(x: list[list[float]], claim: float, decision: list[list[float]]) -> dict[str, tuple[str, int]]:
    """Each rule's (outcome, looks), look by look over the fresh looks `x` (the truth in them),
    the claim's interval from the `decision`'s looks (noise only: the claim is added)."""
    keep, bare, sd_upper = claim_of(claim, decision)
    half = math.log(1.0 - (1.0 - claim) / 2.0)
    pairs = pairs_of(x)
    done: dict[str, tuple[str, int]] = {}
    for n in range(MIN_LOOKS, MAX_LOOKS + 1):
        final = n == MAX_LOOKS
        looks = [p for p in pairs if p.round < n]
        before = judge(looks, bare, POLICY, extend_to=MAX_LOOKS).outcome
        a = alpha_at_look(n, RULE, final=final)
        for rule in RULES:
            if rule in done:
                continue
            if rule == "front":
                out = front(x[:n], half, final)
            elif rule == "after":
                out = judge(looks, keep, POLICY, extend_to=MAX_LOOKS).outcome
            elif rule == "before" or before != "looking":
                out = before
            elif rule == "floor_rel":
                ok = floor(x[:n], half, a) and -half >= REL_MULTIPLE * sd_upper
                out = "confirmed" if ok else "looking"
            else:
                out = "confirmed" if EARLY[rule](x[:n], half, a) else "looking"
            if out != "looking":
                done[rule] = (out, n)
    return done


def simulate(sc: Scenario, draws: int, seed: int) -> dict[str, dict[str, dict[str, float]]]:
    """rule -> case -> figures."""
    rng = random.Random(f"{seed}/{sc.name}")
    counts: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for _ in range(draws):
        decision = draw(rng, sc)
        noise = draw(rng, sc, sc.fresh_scale)
        for case, claim, truth in CASES:
            x = [[v + math.log(truth) for v in row] for row in noise]
            for rule, (out, n) in outcomes(x, claim, decision).items():
                cell = counts[rule][case]
                if out == "confirmed":
                    cell["confirmed"] += 1
                    cell["early"] += n < MAX_LOOKS
                    cell["at2"] += n == MIN_LOOKS
                    cell["looks"] += n
    return {
        rule: {
            case: {
                "confirmed": counts[rule][case]["confirmed"] / draws,
                "early": counts[rule][case]["early"] / draws,
                "at2": counts[rule][case]["at2"] / draws,
                "looks": counts[rule][case]["looks"] / max(1.0, counts[rule][case]["confirmed"]),
            }
            for case, _, _ in CASES
        }
        for rule in RULES
    }


def table(sc: Scenario, res: dict[str, dict[str, dict[str, float]]], draws: int) -> str:
    head = " | ".join(f"A/A {c:.0%} claim" for c in AA_CLAIMS)
    lines = [
        f"### {sc.name} ({draws} draws a case)",
        "",
        "A/A cells: confirmed before MAX_LOOKS / in all. T49 (-49% claimed and true): confirmed at 2 looks, "
        "mean looks. S40 (-40% claimed, -10% true): confirmed.",
        "",
        f"| rule | {head} | T49 at 2 | T49 looks | S40 confirmed |",
        "|---" * (len(AA_CLAIMS) + 4) + "|",
    ]
    for rule in RULES:
        r = res[rule]
        aa = " | ".join(f"{r[f'AA{c:.2f}']['early']:.4f} / {r[f'AA{c:.2f}']['confirmed']:.4f}" for c in AA_CLAIMS)
        t = r["T49"]
        lines.append(f"| {rule} | {aa} | {t['at2']:.3f} | {t['looks']:.2f} | {r['S40']['confirmed']:.4f} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the H200's own A/A looks


def h200_looks(path: Path) -> dict[str, list[list[list[float]]]]:
    """class -> per iteration, its looks (list of per-config log ratios), production configs
    only, from a wave-3 part2 archive (comment-only candidates on the tuned RMSNorm)."""
    files: dict[str, bytes] = {}
    if path.is_dir():
        files = {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("eval_r*_*.csv")}
    else:
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                f = tar.extractfile(member) if re.search(r"eval_r\d+_(best|cand)\.csv$", member.name) else None
                if f is not None:
                    files[member.name] = f.read()
    rows: dict[tuple[str, int], dict[int, dict[str, dict[str, str]]]] = defaultdict(dict)
    for name, data in files.items():
        m = re.search(r"/v(\d+)/eval_r(\d+)_(best|cand)\.csv$", name)
        if m is None:
            continue
        rows[(m[3], int(m[1]))][int(m[2])] = {r["shape"]: r for r in csv.DictReader(io.StringIO(data.decode()))}
    out: dict[str, list[list[list[float]]]] = defaultdict(list)
    for (side, it), by_look in sorted(rows.items()):
        if side != "best" or ("cand", it) not in rows:
            continue
        cand = rows[("cand", it)]
        per_class: dict[str, list[list[float]]] = defaultdict(list)
        for look in sorted(by_look):
            if look not in cand:
                break
            row: dict[str, list[float]] = defaultdict(list)
            for shape, b in sorted(by_look[look].items()):
                if b.get("prod") == "1" and shape in cand[look]:
                    row[b["dclass"]].append(math.log(float(cand[look][shape]["us"]) / float(b["us"])))
            for cls, values in row.items():
                per_class[cls].append(values)
        for cls, looks in per_class.items():
            out[cls].append(looks)
    return out


def h200_windows(looks: dict[str, list[list[list[float]]]]) -> list[tuple[list[list[float]], list[list[float]]]]:
    """Every window of MAX_LOOKS looks that starts on an AB look, per class, as a confirmation;
    the claim's interval from the same candidate's other looks (the first DECISION_LOOKS of
    them, AB and BA alternating as the window leaves them)."""
    windows = []
    for its in looks.values():
        for it in its:
            for s in range(0, len(it) - MAX_LOOKS + 1, 2):
                w, rest = it[s : s + MAX_LOOKS], it[:s] + it[s + MAX_LOOKS :]
                if len(rest) >= DECISION_LOOKS and len({len(r) for r in w + rest}) == 1:
                    windows.append((w, rest[:DECISION_LOOKS]))
    return windows


def replay(looks: dict[str, list[list[list[float]]]]) -> str:
    """The rules over the H200's A/A windows (`h200_windows`)."""
    windows = h200_windows(looks)
    lines = [
        f"### The H200's A/A looks ({len(windows)} windows of {MAX_LOOKS} looks, classes "
        f"{', '.join(f'{c} K={len(v[0][0])}' for c, v in looks.items())})",
        "",
        "Counts of windows: A/A confirmed before MAX_LOOKS / in all; T49 and S40 add the truth to the real noise.",
        "",
        f"| rule | {' | '.join(f'A/A {c:.0%}' for c in AA_CLAIMS)} | T49 at 2 | T49 looks | S40 confirmed |",
        "|---" * (len(AA_CLAIMS) + 4) + "|",
    ]
    res: dict[str, dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
    for w, d in windows:
        for case, claim, truth in CASES:
            x = [[v + math.log(truth) for v in row] for row in w]
            for rule, got in outcomes(x, claim, d).items():
                res[rule][case].append(got)
    for rule in RULES:
        r = res[rule]
        aa = " | ".join(
            f"{sum(o == 'confirmed' and n < MAX_LOOKS for o, n in r[f'AA{c:.2f}'])} / "
            f"{sum(o == 'confirmed' for o, _ in r[f'AA{c:.2f}'])}"
            for c in AA_CLAIMS
        )
        t49 = [n for o, n in r["T49"] if o == "confirmed"]
        lines.append(
            f"| {rule} | {aa} | {sum(n == MIN_LOOKS for n in t49)} of {len(windows)} | "
            f"{mean([float(n) for n in t49]) if t49 else math.nan:.2f} | "
            f"{sum(o == 'confirmed' for o, _ in r['S40'])} |"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- MAX_LOOKS's rule (--max-looks)

ML_CASES: tuple[tuple[str, float, float], ...] = (
    *((f"A/A {1 - c:.0%}", c, 1.0) for c in (0.98, 0.97, 0.90, 0.60, 0.51)),
    *((f"{c - 1:.0%}", c, c) for c in (0.98, 0.97, 0.90, 0.60, 0.51)),
)
"""(name, claimed, true cost ratio): A/A claims that are not there, and true gains claimed as they are."""
ML_RULES = ("ml_before", "ml_after", "ml_sd3", "ml_ci98", "ml_ci95")


def max_looks_outcomes(x: list[list[float]], claim: float, decision: list[list[float]]) -> dict[str, tuple[str, int]]:
    """Each MAX_LOOKS rule's (outcome, looks), `judge` run look by look over the fresh looks `x`.
    The rules differ only where judge ends at MAX_LOOKS with the claimed class's estimate keeping
    half the claim and its interval at the spent alpha open (half_shown or half_in_noise)."""
    keep, _, _ = claim_of(claim, decision)
    pairs = pairs_of(x)
    for n in range(MIN_LOOKS, MAX_LOOKS + 1):
        looks = [p for p in pairs if p.round < n]
        out = judge(looks, keep, POLICY, extend_to=MAX_LOOKS)
        if out.final:
            break
    got = {rule: (out.outcome, out.looks) for rule in ML_RULES}
    halves = [c for c in out.classes if c.state in ("half_shown", "half_in_noise")]
    if out.looks < MAX_LOOKS or not halves or out.outcome == "refuted":
        return got
    claimed = [c for c in out.classes if c.claimed is not None]
    open_ok = all(c.state in (*CONFIRMING, "half_shown", "half_in_noise") for c in claimed)
    open_ok = open_ok and not any(c.state == "looks_slower" for c in out.classes if c.claimed is None)
    half = -math.log(1.0 - (1.0 - claim) / 2.0)
    passes = {
        "ml_before": True,
        "ml_sd3": half >= CONSISTENT_NOISE_MULTIPLE * decided_sd(keep.classes[0], POLICY, final=False),
        "ml_ci98": all(beyond_noise(c.cls, looks, replace(POLICY, confidence=0.98)) for c in halves),
        "ml_ci95": all(beyond_noise(c.cls, looks, replace(POLICY, confidence=0.95)) for c in halves),
    }
    for rule, ok in passes.items():
        got[rule] = ("confirmed" if open_ok and ok else "undecided", out.looks)
    return got


def _ml_row(got: list[tuple[str, int]]) -> str:
    n = len(got)
    share = {o: sum(g == o for g, _ in got) / n for o in ("confirmed", "refuted", "undecided")}
    at_max = sum(g == "confirmed" and k == MAX_LOOKS for g, k in got) / n
    looks = sum(k for _, k in got) / n
    return f"{share['confirmed']:.4f} ({at_max:.4f}) / {share['refuted']:.4f} / {share['undecided']:.4f} / {looks:.2f}"


def ml_table(title: str, cases: dict[str, dict[str, list[tuple[str, int]]]]) -> str:
    lines = [
        f"### {title}",
        "",
        "Per cell: confirmed (of which at MAX_LOOKS) / refuted / undecided / mean looks.",
        "",
        f"| case | {' | '.join(ML_RULES)} |",
        "|---" * (len(ML_RULES) + 1) + "|",
    ]
    for case, _, _ in ML_CASES:
        lines.append(f"| {case} | {' | '.join(_ml_row(cases[rule][case]) for rule in ML_RULES)} |")
    return "\n".join(lines) + "\n"


def ml_collect(runs: list[tuple[list[list[float]], list[list[float]]]]) -> dict[str, dict[str, list[tuple[str, int]]]]:
    """rule -> case -> (outcome, looks) per (fresh noise, decision noise) in `runs`."""
    res: dict[str, dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
    for noise, decision in runs:
        for case, claim, truth in ML_CASES:
            x = [[v + math.log(truth) for v in row] for row in noise]
            for rule, got in max_looks_outcomes(x, claim, decision).items():
                res[rule][case].append(got)
    return res


def ml_simulate(sc: Scenario, draws: int, seed: int) -> str:
    rng = random.Random(f"{seed}/{sc.name}")  # the draws `simulate` takes
    runs = []
    for _ in range(draws):
        decision = draw(rng, sc)
        runs.append((draw(rng, sc, sc.fresh_scale), decision))
    return ml_table(f"{sc.name} ({draws} draws a case)", ml_collect(runs))


def ml_replay(looks: dict[str, list[list[list[float]]]]) -> str:
    windows = h200_windows(looks)
    return ml_table(f"The H200's A/A looks ({len(windows)} windows of {MAX_LOOKS} looks)", ml_collect(windows))


# ---------------------------------------------------------------- the extension past MAX_LOOKS (--extend)

EXT_CASES: tuple[tuple[str, float, float], ...] = (
    *((f"A/A {1 - c:.0%}", c, 1.0) for c in (0.98, 0.97, 0.90, 0.51)),
    *((f"{c - 1:.0%}", c, c) for c in (0.98, 0.97, 0.95, 0.90, 0.51)),
)
"""(name, claimed, true cost ratio): A/A claims that are not there, true gains claimed as they are."""
EXT_RULES = ("point", "97b6dec", "extend")
"""point: MAX_LOOKS confirms half the claim on the estimate alone (before 97b6dec); 97b6dec:
MAX_LOOKS asks `beyond_noise` at alpha, no extension (`judge(..., extend_to=MAX_LOOKS)`);
extend: `judge` as it is (alpha split between MAX_LOOKS and looks 7..EXTENDED_MAX_LOOKS)."""


def _run(pairs: list[Pair], keep: Verdict, first: int, last: int, extend_to: int) -> Confirmation:
    out = None
    for n in range(first, last + 1):
        out = judge([p for p in pairs if p.round < n], keep, POLICY, extend_to=extend_to, looks=n)
        if out.final:
            return out
    assert out is not None
    return out


def extend_outcomes(x: list[list[float]], claim: float, decision: list[list[float]]) -> dict[str, tuple[str, int]]:
    """Each EXT_RULES rule's (outcome, looks), `judge` run look by look over the fresh looks `x`
    (EXTENDED_MAX_LOOKS of them; the rules before the extension see the first MAX_LOOKS)."""
    keep, _, _ = claim_of(claim, decision)
    pairs = pairs_of(x)
    old = _run(pairs, keep, MIN_LOOKS, MAX_LOOKS, MAX_LOOKS)
    got = {"97b6dec": (old.outcome, old.looks), "point": (old.outcome, old.looks)}
    claimed = [c for c in old.classes if c.claimed is not None]
    if old.outcome == "undecided" and any(c.state == "half_in_noise" for c in claimed):
        ok = all(c.state in (*CONFIRMING, "half_shown", "half_in_noise") for c in claimed)
        ok = ok and not any(c.state == "looks_slower" for c in old.classes if c.claimed is None)
        got["point"] = ("confirmed" if ok else "undecided", old.looks)
    if old.looks < MAX_LOOKS:  # before MAX_LOOKS the rules are one
        got["extend"] = got["97b6dec"]
    else:
        new = _run(pairs, keep, MAX_LOOKS, EXTENDED_MAX_LOOKS, EXTENDED_MAX_LOOKS)
        got["extend"] = (new.outcome, new.looks)
    return got


def _ext_row(got: list[tuple[str, int]]) -> str:
    n = len(got)
    share = {o: sum(g == o for g, _ in got) / n for o in ("confirmed", "refuted", "undecided")}
    path = [sum(g == "confirmed" and test(k) for g, k in got) / n for test in _PATHS]
    looks = sum(k for _, k in got) / n
    return (
        f"{share['confirmed']:.4f} ({' + '.join(f'{p:.4f}' for p in path)}) / {share['refuted']:.4f} / "
        f"{share['undecided']:.4f} / {looks:.2f}"
    )


_PATHS = (lambda k: k < MAX_LOOKS, lambda k: k == MAX_LOOKS, lambda k: k > MAX_LOOKS)


def ext_table(title: str, cases: dict[str, dict[str, list[tuple[str, int]]]]) -> str:
    lines = [
        f"### {title}",
        "",
        f"Per cell: confirmed (before {MAX_LOOKS} looks + at {MAX_LOOKS} + after it) / refuted / undecided / "
        "mean looks.",
        "",
        f"| case | {' | '.join(EXT_RULES)} |",
        "|---" * (len(EXT_RULES) + 1) + "|",
    ]
    for case, _, _ in EXT_CASES:
        lines.append(f"| {case} | {' | '.join(_ext_row(cases[rule][case]) for rule in EXT_RULES)} |")
    return "\n".join(lines) + "\n"


def ext_collect(runs: list[tuple[list[list[float]], list[list[float]]]]) -> dict[str, dict[str, list[tuple[str, int]]]]:
    res: dict[str, dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
    for noise, decision in runs:
        for case, claim, truth in EXT_CASES:
            x = [[v + math.log(truth) for v in row] for row in noise]
            for rule, got in extend_outcomes(x, claim, decision).items():
                res[rule][case].append(got)
    return res


def ext_simulate(sc: Scenario, draws: int, seed: int) -> str:
    rng = random.Random(f"{seed}/{sc.name}/extend")
    runs = []
    for _ in range(draws):
        decision = draw(rng, sc)
        runs.append((draw(rng, sc, sc.fresh_scale, EXTENDED_MAX_LOOKS), decision))
    return ext_table(f"{sc.name} ({draws} draws a case)", ext_collect(runs))


def h200_long_windows(looks: dict[str, list[list[list[float]]]]) -> list[tuple[list[list[float]], list[list[float]]]]:
    """Per class and A/A iteration of EXTENDED_MAX_LOOKS looks, its looks rotated by an even
    offset (AB and BA still alternate) as the fresh looks, the claim's interval from the first
    DECISION_LOOKS looks of the class's next iteration."""
    windows = []
    for its in looks.values():
        for i, it in enumerate(its):
            nxt = its[(i + 1) % len(its)]
            if len(it) < EXTENDED_MAX_LOOKS or len({len(r) for r in it + nxt}) != 1:
                continue
            it = it[:EXTENDED_MAX_LOOKS]
            for s in range(0, EXTENDED_MAX_LOOKS, 2):
                windows.append((it[s:] + it[:s], nxt[:DECISION_LOOKS]))
    return windows


def ext_replay(looks: dict[str, list[list[list[float]]]]) -> str:
    windows = h200_long_windows(looks)
    title = f"The H200's A/A looks ({len(windows)} rotations of {EXTENDED_MAX_LOOKS} looks)"
    return ext_table(title, ext_collect(windows))


# ---------------------------------------------------------------- a run's recorded confirmations (--replay-run)


def replay_run(root: Path, resamples: int, seed: int) -> str:
    """The recorded confirmations of a kopt run (its run.db and kopt.toml): each kept version's
    reverify looks replayed through the three rules, look by look as recorded. A confirmation
    the extension sends past its recorded looks is then finished `resamples` times with looks
    drawn from its own recorded ones (an AB look for an AB look, every config of the look
    together), and the share each outcome gets reported."""
    import json
    import sqlite3
    import tomllib

    from kopt_supervisor.engine.decide.verdict import guard_of

    cfg = tomllib.loads((root / "kopt.toml").read_text()).get("decide", {})
    policy = Policy.from_config(DecideConfig(**cfg))
    db = sqlite3.connect(root / "run.db")
    base = json.loads(db.execute("select record from iterations where version = 0").fetchone()[0])
    production = {k: bool(c.get("production", True)) for k, c in (base.get("configs") or {}).items()}
    guard = guard_of(production, cfg.get("production_verdicts")) if cfg.get("production_verdicts") else frozenset()
    rng = random.Random(seed)
    lines = [
        f"### Recorded confirmations of {root}",
        "",
        "| v | recorded | point (before 97b6dec) | 97b6dec | extend | extend, finished from its own looks |",
        "|---|---|---|---|---|---|",
    ]
    for (version,) in db.execute("select distinct version from samples where stage = 'reverify' order by version"):
        record = json.loads(db.execute("select record from iterations where version = ?", (version,)).fetchone()[0])
        keep = Verdict.from_dict(record["decision"])
        rows = db.execute(
            "select round, block, side, config, cls, value, ord, flagged from samples "
            "where version = ? and stage = 'reverify'",
            (version,),
        ).fetchall()
        sides: dict[tuple[int, int, str], dict[str, float]] = defaultdict(dict)
        meta: dict[tuple[int, int, str], tuple[str, str, bool]] = {}
        for rnd, block, side, config, cls, value, order, flagged in rows:
            sides[(rnd, block, config)][side] = value
            meta[(rnd, block, config)] = (cls, order, bool(flagged))
        pairs = [
            Pair(k[2], meta[k][0], v["best"], v["cand"], k[0], meta[k][1], k[1], meta[k][2])
            for k, v in sorted(sides.items())
            if "best" in v and "cand" in v
        ]
        n = len({p.round for p in pairs})

        def run(ps: list[Pair], last: int, extend_to: int, keep: Verdict = keep) -> Confirmation:
            out = None
            for k in range(MIN_LOOKS, last + 1):
                out = judge(
                    [p for p in ps if p.round < k], keep, policy, guard_configs=guard, extend_to=extend_to, looks=k
                )
                if out.final:
                    break
            assert out is not None
            return out

        old = run(pairs, n, MAX_LOOKS)
        point = old.outcome
        if old.outcome == "undecided" and "within their noise" in old.reason:
            point = "confirmed"
        new = run(pairs, n, EXTENDED_MAX_LOOKS)
        finished = "-"
        if not new.final:
            by_order: dict[str, list[int]] = defaultdict(list)
            for p in pairs:
                if p.round not in by_order[p.order]:
                    by_order[p.order].append(p.round)
            got = []
            for _ in range(resamples):
                ps = list(pairs)
                for look in range(n, EXTENDED_MAX_LOOKS):
                    order = "AB" if look % 2 == 0 else "BA"
                    src = rng.choice(by_order[order])
                    ps += [replace(p, round=look) for p in pairs if p.round == src]
                out = run(ps, EXTENDED_MAX_LOOKS, EXTENDED_MAX_LOOKS)
                got.append((out.outcome, out.looks))
            share = {o: sum(g == o for g, _ in got) / len(got) for o in ("confirmed", "undecided", "refuted")}
            looks = mean([float(k) for _, k in got])
            finished = " / ".join(f"{o} {v:.0%}" for o, v in share.items()) + f", mean looks {looks:.1f}"
        recorded = (record.get("confirmation") or {}).get("outcome", "?")
        lines.append(
            f"| v{version} | {recorded} ({n} looks) | {point} | {old.outcome}: {old.reason} | "
            f"{new.outcome}: {new.reason} | {finished} |"
        )
    return "\n".join(lines) + "\n"


def _scenario_table(i: int, draws: int, seed: int, max_looks: bool, extend: bool = False) -> str:
    sc = SCENARIOS[i]
    t0 = time.monotonic()
    if extend:
        text = ext_simulate(sc, draws, seed)
    else:
        text = ml_simulate(sc, draws, seed) if max_looks else table(sc, simulate(sc, draws, seed), draws)
    print(f"{sc.name}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--draws", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="scenarios whose name contains this")
    ap.add_argument("--h200-aa", type=Path, help="a wave-3 part2 archive (or its extracted folder) to replay")
    ap.add_argument("--max-looks", action="store_true", help="weigh MAX_LOOKS's rule (module docstring)")
    ap.add_argument("--jobs", type=int, default=1, help="scenarios simulated at once (processes)")
    ap.add_argument("--extend", action="store_true", help="weigh the extension past MAX_LOOKS (module docstring)")
    ap.add_argument("--replay-run", type=Path, help="a run's workspace (run.db, kopt.toml): replay its confirmations")
    ap.add_argument("--resamples", type=int, default=1000, help="--replay-run: looks drawn to finish an extension")
    args = ap.parse_args(argv)
    print(
        f"alpha {1 - POLICY.confidence:g}; MIN_LOOKS {MIN_LOOKS}, MAX_LOOKS {MAX_LOOKS}, extended {EXTENDED_MAX_LOOKS}\n"
    )
    if args.replay_run:
        print(replay_run(args.replay_run, args.resamples, args.seed), flush=True)
    if args.h200_aa:
        looks = h200_looks(args.h200_aa)
        text = ext_replay(looks) if args.extend else ml_replay(looks) if args.max_looks else replay(looks)
        print(text, flush=True)
    chosen = [i for i, sc in enumerate(SCENARIOS) if args.only in sc.name]
    one = functools.partial(
        _scenario_table, draws=args.draws, seed=args.seed, max_looks=args.max_looks, extend=args.extend
    )
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            for text in pool.imap(one, chosen):
                print(text, flush=True)
    else:
        for i in chosen:
            print(one(i), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
