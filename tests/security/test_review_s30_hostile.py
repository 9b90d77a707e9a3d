"""Hostile review (helper, thirtieth sitting) of 3700341 + e532704, and what came of it:

1. `plausible.repeated_values`: a candidate median repeated bit-identically over >= 3 looks while
   best's varies no longer counts when its mean over the same calls shows a measurement. The
   review's three ways around the first form (a mean column only the candidate's rows carry, a
   replay with one look edited, a mean moved by one ulp) are closed (`_mean_measured`).
2. `profile._judge`: e532704 let a gain the profiler read at least half of (log terms) agree
   where its interval lay wholly above the bench's. The review broke it six ways (the whole-run
   fallback, one config riding on its neighbour, a banked slowed profile, a claim past
   suspicious_speedup settled on its square root); it was withdrawn, and the H200's real
   num_warps gains it was for go to review again (docs/profiling.md: a false negative kept on
   purpose; `test_e2e_the_honest_counterpart_goes_to_review`).
3. Older holes the review found: a loss in a class the keep does not claim that the bench
   understates or leaves undecided is now judged against [decide].max_other_regression_pct
   (`profile._loss_beyond`), and a noisy timer whose wide interval reached the profiler's no
   longer inflates a real gain's figure past the square of the most the profiler allows (the
   square rule in `profile._judge`). One stayed open (xfail strict) until the thirty-first sitting:
   a kept tree slow only when profiled as BEST (the closer profile ran it in best_more/) lent each
   later timer patch a gain; every profile now runs in a copy that says neither side.

The attacker writes the candidate's tree and can read kopt's source; the bench's numbers come from
its process (forgeable), the profiler's kernel times do not, except that a tree can always make its
own kernels slower while it is profiled (it knows: KOPT_PROFILE, ncu's injection) and never faster.
Every test asserts the SAFE behaviour.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.decide.confirmation import Confirmation
from kopt_supervisor.engine.decide.estimate import Pair, Policy
from kopt_supervisor.engine.decide.external_truth import settle
from kopt_supervisor.engine.decide.plausible import mean_not_faster, repeated_values
from kopt_supervisor.engine.decide.verdict import GUARD_CLASS, evaluate
from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.profile import ALL_CLASSES, agrees
from kopt_supervisor.engine.profile.classes import compare_per_class
from kopt_supervisor.engine.profile.summary import Launch, ProfileSummary, summarize
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.engine.test_gate_in_loop import FAST_GATE, GPU, NCU_BIN
from tests.engine.test_keep_profile_reuse import record, two_keeps
from tests.profile.test_profile_classes import CONFIGS, NARROW, REFS, WIDE, Bench, profile, statuses

ORDER = ("AB", "BA")


# -- the profiler's agreement, unit level --------------------------------------------------------


def test_fallback_a_whole_run_gain_does_not_confirm_a_class_that_did_nothing_uniform_claims():
    """Broke e532704's half rule (withdrawn since). Without ranges the whole run stands for every class. The wide
    class (600 us a call) really gains 18%, which moves the whole run by about as much; narrow
    (14 us) did nothing, and the bench's timer claims -30% on it. Both classes "improved", so
    the verdicts are uniform and a disagreement would stand. Before e532704 narrow's bench
    interval lying below the whole run's was a disagreement (review); now the whole run's -18%
    is "at least half" of narrow's -30% and narrow's fake gain is confirmed by the profiler."""
    cmp = compare_per_class(profile(1, ranged=False), profile(2, ranged=False, scale={WIDE: 0.8}), REFS)
    assert not cmp.per_class and [c.cls for c in cmp.classes] == [ALL_CLASSES]
    (whole,) = cmp.classes
    assert whole.lo is not None and whole.hi is not None and 0.80 < whole.lo < whole.hi < 0.84
    fake = Bench(NARROW, "improved", 0.70, 0.69, 0.71)  # narrow's kernels are untouched
    honest = Bench(WIDE, "improved", 0.82, 0.81, 0.83)
    ag = agrees([fake, honest], cmp)
    narrow = {c.cls: c for c in ag.classes}[NARROW]
    # safe: the whole run cannot show a gain of one class it cannot tell from the others'
    assert narrow.status != "agrees", narrow.reason


def test_fallback_a_whole_run_gain_does_not_confirm_a_class_that_did_nothing_mixed_verdicts():
    """Broke e532704's half rule (withdrawn since). As above, but the timer also reports the class that really
    gained as tied (a target_class keep on narrow): the verdicts are not uniform, so the old
    rule's disagreement became "cannot tell" (unshown -> closer profile -> review). The new
    branch returns "agrees" before that downgrade is reached: the whole run's gain, made by
    another class the bench calls tied, confirms narrow's fake -30%."""
    cmp = compare_per_class(profile(3, ranged=False), profile(4, ranged=False, scale={WIDE: 0.8}), REFS)
    ag = agrees([Bench(NARROW, "improved", 0.70, 0.69, 0.71), Bench(WIDE, "tied", 1.0, 0.995, 1.005)], cmp)
    narrow = {c.cls: c for c in ag.classes}[NARROW]
    assert narrow.status != "agrees", narrow.reason


