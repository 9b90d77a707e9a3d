"""[decide].pooled_noise: a class's interval with the run's spread (estimate.Spread,
verdict.pooled_spreads, loop/measure.run_spreads), its F test, and
experiments/pooled_noise_replay.py, which measured it on the H200's decisions."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from experiments import pooled_noise_replay as replay_mod
from kopt_supervisor.engine import decide
from kopt_supervisor.engine.decide import estimate
from kopt_supervisor.engine.decide.estimate import ClassResult, Pair, Policy, Sample, Spread, interval
from kopt_supervisor.engine.decide.verdict import GUARD_CLASS, evaluate, pooled_spreads
from kopt_supervisor.engine.loop.measure import run_spreads
from kopt_supervisor.engine.records import Iteration, Stage, Status
from kopt_supervisor.engine.store import Sample as StoredSample
from kopt_supervisor.engine.store import Store

POLICY = Policy(confidence=0.99, min_effect_pct=1.0, min_rounds=3, max_rounds=12, pooled_noise=True)


@pytest.mark.parametrize(
    ("p", "d1", "d2", "expected"),
    [(0.95, 2, 10, 4.1028), (0.99, 4, 100, 3.5127), (0.99, 1, 30, 7.5625), (0.5, 6, 6, 1.0)],
)
def test_f_quantile_matches_the_tables(p: float, d1: int, d2: int, expected: float) -> None:
    assert decide.f_quantile(p, d1, d2) == pytest.approx(expected, rel=2e-3)


def aa_pairs(looks: int, sd: float, seed: int, offset: float = 0.0, version_tag: str = "") -> list[Pair]:
    """Two classes of two configs each, ABBA across looks, log-normal noise of `sd` per look."""
    rng = random.Random(seed)
    out = []
    for r in range(looks):
        for cls in ("narrow", "wide"):
            for i in range(2):
                best = 10.0 * (1 + i)
                out.append(
                    Pair(
                        f"{cls}{i}{version_tag}",
                        cls,
                        best,
                        best * (1 + offset) * math.exp(rng.gauss(0, sd)),
                        r,
                        "AB" if r % 4 in (0, 3) else "BA",
                    )
                )
    return out


def samples(values: list[float]) -> list[Sample]:
    return [Sample(i, 0, "AB" if i % 4 in (0, 3) else "BA", v, False) for i, v in enumerate(values)]


def test_the_runs_spread_narrows_a_consistent_decision_and_never_a_noisier_one() -> None:
    rng = random.Random(1)
    steady = samples([rng.gauss(0.0, 0.003) for _ in range(4)])
    own = interval(steady, 0.001)
    run = Spread(var=0.003**2, df=200)
    pooled = interval(steady, 0.001, spread=run)
    assert pooled.pooled and not own.pooled and pooled.mean == own.mean
    assert pooled.hi - pooled.lo < (own.hi - own.lo) / 2  # t with 200 df, not 2
    # ten times the run's spread: the F test gives the decision its own (wide) interval back
    noisy = samples([rng.gauss(0.0, 0.03) for _ in range(4)])
    assert interval(noisy, 0.001, spread=run) == interval(noisy, 0.001)
    # the run's spread is never narrowed by a decision steadier than the run (a candidate
    # whose own looks are unnaturally alike gets the run's width, not its own)
    frozen = samples([0.0001, 0.0001, 0.0001, 0.0001])
    half = (interval(frozen, 0.001, spread=run).hi - interval(frozen, 0.001, spread=run).lo) / 2
    inv = (1 / 2 + 1 / 2) / 4
    assert half == pytest.approx(decide.t_quantile(1 - 0.0005, 200) * math.sqrt(run.var * inv))


def test_an_aa_settles_sooner_with_the_runs_spread_and_the_f_test_is_what_guards_a_noisy_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    earlier = [aa_pairs(6, 0.003, seed=s) for s in range(10)]
    spreads = pooled_spreads(earlier, POLICY)
    assert set(spreads) == {"narrow", "wide"} and all(s.df == 10 * (6 - 2) for s in spreads.values())
    pairs = aa_pairs(12, 0.003, seed=99)
    kind_k, looks_k, _ = replay_mod.replay(pairs, POLICY, None, frozenset(), None, 12)
    kind_p, looks_p, v = replay_mod.replay(pairs, POLICY, None, frozenset(), spreads, 12)
    assert (kind_k, kind_p) == ("tie", "tie") and looks_p < looks_k
    assert v is not None and all(c.pooled_df == 40 for c in v.classes)
    assert ClassResult.from_dict(v.classes[0].to_dict()).pooled_df == 40  # in the record
    # a decision ten times noisier than the run decides as it would alone ...
    noisy = aa_pairs(12, 0.03, seed=5)
    alone = replay_mod.replay(noisy, POLICY, None, frozenset(), None, 12)[:2]
    assert replay_mod.replay(noisy, POLICY, None, frozenset(), spreads, 12)[:2] == alone
    # ... because of the F test: without it, the run's narrow spread would decide it
    monkeypatch.setattr(estimate, "f_quantile", lambda p, d1, d2: math.inf)
    assert replay_mod.replay(noisy, POLICY, None, frozenset(), spreads, 12)[:2] != alone


def test_the_runs_spread_is_of_the_classes_as_judged_and_of_one_block_looks() -> None:
    a = aa_pairs(6, 0.003, seed=1)
    guard = frozenset({"wide1"})
    spreads = pooled_spreads([a], POLICY, guard)
    assert set(spreads) == {"narrow", "wide", GUARD_CLASS}  # wide1 left its class for the guard's
    blocks = [Pair(p.config, p.cls, p.best, p.cand, p.round, p.order, block=1) for p in a]
    assert pooled_spreads([blocks], POLICY) == {}  # looks of several blocks are not pooled
    # evaluate without spreads is each decision's own spread; the engine pools by default
    # ([decide].pooled_noise, on since the H200's live A/A and ~3% runs of part 24)
    assert Policy().pooled_noise is True
    assert evaluate(a, POLICY) == evaluate(a, POLICY, spreads=None)


def test_the_engine_pools_the_earlier_decisions_of_the_run_and_nothing_else(tmp_path) -> None:
    store = Store.create(tmp_path / "run.db")
    rows = []
    for version, sd in ((1, 0.003), (2, 0.003), (3, 0.5), (4, 0.5)):
        store.save_iteration(Iteration(version, Status.TIE if version < 3 else Status.RUNNING))
        for p in aa_pairs(6, sd, seed=version):
            for stage in (Stage.EVAL, Stage.REVERIFY):
                rows += [
                    StoredSample(version, stage, p.round, 0, "best", p.config, p.cls, p.best, p.order),
                    StoredSample(version, stage, p.round, 0, "cand", p.config, p.cls, p.cand, p.order),
                ]
    store.add_samples(rows)
    ctx = SimpleNamespace(store=store)
    spreads = run_spreads(ctx, Iteration(3, Status.RUNNING), Stage.EVAL, POLICY, frozenset())  # type: ignore[arg-type]
    # versions 1 and 2, their evaluations only: v3 (the decision itself) and v4 (later) are
    # 170 times noisier, and the re-verifications are not the evaluation's looks
    assert {c: s.df for c, s in spreads.items()} == {"narrow": 8, "wide": 8}
    assert all(math.sqrt(s.var) < 0.01 for s in spreads.values())
    # a keep's confirmation and the formatted tree's check decide on their own spread; and
    # with the key off, nothing is read
    for stage in (Stage.REVERIFY, Stage.VERIFY):
        assert run_spreads(ctx, Iteration(3, Status.RUNNING), stage, POLICY, frozenset()) is None  # type: ignore[arg-type]
    off = Policy(confidence=0.99, min_effect_pct=1.0, min_rounds=3, max_rounds=12, pooled_noise=False)
    assert run_spreads(ctx, Iteration(3, Status.RUNNING), Stage.EVAL, off, frozenset()) is None  # type: ignore[arg-type]
    store.close()


def noisy_candidate(looks: int, sd: float, rng: random.Random) -> list[Pair]:
    """No change at all, but every look of the candidate slowed or sped by a factor of its own
    choosing (random, sd `sd`): a gamble on a lucky run of looks."""
    out = []
    for r in range(looks):
        whole_look = rng.gauss(0, sd)
        for cls in ("narrow", "wide"):
            for i in range(2):
                best = 10.0 * (1 + i)
                cand = best * math.exp(whole_look + rng.gauss(0, 0.0025))
                out.append(Pair(f"{cls}{i}", cls, best, cand, r, "AB" if r % 4 in (0, 3) else "BA"))
    return out


def test_a_candidate_that_makes_its_looks_noisy_buys_no_more_keeps_with_the_runs_spread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hostile: a candidate that changes nothing but makes each of its looks randomly 2%
    faster or slower, hoping for three lucky looks that the run's narrow spread would call a
    gain. The F test cannot tell it on one degree of freedom, so the run's spread waits for two
    (SPREAD_MIN_OWN_DF): its keeps stay as rare as under the decision's own spread. With the
    run's spread from the first degree of freedom, the same gamble won 2-4% of the time."""
    run = {"narrow": Spread(0.0018**2, 130), "wide": Spread(0.0018**2, 130)}

    def keeps(spreads: dict[str, Spread] | None) -> int:
        rng, won = random.Random(2026), 0
        for _ in range(300):
            pairs = noisy_candidate(12, 0.02, rng)
            won += replay_mod.replay(pairs, POLICY, None, frozenset(), spreads, 12)[0] == "keep"
        return won

    alone = keeps(None)  # kopt's rule: the decision's own spread
    assert alone <= 3 and keeps(run) <= alone + 1  # 300 gambles: as rare with the run's spread
    monkeypatch.setattr(estimate, "SPREAD_MIN_OWN_DF", 1)
    assert keeps(run) >= alone + 3  # the hole the minimum closes (5 of 300 here, against 1)


