"""A keep's profile taken again, closer, when it could not tell on a class the keep claims
(engine/loop/evidence.py `Evidence.confirm`, profiler.ESCALATED_CALLS calls per config), and a
claim the profiler still cannot show goes to review, never "confirmed by the bench's timer
only" (decide/external_truth.py `profiler_unshown`).

H200, 2026-11-29 (docs/h100-wave3/part7-two-gpus-h200.md): a timer patch read -9.8% by the
bench and -0.1% [-7.7, +8.1] by a profiler of 2 calls per config, and was kept. Here the
stand-in ncu (tests/fake_target/bin/ncu) plays a noisy profiler (FAKE_NCU_JITTER: launch k's
time x (1 + j(-1)^k)) that honours KOPT_PROFILE_CALLS, and the proposer's `timer:0.85` lowers
the bench's numbers by 15% while the GPU's work (ncu_speed) stays as it was.

The noise is chosen so that each outcome has a margin: with jitter j a class's 99% interval is
about ±1.7j at 3 launches a config and ±0.8j at 12. The bench's own 99% interval is drawn anew
each run: ±2-4% about its estimate mostly, but its upper end lies more than 7% above it in about
1 class in 20 (a helper's simulation of the decision, checked against 60 real intervals,
2026-12-04), so an outcome that rests on the profiler's interval lying above the bench's keeps
10% or more clear of the bench's estimate."""

from __future__ import annotations

import json

import pytest

from kopt_supervisor.engine.decide.confirmation import is_claimed, shows_half
from kopt_supervisor.engine.profile import SMALLER_GAIN, Agreement, ClassAgreement
from kopt_supervisor.engine.profile.profiler import CLOSER_FACTOR, ESCALATED_CALLS
from kopt_supervisor.engine.store import Store
from tests.engine.test_keep_profile_reuse import record, two_keeps

CLOSER = min(ESCALATED_CALLS, CLOSER_FACTOR * 3)
"""A closer profile's calls of a claimed config: the fake bench says its own 3 in the baseline's profile."""


def truth_of(ws, version: int) -> dict:
    """The iteration's external truth, from run.db (memory/vN.json leaves it out)."""
    with Store(ws.db_path, readonly=True) as store:
        return next(it.record["external_truth"] for it in store.iterations() if it.version == version)


@pytest.fixture
def noisy_ncu(monkeypatch):
    def set_jitter(j: float) -> None:
        monkeypatch.setenv("FAKE_NCU_JITTER", str(j))

    return set_jitter


def claimed(rec: dict, key: str) -> dict[str, str]:
    return {c["cls"]: c["status"] for c in rec["profile"][key]["classes"]}


def test_a_timer_patch_the_first_profile_cannot_tell_is_refuted_by_the_closer_one(
    fake_env, tmp_path, monkeypatch, driven_clock, noisy_ncu
):
    # the candidate's own launches noisy at the bench's 3 calls a config (ncu_jitter_first 0.3:
    # +8.9% [-22, +52], reaching the bench's -15%), steady at the closer profile's 12 (0.03:
    # 1.0 [-2.9, +3.0], 12% clear of -15%). With 0.1 at both, the closer interval's lower end,
    # -8.8%, was clear of the bench's only while the bench's stayed within 7.3% of its -15%: both
    # classes went past in about 1 run of 460 (the helper's simulation), and then none disagreed
    noisy_ncu(0.03)
    timer = (
        "do:k['ncu_speed'] = dict(k['speed']); k['speed'] = {c: v * 0.85 for c, v in k['speed'].items()}; "
        "k['ncu_jitter_first'] = 0.3; json.dump(k, open('kernel.json', 'w'))"
    )
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "t", script=[timer], iters=1)
    v1 = record(ws, 1)
    assert v1["status"] != "keep", v1["decision"]
    assert set(claimed(v1, "first").values()) == {"cannot_tell"}  # 3 launches a config: too wide
    assert v1["profile"]["taken"]["calls"] == 12 and (ws.profiles / "v1" / "cand_more").is_dir()
    assert "disagrees" in claimed(v1, "agreement").values()  # 12: the interval lies above the bench's
    assert "profiler_disagrees" in v1["decision"]["flags"]