def _per_config(seed: int, scale: dict[str, float], cv: float = 0.003, calls: int = 7) -> ProfileSummary:
    """Like test_profile_classes.profile, each config scaled on its own (config key -> factor)."""
    rng = random.Random(seed)
    launches = []
    for key, ns in CONFIGS.items():
        for _ in range(calls):
            launches.append(Launch("flush", 20000.0 * (1 + rng.gauss(0, cv)), range=""))
            launches.append(Launch("k", ns * scale.get(key, 1.0) * (1 + rng.gauss(0, cv)), range=f"kopt:{key}"))
    return summarize(launches, "", tool="test")


def test_a_config_that_did_nothing_gets_no_gain_from_its_class_neighbour():
    """Broke e532704's half rule (withdrawn since). Narrow has two configs: n=1024 really 36% faster, n=2048
    untouched. The profiler's class ratio is their geometric mean, -20%. The timer reports
    both configs at -34% (class -34%): inside the square of the class's -20%, so it agrees,
    and the per-config figures of the keep (the report's speedup per config) show -34% on a
    config whose kernels did not change. Docs/profiling.md says a timer patch on a change that
    does nothing is refuted whatever it claims; at config level it is now confirmed."""
    cmp = compare_per_class(_per_config(5, {}), _per_config(6, {"dclass=narrow,n=1024": 0.64}), REFS)
    narrow = cmp.by_class()[NARROW]
    assert narrow.ratio is not None and abs(narrow.ratio - 0.8) < 0.01
    ag = agrees([Bench(NARROW, "improved", 0.66, 0.65, 0.67)], cmp)
    assert statuses(ag)[NARROW] != "agrees", ag.classes[0].reason


def test_a_wide_forged_bench_interval_cannot_claim_beyond_the_square_of_what_the_profiler_sees():
    """An older hole (before 3700341 too), closed by the square rule in `profile._judge`. The
    strict rule refutes a claim only where the profiler's interval lies wholly above the
    bench's; a forger who adds noise to its numbers widens the bench's interval up to the profiler's (b_hi 0.83)
    and then only hi < 1 is asked. The profiler sees -19%; the bench's recorded -50% is far
    beyond its square (-34%). by_profiler does not stand in (shows_half fails), so the keep
    goes to the looks (the same timer) and its external truth reads "confirmed"."""
    cmp = compare_per_class(profile(40), profile(41, scale={WIDE: 0.81}), REFS)
    wide = cmp.by_class()[WIDE]
    assert wide.hi is not None and wide.hi**2 > 0.6  # the profiler's gain squared: about -34%
    ag = agrees([Bench(WIDE, "improved", 0.5, 0.30, 0.83)], cmp)
    (c,) = ag.classes
    assert c.status == "disagrees" and "more than twice the most gain the profiler allows" in c.reason, c.reason
    # the honest counterpart: a claim within the square of what the profiler allows still agrees
    assert statuses(agrees([Bench(WIDE, "improved", 0.78, 0.70, 0.86)], cmp))[WIDE] == "agrees"