def test_looks_the_gate_flagged_stay_out_of_the_runs_spread() -> None:
    a = aa_pairs(6, 0.003, seed=4)
    wild = [
        Pair(p.config, p.cls, p.best, p.cand * (3.0 if p.round == 2 else 1.0), p.round, p.order, flagged=p.round == 2)
        for p in a
    ]
    steady = {c: s.var for c, s in pooled_spreads([[p for p in a if p.round != 2]], POLICY).items()}
    flagged = pooled_spreads([wild], POLICY)
    assert {c: s.var for c, s in flagged.items()} == pytest.approx(steady)  # the throttled look is not noise


def test_a_spike_the_decision_dropped_stays_out_of_the_runs_spread() -> None:
    # H200, part 24: two spikes among a run's first decision's 12 looks made the pool 1.3-1.6%
    # per look instead of 0.2%, and the next five ~3% keeps took 6-12 looks instead of 4
    a = aa_pairs(12, 0.002, seed=5)
    spiked = [Pair(p.config, p.cls, p.best, p.cand * (1.2 if p.round == 7 else 1.0), p.round, p.order) for p in a]
    steady = pooled_spreads([a], POLICY)
    pooled = pooled_spreads([spiked], POLICY)
    own = {
        c: estimate.residual_ss(samples_of) for c, samples_of in decide.verdict.class_samples(spiked, POLICY).items()
    }
    for cls, sp in pooled.items():
        assert own[cls][0] / own[cls][1] > 50 * steady[cls].var  # the premise: the spike is most of the raw spread
        assert sp.var < 2 * steady[cls].var, cls  # the ESD test dropped it, as the decision does
        assert sp.df == own[cls][1] - 1  # one look fewer


def test_a_run_spread_on_fewer_degrees_of_freedom_than_the_decisions_own_is_not_used() -> None:
    # the tune loop's second decision (tests/engine/test_tune.py): the run's first decision
    # pooled on 1 df gave a t quantile ~60 times the decision's own on 4, and a -6.9% class
    # stayed undecided to max_rounds
    rng = random.Random(3)
    own = samples([-0.07 + rng.gauss(0, 0.001) for _ in range(6)])
    alone = interval(own, 0.01)
    thin = interval(own, 0.01, spread=Spread(0.004**2, 1))
    assert not thin.pooled and (thin.lo, thin.hi) == (alone.lo, alone.hi)
    rich = interval(own, 0.01, spread=Spread(0.004**2, 60))
    assert rich.pooled and rich.hi - rich.lo > alone.hi - alone.lo  # steadier than the run: the run's width
