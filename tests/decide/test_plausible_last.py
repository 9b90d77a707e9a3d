"""`plausible.last_block_not_faster` on pair data: a gain the look's last timed block (the
one kopt audits, the bench's `<metric>_last`) does not show sends a keep to review; honest
gains with noisy blocks do not; what partial work in the cheap blocks can still claim; and
the column's way from a bench's table to the pairs (metrics). The same attack through the
served harness: tests/kernels/test_last_block_hostile.py."""

from __future__ import annotations

import io
import math
import random
import statistics
from dataclasses import replace

import pandas as pd

from kopt_supervisor.engine import metrics
from kopt_supervisor.engine.config import TargetConfig
from kopt_supervisor.engine.decide.estimate import Pair, Policy
from kopt_supervisor.engine.decide.plausible import LAST_MIN_LOOKS, check, last_block_not_faster
from kopt_supervisor.engine.decide.verdict import GUARD_CLASS, evaluate
from tests.decide.test_plausible import ORDER, with_figure


def with_lasts(median: list[float], last: list[float], configs: int = 2, cls: str = "wide") -> list[Pair]:
    """Served looks: the candidate's last block at last[r] x best's last block (best's 101)."""
    return with_figure(median, last, "last", 101.0, cls, configs)


def finding(pairs: list[Pair], policy: Policy | None = None) -> str | None:
    policy = policy or Policy()
    f = last_block_not_faster(evaluate(pairs, policy).classes, pairs, policy)
    assert f is None or (f.flag == "last_block_not_faster" and f.action == "review")
    return None if f is None else f.reason


def test_a_gain_that_the_audited_block_does_not_show_is_named_and_the_keep_goes_to_review() -> None:
    """The candidate's median at 0.45 of best's, its last block (fresh inputs, NaN outputs:
    every output kopt reads) as slow as best's: a settled keep before the check."""
    skipped = with_lasts([0.45, 0.452, 0.449, 0.45], [1.01, 0.98, 1.0, 1.02])
    v = evaluate(skipped, Policy())
    assert v.classes[0].verdict == "improved"
    assert v.kind == "borderline" and v.flags == ("last_block_not_faster",), (v.kind, v.flags)
    assert v.reason.startswith(
        "wide -55.0% by its metric but about +0.2% in the last timed block (the mean of 4 looks; against its "
        "own other blocks that block is +122.6% dearer than best's, at least +116.8%): "
        "the last block computes the outputs kopt audits"
    ), v.reason
    assert v.reason.endswith("(bench: wide −55.0% faster (every class improved))")
    assert [f.flag for f in check(v.classes, skipped, Policy())] == ["last_block_not_faster"]
    # the same gain in the last blocks: nothing to say
    honest = with_lasts([0.45, 0.452, 0.449, 0.45], [0.47, 0.43, 0.46, 0.44])
    assert finding(honest) is None and evaluate(honest, Policy()).settled_keep


def test_one_look_of_half_the_claim_clears_it_unless_the_mean_over_the_looks_proves_otherwise() -> None:
    # sqrt(0.45) = 0.67: a last block of 0.6 in one look of three shows half the claim
    assert finding(with_lasts([0.45] * 3, [1.0, 0.6, 1.0])) is None
    # ... but one lucky look in nine does not clear a mean that stays near 1 (t bound, 99%)
    lucky = with_lasts([0.45] * 9, [1.0, 0.98, 1.02, 0.6, 1.0, 0.99, 1.01, 1.0, 0.97])
    reason = finding(lucky)
    assert reason is not None and "(the mean of 9 looks; " in reason and "at least +33.3%)" in reason
    # fewer than LAST_MIN_LOOKS looks prove nothing
    assert LAST_MIN_LOOKS == 3 and finding(with_lasts([0.45] * 3, [1.0] * 3)[:4]) is None