def test_the_regressed_mirror_refutes_a_loss_the_bench_understates():
    """An older hole, closed by `profile._loss_beyond`. e532704 calls its regressed branch the mirror of the
    improved one, but it mirrors the harmless side: it refutes a bench that overstates a loss
    (the profiler's interval below the bench's), which only hurts the candidate. A loss the
    bench understates (the profiler's interval wholly above the bench's) agrees whatever its
    size ("the profiler sees a loss"). With [decide].max_other_regression_pct = 5 (the kernel
    catalog's), a class the timer reports +3% is regressed_ok and the keep stands; the profiler
    sees +40% on it. A tied class would have been refuted (lo > 1+e): reporting a small
    significant loss instead of a tie escapes that rule."""
    pol = Policy(max_other_regression_pct=5.0)
    pairs = []
    for r in range(6):
        b = 100.0 + r / 7
        jig = 1 + 0.001 * (-1) ** r
        pairs.append(Pair("dclass=narrow,n=1024", NARROW, b, b * 0.9 * jig, r, ORDER[r % 2]))
        pairs.append(Pair("dclass=wide,n=4096", WIDE, 6 * b, 6 * b * 1.03 * jig, r, ORDER[r % 2]))
    v = evaluate(pairs, pol, target_class=NARROW)
    assert v.kind == "keep", v.reason
    bench = v.by_class()[WIDE]
    assert bench.verdict == "regressed" and bench.hi < 1.05
    cmp = compare_per_class(profile(42), profile(43, scale={NARROW: 0.9, WIDE: 1.4}), REFS)
    assert (cmp.by_class()[WIDE].lo or 0) > 1.35
    ag = agrees(v.classes, cmp, min_effect_pct=pol.min_effect_pct)
    assert statuses(ag)[WIDE] == "disagrees", {c.cls: c.reason for c in ag.classes}


def test_a_class_the_bench_leaves_undecided_but_harmless_is_still_judged_by_the_profiler():
    """An older hole, closed by `profile._loss_beyond`; the "tied classes" interaction. A non-target class
    whose interval lies below max_other_regression_pct without being a tie stays "undecided" in
    the keep (harm_ruled_out: flag regression_ruled_out), and `agrees` does not judge an
    undecided class (not_judged). A timer that reports such a class as noise around -0.4%
    hides a +40% loss the profiler sees: a tied class would have been refuted (lo > 1+e)."""
    wide_ratios = [0.985, 1.004, 0.99, 1.006, 0.988, 1.003]
    pairs = []
    for r, w in enumerate(wide_ratios):
        b = 100.0 + r / 7
        pairs.append(Pair("dclass=narrow,n=1024", NARROW, b, b * 0.9 * (1 + 0.001 * (-1) ** r), r, ORDER[r % 2]))
        pairs.append(Pair("dclass=wide,n=4096", WIDE, 6 * b, 6 * b * w, r, ORDER[r % 2]))
    v = evaluate(pairs, Policy(), target_class=NARROW)
    assert v.kind == "keep" and "regression_ruled_out" in v.flags, v.reason
    assert v.by_class()[WIDE].verdict == "undecided"
    cmp = compare_per_class(profile(44), profile(45, scale={NARROW: 0.9, WIDE: 1.4}), REFS)
    ag = agrees(v.classes, cmp)
    assert statuses(ag)[WIDE] == "disagrees", {c.cls: c.reason for c in ag.classes}


def test_the_half_rule_is_not_a_way_to_bank_a_sandbagged_profile():
    """Broke e532704's half rule (withdrawn since), unit level. Two keeps of one class:
    v1 is honest in the bench (-20%) and slows its own kernels while profiled (it can: only
    slower, never faster), so the profiler reads -12%, "at least half": v1 agrees. v2 changes
    no kernel, drops the slowdown and patches the timer to -15%: the profiler compares it with
    v1's slowed profile and sees -9%, at least half of -15%: v2 agrees too. A keep whose
    kernels equal BEST's is confirmed by the profiler; the end-to-end run is
    test_e2e_a_tree_that_only_drops_its_profiled_slowdown_is_not_kept."""
    base = profile(50, scale={WIDE: 1.0})
    v1 = profile(51, scale={WIDE: 0.88})  # really 0.80, slowed by 10% while profiled
    v2 = profile(52, scale={WIDE: 0.80})  # v1's kernels, not slowed
    first = agrees([Bench(WIDE, "improved", 0.80, 0.795, 0.805)], compare_per_class(base, v1, REFS))
    second = agrees([Bench(WIDE, "improved", 0.85, 0.845, 0.855)], compare_per_class(v1, v2, REFS))
    # safe: not both (v2 is v1's kernels with a timer patch)
    assert not (statuses(first)[WIDE] == "agrees" and statuses(second)[WIDE] == "agrees"), (
        first.classes[0].reason,
        second.classes[0].reason,
    )