def test_the_closer_profile_calls_only_the_configs_of_the_claimed_classes(
    fake_env, tmp_path, monkeypatch, driven_clock, noisy_ncu
):
    # on the H200 the closer profile of a ~3% claim called every config 12 times, the largest
    # shape of an unclaimed (tied) class too: 26 s of each tree's 48. Only the claimed classes'
    # configs take the 12 calls now; every class is judged again, the others at the bench's own
    noisy_ncu(0.05)
    large_only = (
        "do:k['speed']['large'] *= 0.95; json.dump(k, open('kernel.json', 'w')); "
        "plan = 'faster large rows\\ntarget_class: cls=large\\n'"
    )
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "c", script=[large_only], iters=1)
    v1 = record(ws, 1)
    assert v1["status"] == "keep", v1["decision"]
    assert claimed(v1, "first")["cls=large"] == "cannot_tell"
    assert claimed(v1, "agreement")["cls=large"] == "agrees" and "cls=small" in claimed(v1, "agreement")
    taken = v1["profile"]["taken"]
    assert taken["calls"] == 12 and taken["closer"] == ["cls=large"]
    calls = {side: (ws.profiles / "v1" / side / "ncu.calls").read_text().splitlines() for side in PAIRS}
    assert all(line.endswith(" 3") for side in ("best", "cand") for line in calls[side])
    assert (
        calls["best_more"]
        == calls["cand_more"]
        == [
            "shape=s0,cls=small,n=128 3",
            "shape=s1,cls=small,n=256 3",
            f"shape=s2,cls=large,n=4096 {CLOSER}",
            f"shape=s3,cls=large,n=8192 {CLOSER}",
        ]
    )


def test_outputs_wrong_only_in_the_closer_profile_fail_correctness(
    fake_env, tmp_path, monkeypatch, driven_clock, noisy_ncu
):
    # the closer profile's outputs are compared too (best's in the same profile, same seed and
    # calls): a tree honest in the first profile, which it cannot know will not be the last,
    # and doing less work once KOPT_PROFILE_CALLS says it is the closer one, is caught
    noisy_ncu(0.1)
    cheat = "do:k['speed']['small'] *= 0.95; k['speed']['large'] *= 0.95; k['profile_wrong_closer'] = ['large']; "
    ws = two_keeps(
        fake_env, tmp_path, monkeypatch, "w", script=[cheat + "json.dump(k, open('kernel.json', 'w'))"], iters=1
    )
    v1 = record(ws, 1)
    assert v1["status"] == "fail_correctness", v1["decision"]
    assert v1["profile"]["taken"]["calls"] == 12 and "refuted" in v1["profile"]["outputs"]


PAIRS = ("best", "cand", "best_more", "cand_more")


def test_a_gain_the_profiler_cannot_show_even_closer_goes_to_review_not_timer_only(
    fake_env, tmp_path, monkeypatch, driven_clock, noisy_ncu
):
    noisy_ncu(0.3)
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "n", script=["gain5"], iters=1)
    v1 = record(ws, 1)
    assert v1["status"] != "keep", v1["decision"]
    truth = truth_of(ws, 1)
    assert truth["kind"] == "profiler" and truth["outcome"] == "inconclusive", truth
    assert (
        "could not show half the claimed gain" in truth["reason"]
        and "even at up to 12 calls per config" in truth["reason"]
    )
    assert "external_truth_inconclusive" in v1["decision"]["flags"]