def test_partial_work_in_the_cheap_blocks_claims_at_most_twice_the_real_gain() -> None:
    """A candidate really 20% faster (its last block at 0.8 of best's) whose other blocks do
    a share of the work: a claim of 0.68 (less than 0.8 x 0.8) passes, 0.6 does not."""
    assert finding(with_lasts([0.68] * 4, [0.8] * 4)) is None
    assert finding(with_lasts([0.6] * 4, [0.8] * 4)) is not None


def test_without_last_blocks_or_a_claimed_latency_gain_there_is_nothing_to_compare() -> None:
    skipped = with_lasts([0.45] * 4, [1.0] * 4)
    none = [replace(p, best_last=math.nan, cand_last=math.nan) for p in skipped]
    assert finding(none) is None  # a bench without the column
    dropped = [replace(p, cand_last=math.nan) for p in skipped]
    assert "the candidate's rows report no last timed block (over 4 looks)" in (finding(dropped) or "")
    blocks = [replace(p, block=b) for p in skipped for b in (0, 1)]  # ab_command blocks: none is audited
    assert finding(blocks) is None
    assert finding(skipped, Policy(direction="max")) is None  # a throughput
    assert finding(with_lasts([1.2] * 4, [1.2] * 4)) is None  # slower: nothing claimed
    gated = [replace(p, flagged=p.round > 1) for p in skipped]  # looks the GPU gate flagged do not count
    assert finding(gated) is None
    # on a verdict that keeps nothing it is noted, not a review
    split = skipped + [replace(p, cls="narrow", config=p.config + "n", cand=p.best * 1.3) for p in skipped]
    v = evaluate(split, Policy())
    assert v.kind != "keep" and v.kind != "borderline" and "last_block_not_faster" in v.flags, (v.kind, v.flags)


def blocks_look(rng: random.Random, r: int, gain: float, noise: dict[str, float], skip: float | None) -> list[Pair]:
    """One served look of two configs: each side's blocks (the true cost x a per-look factor x
    a per-block one), the median and the last block; the last block also pays a fixed cost
    (on the CPU the interpreter's call after the refresh runs slower by about 1 ms in 25,
    measured on the harness). `skip`: the candidate's blocks before the last cost this share
    of its last one."""
    out = []
    for i in range(2):
        sides = {}
        for side in ("best", "cand"):
            true = 25.0 * (1 + 0.3 * i) * (gain if side == "cand" else 1.0)
            look = math.exp(rng.gauss(0.0, noise["look"]))
            blocks = [true * look * math.exp(rng.gauss(0.0, noise["block"])) for _ in range(int(noise["blocks"]))]
            if side == "cand" and skip is not None:
                blocks[:-1] = [b * skip for b in blocks[:-1]]
            blocks[-1] += noise["after_refresh"]
            sides[side] = (statistics.median(blocks), blocks[-1])
        (b, bl), (c, cl) = sides["best"], sides["cand"]
        out.append(Pair(f"D={i}", "c", b, c, r, ORDER[r % 2], best_last=bl, cand_last=cl))
    return out


CPU = {"block": 0.10, "look": 0.05, "blocks": 3, "after_refresh": 1.0}
LOADED = {"block": 0.20, "look": 0.10, "blocks": 3, "after_refresh": 1.0}
SHARED = {"block": 0.06, "look": 0.25, "blocks": 3, "after_refresh": 1.0}
"""The suite's load as measured (tests/kernels/test_last_block_hostile.py, two runs side by
side on the 2-core machine, 2026-11-30): a look's last block varied 0.12-0.36 (log) from look
to look, its excess over the same process's other blocks 0.08-0.09: slowdowns that move a
whole process's look."""
GPU = {"block": 0.015, "look": 0.005, "blocks": 9, "after_refresh": 0.0}


def decisions(seed: int, n: int, policy: Policy, **kw: object) -> tuple[int, int]:
    """(decisions that claim a gain, those sent to review by the check), each decision's looks
    taken until `evaluate` is final, as the loop takes them."""
    rng = random.Random(seed)
    claimed = flagged = 0
    for _ in range(n):
        pairs: list[Pair] = []
        for r in range(policy.max_rounds):
            pairs += blocks_look(rng, r, **kw)  # type: ignore[arg-type]
            v = evaluate(pairs, policy)
            if r + 1 >= policy.min_rounds and v.final:
                break
        if v.classes[0].verdict == "improved":
            claimed += 1
            flagged += "last_block_not_faster" in v.flags
    return claimed, flagged