# -- repeated_values -----------------------------------------------------------------------------


def _grid(cand: list[float], best: list[float], cand_mean: list[float], best_mean: list[float]) -> list[Pair]:
    return [
        Pair("D=1", "wide", b, c, r, ORDER[r % 2], best_mean=bm, cand_mean=cm)
        for r, (c, b, cm, bm) in enumerate(zip(cand, best, cand_mean, best_mean, strict=True))
    ]


BEST = [100.102, 99.871, 100.254, 100.011]


def test_a_mean_column_only_the_candidates_rows_report_does_not_excuse_a_replayed_median():
    """Broke e532704's half rule (withdrawn since). Best's rows report no `us_mean` (the bench writes none); the
    candidate's process adds one, varying. The exemption looks at the candidate's means alone,
    so the replayed median passes repeated_values, and mean_not_faster, which needs best's mean,
    says nothing either: one column the bench never wrote turns off both checks."""
    nan = math.nan
    pairs = _grid([81.234567] * 3, BEST[:3], [81.31, 81.27, 81.29], [nan, nan, nan])
    assert mean_not_faster([], pairs, Policy()) is None  # nothing to compare without best's means
    f = repeated_values(pairs)
    assert f is not None and f.configs == ("D=1",)


def test_a_replay_whose_mean_differs_in_one_look_only_is_still_a_replay():
    """Broke e532704's half rule (withdrawn since). Four looks: the same row replayed in three (median and mean
    bit-identical, "a replayed row repeats its mean too"), the mean edited in the fourth. The
    exemption asks only whether the means are not all equal; three identical (median, mean)
    rows are a replay whatever the fourth says."""
    means = [81.31, 81.31, 81.31, 81.29]
    pairs = _grid([81.234567] * 4, BEST, means, [b + 0.05 for b in BEST])
    f = repeated_values(pairs)
    assert f is not None and f.configs == ("D=1",)


def test_a_mean_that_varies_by_one_ulp_does_not_make_a_repeated_median_measured():
    """Within the documented limit ("a forger who varies the mean column alone passes"), here
    because the fix is cheap: the honest H200 means vary by ~0.0008 us against best's ~0.006
    (a seventh); a mean varying by one ulp (1e-14) is no measurement. Requiring the means'
    spread to reach best's own spread / RESOLUTION_FACTOR keeps the H200 case and refuses this."""
    m = 81.31
    means = [m, math.nextafter(m, math.inf), m]
    pairs = _grid([81.234567] * 3, BEST[:3], means, [b + 0.05 for b in BEST[:3]])
    f = repeated_values(pairs)
    assert f is not None and f.configs == ("D=1",)


def test_the_honest_quantised_median_stays_unflagged():
    """The rule's purpose (control: passes): the H200's num_warps 1->2 config."""
    best = [2.70288, 2.71175, 2.70062]
    pairs = _grid([2.71563] * 3, best, [2.71611, 2.71504, 2.71661], [b + 0.001 for b in best])
    assert repeated_values(pairs) is None


# -- end to end: the fake target with the stand-in ncu -------------------------------------------


def _do(*statements: str) -> str:
    return "do:" + "".join(statements) + "json.dump(k, open('kernel.json', 'w'))"