def test_an_honest_gain_the_first_profile_cannot_tell_is_shown_by_the_closer_one_whose_profile_is_not_reused(
    fake_env, tmp_path, monkeypatch, driven_clock, noisy_ncu
):
    """v1 an honest gain the closer profile shows; v2 a keep after it, which does not reuse
    v1's profile of 12 calls a config (one run: v1 was a run of its own, the same run, 3.7 CPU-s)."""
    noisy_ncu(0.05)
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "h", script=["gain5", "gain30"], iters=2)
    v1, v2 = record(ws, 1), record(ws, 2)
    assert v1["status"] == "keep", v1["decision"]
    assert "cannot_tell" in claimed(v1, "first").values()
    assert set(claimed(v1, "agreement").values()) == {"agrees"} and v1["profile"]["taken"]["calls"] == 12
    # the closer profile's outputs compared as the first's were (best's in it, the same seed)
    assert v1["profile"]["outputs"]["closer"]["checked"] == v1["profile"]["outputs"]["checked"] == 4
    truth = truth_of(ws, 1)
    assert truth["kind"] == "profiler" and truth["outcome"] == "confirmed", truth
    assert v1["profile"]["taken"]["calls"] == 12, json.dumps(v1["profile"]["taken"])
    # best's summary had 12 calls a config, this one's 3; and v1's first pass (3 calls) is not
    # lent either: it is the pass that could not tell, which a tree could slow at will
    assert v2["profile"]["taken"]["best_from"] is None and (ws.profiles / "v2" / "best").is_dir()
    # best/ profiled afresh, a tree a proposer wrote: the pair does not stand in for the looks,
    # which a kept tree slow only as BEST cannot bend (docs/security.md, "A kept tree slow as BEST")
    with Store(ws.db_path, readonly=True) as store:
        conf = next(it.record["confirmation"] for it in store.iterations() if it.version == 2)
    assert v2["status"] == "keep" and conf["path"] != "profiler" and conf["looks"] > 0, conf
    assert v1["profile"]["taken"]["best_is_baseline"] and not v2["profile"]["taken"]["best_is_baseline"]


def test_a_tree_that_works_otherwise_only_while_profiled_fails_correctness(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    """The profiler's kernel time is the keep's external truth, so a candidate that knows it is
    profiled (KOPT_PROFILE, ncu's injection) could do less work there and have the profiler agree
    with a patched timer: kopt compares its outputs under the profiler with best's, on inputs
    from a seed of kopt's (KOPT_PROFILE_SEED), and a difference fails the candidate."""
    ws = two_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        "w",
        script=[
            "do:k['speed'] = {'small': 0.7, 'large': 0.7}; k['profile_wrong'] = ['large']; "
            "json.dump(k, open('kernel.json', 'w'))"
        ],
        iters=1,
    )
    v1 = record(ws, 1)
    assert v1["status"] == "fail_correctness", v1["decision"]
    assert "the candidate's outputs under the profiler, config " in v1["decision"]["reason"]
    assert "cls=large" in v1["decision"]["reason"]


def test_a_candidate_that_writes_no_outputs_under_the_profiler_where_best_did_is_refuted(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    ws = two_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        "o2",
        script=[
            "do:k['speed'] = {'small': 0.7, 'large': 0.7}; "
            "k['profile_no_outputs'] = True; json.dump(k, open('kernel.json', 'w'))"
        ],
        iters=1,
    )
    v1 = record(ws, 1)
    assert (
        v1["status"] == "fail_correctness"
        and "none written, while the baseline's profile wrote them" in v1["decision"]["reason"]
    )


def test_the_closer_profile_repeats_only_the_claimed_classes_the_first_could_not_tell(
    fake_env, tmp_path, monkeypatch, driven_clock, noisy_ncu
):
    # a keep claiming both classes, small shown by the first profile (-20%) and large not (-5%):
    # only large's configs take the 12 calls; small is judged again at its first calls
    noisy_ncu(0.05)
    both = "do:k['speed']['small'] *= 0.8; k['speed']['large'] *= 0.95; json.dump(k, open('kernel.json', 'w'))"
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "u", script=[both], iters=1)
    v1 = record(ws, 1)
    assert v1["status"] == "keep", v1["decision"]
    assert claimed(v1, "first") == {"cls=large": "cannot_tell", "cls=small": "agrees"}
    assert claimed(v1, "agreement") == {"cls=large": "agrees", "cls=small": "agrees"}  # small judged again
    assert v1["profile"]["taken"]["closer"] == ["cls=large"]
    calls = (ws.profiles / "v1" / "cand_more" / "ncu.calls").read_text().splitlines()
    assert [line.rsplit(" ", 1)[1] for line in calls] == ["3", "3", str(CLOSER), str(CLOSER)], calls