def test_honest_gains_in_noisy_blocks_are_not_sent_to_review_and_skipped_work_mostly_is() -> None:
    """Simulated served looks (two configs a class, single blocks with 10% noise on the CPU,
    20% on a loaded one, 1.5% on a GPU; SHARED: the suite's load as measured, mostly
    process-wide), 200 decisions a case (seed 3), each looked at until final. Honest gains of
    10%, 30% and 50% on the CPU, 30% under SHARED and 2% on a GPU: claimed in 77, 184, 200,
    109 and 199 decisions, none sent to review. A candidate with no real gain whose blocks
    but the last do half the work: sent to review in 200 of 200 decisions on the CPU, 189 of
    200 on the loaded machine (independent noise per block, which the excess does not cancel;
    without `last_block_unsure`'s extra looks, 141) and 199 of 199 under SHARED; one doing
    90% of it on a GPU (an 11% claim) in 200 of 200. The extra looks cost the honest GPU
    decisions 0.15 looks on average (7.05 to 7.2)."""
    cpu = Policy(max_rounds=10, suspicious_speedup=10.0)  # the CPU kopt.toml's
    gpu = Policy(max_rounds=12)
    for kw, policy in (
        ({"gain": 0.9, "noise": CPU}, cpu),
        ({"gain": 0.7, "noise": LOADED}, cpu),
        ({"gain": 0.5, "noise": LOADED}, cpu),
        ({"gain": 0.7, "noise": SHARED}, cpu),
        ({"gain": 0.98, "noise": GPU}, gpu),
    ):
        claimed, flagged = decisions(3, 200, policy, skip=None, **kw)
        assert claimed >= 70 and flagged == 0, (kw, claimed, flagged)
    for kw, policy, at_least in (
        ({"gain": 1.0, "noise": CPU, "skip": 0.5}, cpu, 0.99),
        ({"gain": 1.0, "noise": LOADED, "skip": 0.5}, cpu, 0.9),
        ({"gain": 1.0, "noise": SHARED, "skip": 0.5}, cpu, 0.99),
        ({"gain": 1.0, "noise": GPU, "skip": 0.9}, gpu, 0.99),
    ):
        claimed, flagged = decisions(3, 200, policy, **kw)
        assert claimed >= 195 and flagged >= at_least * claimed, (kw, claimed, flagged)


def test_the_last_block_column_is_read_and_paired_and_is_never_a_config_column() -> None:
    cfg = TargetConfig(bench="x", metric="us", correct="err <= 1", calls="calls")
    text = "shape,cls,us,err,calls,us_mean,us_last\na,s,10,0,6,11,12.5\nb,s,20,0,6,21,\n"
    m = metrics.measure(pd.read_csv(io.StringIO(text)), cfg)
    assert m.config_columns == ("shape", "cls")  # us_last, like us_mean, is the metric's own
    assert m.configs["shape=a,cls=s"].last == 12.5 and math.isnan(m.configs["shape=b,cls=s"].last)
    best = metrics.measure(pd.read_csv(io.StringIO(text.replace("12.5", "13"))), cfg)
    (pa, pb) = metrics.paired(best, m, 0, "AB")
    assert (pa.best_last, pa.cand_last) == (13.0, 12.5) and math.isnan(pb.cand_last)
    plain = metrics.measure(pd.read_csv(io.StringIO("shape,us,err\na,10,0\n")), replace(cfg, calls=""))
    assert math.isnan(plain.configs["shape=a"].last)