def _run(
    fake_env,
    tmp_path: Path,
    monkeypatch,
    tag: str,
    script: list[str],
    *,
    kernel: dict | None = None,
    ncu_bin: Path = Path(NCU_BIN),
    profile_kernel: str = "fake",
    profile: str = "",
    extra: str = "",
    no_sandbox: bool = False,
) -> Workspace:
    """tests/engine/test_keep_profile_reuse.two_keeps with the baseline's kernel.json updated by
    `kernel` (committed), the stand-in ncu taken from `ncu_bin`, lines added to [profile]
    (`profile`) and more of kopt.toml (`extra`), the engine optionally unconfined."""
    repo, root = fake_env(
        script,
        extra_toml=f'\n[profile]\nkind = "ncu"\nkernel = "{profile_kernel}"\n{profile}\n{extra}',
        toml_replace={**dict([FAST_GATE]), "review_timeout_s = 2": "review_timeout_s = 1800"},
    )
    if kernel:
        base = json.loads((repo / "kernel.json").read_text())
        (repo / "kernel.json").write_text(json.dumps({**base, **kernel}))
        who = {
            "GIT_AUTHOR_NAME": "a",
            "GIT_AUTHOR_EMAIL": "a@b",
            "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@b",
        }
        subprocess.run(["git", "commit", "-qam", "baseline"], cwd=repo, check=True, env={**os.environ, **who})
    fake = tmp_path / "gpus.json"
    fake.write_text(json.dumps([[GPU]]))
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(fake))
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    monkeypatch.setenv("PATH", f"{ncu_bin}:{os.environ['PATH']}")
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", tag]) == 0
    ws = Workspace(root, tag)
    assert run_engine(ws, max_iters=len(script), no_sandbox=no_sandbox) == 0
    return ws


def test_e2e_without_ranges_a_class_that_did_nothing_is_not_kept_on_another_class_gain(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    """Broke e532704's half rule (withdrawn since), end to end. cls=large really gains 18% (the profiler's
    kernels too); cls=small did nothing (ncu_speed 1.0) and the timer claims -28% on it. The
    whole run (dominated by large's 350 us) reads about -17%: before e532704 small disagreed
    (review); now v1 is kept with small's -28% recorded."""
    cheat = _do(
        "speed['small'] = 0.72; speed['large'] = 0.82; ",
        "k['ncu_speed'] = {'small': 1.0, 'large': 0.82}; ",
    )
    ws = _run(fake_env, tmp_path, monkeypatch, "f", [cheat], kernel={"no_ranges": True}, profile_kernel="fake_kernel")
    v1 = record(ws, 1)
    assert v1["profile"]["comparison"]["per_class"] is False
    small = {c["cls"]: c for c in v1["profile"]["agreement"]["classes"]}["cls=small"]
    assert small["bench_ratio"] < 0.75  # the claim the test is about reached the profiler
    assert not (v1["status"] == "keep" and small["status"] == "agrees"), (v1["status"], small["reason"])


def test_e2e_a_tree_that_only_drops_its_profiled_slowdown_is_not_kept(fake_env, tmp_path, monkeypatch, driven_clock):
    """Broke e532704's half rule (withdrawn since). v1: an honest -20% in the bench, its kernels slowed to -12% while profiled
    (kernel.json's ncu_speed: what the GPU does under ncu); the half rule agrees. v2: the same
    kernels (speed 0.8 really, as v1), the slowdown dropped (ncu 0.8) and the timer patched to
    claim -15% (speed 0.68). The profiler compares v2 with v1's slowed profile (reused as
    best's) and sees -9%, at least half of -15%: v2 is kept, a tree that changed nothing but
    its timer and its own slowdown, confirmed by its profile pair (no looks)."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_speed'] = {'small': 0.88, 'large': 0.88}; ")
    v2 = _do("k['ncu_speed'] = {'small': 0.8, 'large': 0.8}; speed['small'] = speed['large'] = 0.68; ")
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "s", script=[v1, v2], iters=2)
    r1, r2 = record(ws, 1), record(ws, 2)
    # safe: v2 (v1's kernels plus a timer patch) is not kept
    assert r2["status"] != "keep", (r1["status"], r2["status"], r2["decision"]["reason"])


def test_e2e_the_honest_counterpart_goes_to_review(fake_env, tmp_path, monkeypatch, driven_clock):
    """The H200 case e532704 was for (bench -20%, profiler -12%: a real gain the profiler reads
    smaller) is not kept: the profiler's interval lies above the bench's and rules out the gain
    it measured. A false negative kept on purpose (docs/profiling.md) while the attacks above
    stand: the engineer's review decides."""
    honest = _do("speed['small'] = speed['large'] = 0.8; k['ncu_speed'] = {'small': 0.88, 'large': 0.88}; ")
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "c", script=[honest], iters=1)
    r1 = record(ws, 1)
    assert r1["status"] != "keep", r1["decision"]
    assert "profiler_disagrees" in r1["decision"]["flags"]
    reasons = [c["reason"] for c in r1["profile"]["agreement"]["classes"] if c["status"] == "disagrees"]
    assert reasons and all("rules out the gain the bench measured" in r for r in reasons), reasons