# A real gain whose first profile reads it as less than the bench does (the H200's 2-sd draw:
# -3.4% read -1.03% [-2.56, +0.52], docs/h100-wave3/part33-*): the profiler's interval lies above
# the bench's, which disagreed with no closer look. Where that interval still holds half the
# claimed gain, the closer profile judges it again (profile.Agreement.held_half).
def gain30(fake_env, tmp_path, monkeypatch, tag: str, knobs: str) -> dict:
    """v1's record: the candidate's speed 0.7 of best's in every class, with kernel.json's
    `knobs` (the stand-in ncu's) set, the profiler's launches 2% noisy."""
    monkeypatch.setenv("FAKE_NCU_JITTER", "0.02")
    script = f"do:k['speed'] = {{c: v * 0.7 for c, v in k['speed'].items()}}; {knobs}; json.dump(k, open('kernel.json', 'w'))"
    return record(two_keeps(fake_env, tmp_path, monkeypatch, tag, script=[script], iters=1), 1)


def test_a_real_gain_the_first_profile_reads_short_is_kept_by_the_closer_one(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    # first profile: -16.7% [-19.6, -13.7], above the bench's -30% (whose 99% interval reached
    # -24% in 1 of 16 draws: at -23% the CI once read "agrees"), its lower bound past half the claim
    v1 = gain30(fake_env, tmp_path, monkeypatch, "f", "k['ncu_slow_first'] = 1.19")
    first = {c["cls"]: c for c in v1["profile"]["first"]["classes"]}
    assert {c["status"] for c in first.values()} == {"disagrees"}, first
    assert all("lies above the bench's" in c["reason"] for c in first.values())
    assert v1["profile"]["taken"]["calls"] == 12 and sorted(v1["profile"]["taken"]["closer"]) == [
        "cls=large",
        "cls=small",
    ]
    assert set(claimed(v1, "agreement").values()) == {"agrees"}
    assert v1["status"] == "keep", v1["decision"]


def test_a_timer_patch_on_a_real_smaller_gain_buys_a_closer_look_not_a_keep(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    # hostile: the GPU's work is 20% less, the bench's timer says 30%: the first profile's
    # disagreement holds half the claim, so the closer profile runs, and reads the same -20%
    # ([-21.6, -18.4], clear of the bench's interval, whose upper end reached -24% in 1 of 16 draws)
    v1 = gain30(fake_env, tmp_path, monkeypatch, "p", "k['ncu_speed'] = {'small': 0.8, 'large': 0.8}")
    assert v1["profile"]["taken"]["calls"] == 12, v1["profile"]["taken"]  # the closer look was taken
    assert "disagrees" in claimed(v1, "first").values() and "disagrees" in claimed(v1, "agreement").values()
    assert v1["status"] != "keep" and "profiler_disagrees" in v1["decision"]["flags"], v1["decision"]


def test_a_timer_patch_far_beyond_the_profiler_disagrees_at_once():
    # part 3's -40% claimed against -0.03% seen: the interval holds no half of the claim
    def cls(name, verdict, bench, lo, reason=SMALLER_GAIN, status="disagrees"):
        return ClassAgreement(
            name, status, verdict, bench, bench - 0.01, bench + 0.01, lo + 0.01, lo, lo + 0.02, reason
        )

    def held(*classes, problems=()):
        return Agreement(tuple(classes), True, problems=problems).held_half(is_claimed, shows_half)

    assert held(cls("wide", "improved", 0.60, 0.99)) == []  # -40% claimed, the profiler's lo -1%
    assert held(cls("wide", "improved", 0.966, 0.9744)) == ["wide"]  # part 33's v3: lo -2.56% holds -1.7%
    ok = cls("wide", "improved", 0.966, 0.9744)
    assert held(ok, cls("narrow", "improved", 0.7, 0.98)) == []  # another class disagrees beyond half
    assert held(ok, cls("guard (non-production)", "tied", 1.0, 1.05, reason="a loss")) == []  # the guard blocks
    assert held(ok, cls("narrow", "improved", 0.966, 0.9744, reason="the profiler sees a loss")) == []
    assert held(ok, problems=("ranges on one side only",)) == []
    assert held(ok, cls("narrow", "tied", 1.0, 0.99, status="agrees")) == ["wide"]  # agreeing classes do not count