def test_the_review_is_about_the_class_whose_audited_block_shows_nothing() -> None:
    # an honest class beside the skipping one: the review's focus is the skipping class, not
    # the honest one the keep's reason led with (send_to_review takes the finding's class)
    honest = with_lasts([0.45, 0.452, 0.449, 0.45], [0.47, 0.43, 0.46, 0.44], cls="a-honest")
    skipped = with_lasts([0.6, 0.61, 0.6, 0.59], [1.01, 0.98, 1.0, 1.02], cls="b-skips")
    v = evaluate(honest + skipped, Policy())
    assert v.kind == "borderline" and v.flags == ("last_block_not_faster",), (v.kind, v.flags)
    assert v.focus == "b-skips"


def test_a_keep_whose_last_blocks_lean_towards_the_finding_takes_more_looks() -> None:
    """Excess per look log(last / median): 0.89, 0.11, 0.89 against a limit of 0.40 (half of
    the -55% claim): the mean leans past it, one look does not, and the t bound of three looks
    cannot tell. With looks left the keep waits for more; the looks that follow decide."""
    leaning = with_lasts([0.45] * 3, [1.1, 0.5, 1.1])
    assert finding(leaning) is None
    v = evaluate(leaning, Policy())
    assert v.kind == "undecided" and not v.final, (v.kind, v.reason)
    assert v.reason == "wide: the last timed blocks do not show half the gain yet after 3 rounds"
    # no look left: the keep stands (the rule's limit: docs/security.md)
    assert evaluate(leaning, Policy(max_rounds=3)).kind == "keep"
    # six more looks like the first: the mean is then provably short, sent to review
    more = with_lasts([0.45] * 9, [1.1, 0.5, 1.1, 1.1, 1.05, 1.1, 1.08, 1.1, 1.12])
    v = evaluate(more, Policy())
    assert v.kind == "borderline" and "last_block_not_faster" in v.flags, (v.kind, v.reason)
    # an honest keep whose last blocks show the gain is never held back
    honest = with_lasts([0.45] * 3, [0.5, 0.42, 0.47])
    assert evaluate(honest, Policy()).settled_keep


def test_a_guard_whose_small_gain_its_last_blocks_do_not_yet_show_holds_no_keep_back() -> None:
    """The H200's RMSNorm demo (docs/h100-wave3/part34, call 3, v5): every production class
    improved and shown by its last blocks at look 3; the guard (non-production) improved -1.3%
    with last-block excesses of -0.6%, +1.4%, +2.1% against a limit of +0.65% (half the
    claim): the keep waited three looks on noise. A keep never rests on the guard's gain, so
    its leaning last blocks hold nothing back; a production class's still do (the test
    above); and a guard that skips its work outside the audited block still goes to review."""
    guard = frozenset({"G=0", "G=1"})

    def as_guard(pairs: list[Pair]) -> list[Pair]:
        return [replace(p, config=p.config.replace("D=", "G="), cls="narrow") for p in pairs]

    shown = with_lasts([0.45] * 3, [0.5, 0.42, 0.47])  # the production class: its gain in the last blocks
    leaning = [0.987 * math.exp(e) for e in (-0.006, 0.014, 0.021)]
    v = evaluate(shown + as_guard(with_lasts([0.987] * 3, leaning)), Policy(), guard_configs=guard)
    assert v.settled_keep, (v.kind, v.reason)
    assert [c.verdict for c in v.classes if c.cls == GUARD_CLASS] == ["improved"]
    # the same leaning in a production class waits for another look
    v = evaluate(shown + with_lasts([0.987] * 3, leaning, cls="narrow"), Policy())
    assert v.kind == "undecided" and v.reason.startswith("narrow: the last timed blocks"), (v.kind, v.reason)
    # a guard whose audited block shows none of its -40%: the keep goes to review
    skipping = as_guard(with_lasts([0.6] * 3, [1.0, 1.01, 0.99]))
    v = evaluate(shown + skipping, Policy(), guard_configs=guard)
    assert v.kind == "borderline" and "last_block_not_faster" in v.flags, (v.kind, v.reason)
    assert v.focus == GUARD_CLASS