def test_a_speed_too_good_for_the_benchs_word_is_not_confirmed_by_a_profiler_that_sees_its_square_root():
    """Broke e532704's half rule (withdrawn since). A claim beyond suspicious_speedup (3x) needs the stronger checks: the
    external truth and an output audit on fresh inputs (`settle`). The timer claims 3.7x; the
    profiler sees 2x, below the threshold that escalated the keep, yet "at least half" (log
    terms), so it agrees, Evidence.external_truth calls it confirmed and `settle` keeps 3.7x as
    "the stronger checks agree". What was too good to take on the bench's word is taken on it:
    the one figure that escalated is the one no clock outside the process shows."""
    pairs = []
    for r in range(4):
        b = 100.0 + r / 7
        for key, cls, scale in (("dclass=narrow,n=1024", NARROW, 1.0), ("dclass=wide,n=4096", WIDE, 6.0)):
            pairs.append(Pair(key, cls, scale * b, scale * b * 0.27 * (1 + 0.001 * (-1) ** r), r, ORDER[r % 2]))
    v = evaluate(pairs, Policy())
    assert v.kind == "keep" and v.needs_stronger_checks, v.reason
    cmp = compare_per_class(profile(60), profile(61, scale={NARROW: 0.5, WIDE: 0.5}), REFS)
    ag = agrees(v.classes, cmp, guards={GUARD_CLASS: Policy().guard_max_regression_pct})
    ev = Evidence(SimpleNamespace())  # type: ignore[arg-type]
    ev.profiler = lambda lane, it: object()  # type: ignore[method-assign,assignment,return-value]
    it = SimpleNamespace(record={"profile": {"agreement": ag.to_dict(), "taken": {"calls": None}}})
    truth = ev.external_truth(it, SimpleNamespace(vendor="nvidia"))  # type: ignore[arg-type]
    served = Confirmation("confirmed", "fresh servers' looks show the claim, outputs audited", 3)
    settled = settle(v, served, truth)
    assert settled.kind != "keep", (truth.outcome, truth.reason, settled.reason)


SPEED_LINE = 'speed = kernel_json.get("ncu_speed") or kernel_json["speed"]\n'
SLOW_AS_BEST = SPEED_LINE + (
    "import re\n"
    "env = [v for k, v in os.environ.items() if not k.startswith('PYTEST_')]  # pytest's: the test's name\n"
    "seen = [opts['--export'], os.getcwd(), *env]\n"
    "for fd in (1, 2):\n"
    "    try:\n"
    "        seen.append(os.readlink(f'/proc/self/fd/{fd}'))\n"
    "    except OSError:\n"
    "        pass\n"
    "told = [x for x in seen if re.search(r'(^|[/_])best([/_.]|$)|/logs/v[0-9]+/', x)]  # its side, or its iteration\n"
    "open(opts['--export'] + '.role', 'w').write('\\n'.join(told))\n"
    "if told:\n"
    "    speed = {c: v * float(kernel_json.get('ncu_slow_as_best', 1.0)) for c, v in speed.items()}\n"
)


@pytest.fixture
def role_aware_ncu() -> Iterator[Path]:
    """The stand-in ncu, plus kernel.json's "ncu_slow_as_best": the tree's kernels that much
    slower where it can tell it is profiled as BEST: a folder or log named best (best/,
    best_more/, profile_best.out), or a log in logs/vN/ (its iteration, which a kept tree can
    compare with its own), in what a profiled process sees (its profiler's output path,
    its working folder, its environment, where its stdout and stderr go). What told it is
    written beside the report (`<report>.role`, empty: nothing did). Written outside /tmp: the
    sandbox gives every process a private /tmp."""
    yield from patched_ncu("s30", {SPEED_LINE: SLOW_AS_BEST})


def patched_ncu(tag: str, lines: dict[str, str]) -> Iterator[Path]:
    """A fixture's body: tests/fake_target/bin/ncu with each of `lines` (each there once) replaced,
    in a folder of its own outside /tmp (the sandbox gives every process a private /tmp), yielded
    and removed after."""
    text = (Path(NCU_BIN) / "ncu").read_text()
    for old, new in lines.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    folder = Path(__file__).parent / ".runs" / f"{tag}-ncu-{uuid.uuid4().hex[:8]}"
    (folder / "bin").mkdir(parents=True)
    ncu = folder / "bin" / "ncu"
    ncu.write_text(text)
    ncu.chmod(0o755)
    try:
        yield folder / "bin"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_role_aware_ncu_tells_best_where_it_shows(role_aware_ncu, tmp_path):
    """The fixture's own check (else the test below proves nothing): run as kopt ran a best profile
    before every profile ran in a copy (its output in best_more/, its log profile_best.out), it
    is slowed; in a folder of no side's name, it is not."""
    (tmp_path / "kernel.json").write_text(json.dumps({"speed": {"small": 1.0, "large": 1.0}, "ncu_slow_as_best": 2.0}))
    argv = [str(role_aware_ncu / "ncu"), "--metrics", "gpu__time_duration.sum", "--log-file"]

    def times(out: Path, log: Path) -> list[float]:
        out.mkdir(parents=True)
        with open(log, "w") as f:
            subprocess.run(
                [*argv, str(out / "page"), "--export", str(out / "ncu"), "true"], cwd=tmp_path, stdout=f, check=True
            )
        return [
            x[2] for x in json.loads((out / "ncu.ncu-rep").read_text())["launches"] if x[0].startswith("fake_kernel")
        ]

    slow = times(tmp_path / "best_more", tmp_path / "run.out")
    told = (tmp_path / "best_more" / "ncu.role").read_text()
    fast = times(tmp_path / "ab12" / "out", tmp_path / "run2.out")
    assert (tmp_path / "ab12" / "out" / "ncu.role").read_text() == ""
    assert "best_more" in told and all(s == pytest.approx(2 * f) for s, f in zip(slow, fast, strict=True))
    slow_by_log = times(tmp_path / "cd34" / "out", tmp_path / "profile_best.out")
    assert slow_by_log == pytest.approx(slow)
    (tmp_path / "logs" / "v3").mkdir(parents=True)  # a log in logs/vN/ tells a kept tree its iteration
    assert times(tmp_path / "ef56" / "out", tmp_path / "logs" / "v3" / "profile_x.out") == pytest.approx(slow)


def test_e2e_a_kept_tree_slow_as_best_under_the_profiler_lends_no_later_timer_patch_a_gain(
    fake_env, tmp_path, monkeypatch, driven_clock, role_aware_ncu
):
    """Was open until every profile ran in a copy that says neither side (profile_runs.ProfiledTree).
    v1 is an honest -20% carrying dormant code that slows its kernels by 12% when profiled as
    BEST. v2 and v3 change no kernel (ncu_speed stays v1's 0.8), patch the timer, and are noisy
    in the first profile only (ncu_jitter_first: a tree knows which pass it is in), so the
    profiler cannot tell and takes the closer profile, which profiles BEST afresh (never
    reused). When that ran in best_more/, best was slow there: the profiler saw -11% and agreed
    with the timer, and each no-op keep banked it, without end. In copies nothing a profiled
    process sees says best: no profile is slowed, the no-ops show no gain, and neither is kept."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_slow_as_best'] = 1.12; ")
    noop = "k['ncu_speed'] = {'small': 0.8, 'large': 0.8}; k['ncu_jitter_first'] = 0.25; "
    v2 = _do(noop, "speed['small'] *= 0.9; speed['large'] *= 0.9; ")
    v3 = _do(noop, "speed['small'] *= 0.82; speed['large'] *= 0.82; ")
    ws = _run(fake_env, tmp_path, monkeypatch, "b", [v1, v2, v3], ncu_bin=role_aware_ncu)
    r1, r2, r3 = (record(ws, v) for v in (1, 2, 3))
    assert r1["status"] == "keep", r1["decision"]
    # safe: neither no-op (v1's kernels and a timer patch) is kept
    kept = [v for v, r in ((2, r2), (3, r3)) if r["status"] == "keep"]
    assert not kept, {v: record(ws, v)["decision"]["reason"] for v in kept}
    # and why: no profile of any tree, best's in the closer profile included, could tell its side
    roles = sorted(ws.profiles.rglob("*.role"))
    assert any("best_more" in str(r) for r in roles), roles  # the closer profile ran
    told = {str(r.relative_to(ws.profiles)): r.read_text() for r in roles if r.read_text()}
    assert not told, told
