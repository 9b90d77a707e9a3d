"""Hostile review (helper, thirty-second sitting) of 32b895b: each config's profiled GPU time
divided by the calls kopt ASKED the bench to make (profiler.ProfileCalls, ProfileSummary.asked,
classes._calls and floors._calls prefer them), the bench's own calls read from the trusted
baseline's profile (outputs.json "calls": profiler.own_calls, Evidence.own_calls), and in
"first-keep" mode the first pair relabelled with them after it ran unasked (Evidence.confirm).

The attacker writes candidate trees (which later run as BEST) and can read kopt's source; a tree
can always make its kernels slower under the profiler, never faster, can run more or fewer calls
in its ranges than it was asked, and knows which pass it is in (KOPT_PROFILE_CALLS). Every test
asserts the SAFE behaviour.

Found open, and closed in the same sitting (each was xfail strict): a closer profile's outputs are held to best's count only, never to
the calls asked (two colluding trees; older than 32b895b, now cheap to close); with rocprofv3 the
calls asked replace the range openings the tool counted, so a candidate opening its ranges fewer
times than asked is no longer a problem (a regression); best's floor compares a tree kept on a
closer profile (12 calls) with a fresh profile at its own 4, so an honest one-time kernel sends
the next real gain to review (a regression, unit and end to end); and masking the first-keep
anchor forgets the bench's own calls, after which the floor mixes calls asked with launches.
The fixes: a closer pair's outputs held on both sides to the calls asked x the baseline's outputs
per call (profiler.compare_outputs `asked`, `own`); range openings that differ from the calls
asked are the count (classes._calls); best's floor takes kept's time at the fresh profile's calls,
a kernel launched fewer times than its calls counted once (floors._at_calls), and compares no
config counted two ways; own calls read from the anchor masked or not.
Held (pass): fewer outputs than the baseline's refuted; a BEST running twice the calls asked
caught by its floor (unit and end to end); a BEST's helper launch no longer lowers the bytes
floor; own calls never read from a candidate's folder; the calls asked survive the record, a
pickle (Ray lanes) and an old record (None).
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import random
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.profile.classes import compare_per_class
from kopt_supervisor.engine.profile.floors import bytes_short, slower_than_kept
from kopt_supervisor.engine.profile.profiler import (
    PROFILE_OUTPUTS,
    CorrectnessRefuted,
    ProfileCalls,
    baseline_reference,
    compare_outputs,
    kept_profile,
    own_calls,
)
from kopt_supervisor.engine.profile.summary import Launch, ProfileSummary, summarize
from tests.engine.test_keep_profile_reuse import record
from tests.profile.test_profile_classes import CONFIGS, NARROW, REFS, WIDE
from tests.security.harness import KEPT
from tests.security.test_review_s30_hostile import _do, patched_ncu
from tests.security.test_review_s30_hostile import _run as s30_run

RUNS = Path(__file__).parent / ".runs"

KEYS = list(CONFIGS)
COLUMNS = ["dclass", "n"]
NEED = {key: 1_000_000.0 for key in KEYS}
"""The bytes a call of each config reads and writes ([roofline].bytes), for the bytes floor."""


def _summary(
    seed: int,
    calls: int,
    *,
    scale: float = 1.0,
    helper: float = 0.0,
    asked: int | dict[str, int] | None = None,
    openings: bool = False,
    l2: float = 1.5,
    cv: float = 0.002,
) -> ProfileSummary:
    """One profile of test_profile_classes' configs: `calls` launches of `k` a config (`scale` on
    all), each moving `l2` x a call's bytes (NEED) through L2; `helper` > 0: one launch of another
    kernel in each config's range, that share of a call long (a one-time table, a zeroed workspace);
    `openings`: the tool tells each call's range apart (rocprofv3); `asked`: what kopt asked of
    every config (a number, or per config), as profile_in records it (None: nothing named)."""
    rng = random.Random(seed)
    launches = []
    for key, ns in CONFIGS.items():
        where = f"kopt:{key}"
        if helper:
            launches.append(
                Launch("helper", ns * helper, range=where, l2_bytes=0.0, range_instance="0" if openings else None)
            )
        for i in range(calls):
            t = ns * scale * (1 + rng.gauss(0, cv))
            launches.append(
                Launch("k", t, range=where, l2_bytes=l2 * NEED[key], range_instance=str(i) if openings else None)
            )
    summary = summarize(launches, "", tool="rocprofv3" if openings else "ncu")
    if asked is None:
        return summary
    named = asked if isinstance(asked, dict) else dict.fromkeys(KEYS, asked)
    return dataclasses.replace(summary, asked=tuple(sorted(named.items())))


def _outputs(folder: Path, per_config: int, *, calls: int | None = None, value: float = 1.0) -> Path:
    """A profile's outputs.json as kopt's harness writes it: per config one entry whose outputs are
    every profiled call's (`per_config` of them, in order), saying `calls` where given."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for key in KEYS:
        cols = dict(part.split("=") for part in key.split(","))
        outs = [
            {
                "numel": 4,
                "nan": 0,
                "inf": 0,
                "sum": value * (j + 1),
                "abs_sum": value * (j + 1),
                "samples": [[0, value]],
            }
            for j in range(per_config)
        ]
        entry = {"config": cols, "sets": 1, "set": 0, "atol": 1e-3, "rtol": 1e-3, "outputs": outs}
        if calls is not None:
            entry["calls"] = calls
        entries.append(entry)
    (folder / PROFILE_OUTPUTS).write_text(json.dumps({"version": 1, "configs": entries}))
    return folder


# -- 1. a candidate that runs fewer calls than asked ------------------------------------------------


def test_a_candidate_that_wrote_fewer_calls_outputs_than_the_baseline_is_refuted(tmp_path):
    """A candidate that runs 3 of the 4 calls kopt asked (its time then divided by 4: -25%) must
    still write every asked call's outputs: its first profile is compared with the baseline's,
    which ran the same calls, output by output. Three where the baseline wrote four: refuted."""
    base = _outputs(tmp_path / "v0" / "best", 4, calls=4)
    cand = _outputs(tmp_path / "v1" / "cand", 3, calls=4)  # it may say 4: kopt never reads that
    with pytest.raises(CorrectnessRefuted):
        compare_outputs(base, cand, columns=COLUMNS, configs=set(KEYS), earlier=[], reference="baseline")


def test_a_closer_profile_whose_outputs_are_short_of_the_calls_asked_is_refuted(tmp_path):
    """Attack (two trees of one proposer; older than 32b895b, which now gives kopt the numbers to
    close it). In a closer profile the candidate's outputs are compared with best's closer
    profile (`best_more/`), not with the baseline's: its seed is new. BEST is a kept tree, a
    candidate once. v1, an honest gain kept on a clear first profile (so never checked in a
    closer one), writes in every closer profile only the outputs of all calls but the last of
    each config (it knows the pass: KOPT_PROFILE_CALLS names other counts than the bench's own).
    v2 changes no kernel, patches its timer (-8%), is noisy in its first profile, and in the
    closer profile runs 11 of the 12 calls asked and writes those 11 calls' outputs. The counts
    match best's, so the outputs pass; v2's 11 calls are divided by 12 (-8.3%); the bytes floor
    sees 11/12 x 1.5 of a call's bytes, far over 0.9; v1 ran its 12 calls, so best's floor holds.
    kopt knows it asked 12 calls and that the baseline wrote one output per call (its own 4
    calls, 4 outputs): 11 is short, on both sides. Fix: hold every profile's outputs count per
    config to the calls asked x the baseline's outputs per call (both sides of a closer pair)."""
    base = _outputs(tmp_path / "v0" / "best", 4, calls=4)  # the baseline's: 4 calls, one output each
    best_more = _outputs(tmp_path / "v2" / "best_more", 11, calls=12)
    cand_more = _outputs(tmp_path / "v2" / "cand_more", 11, calls=12)
    asked = dict.fromkeys(KEYS, 12)  # as Evidence.confirm passes a closer pair's (profile_outputs)
    got = compare_outputs(best_more, cand_more, columns=COLUMNS, configs=set(KEYS), earlier=[], asked=asked, own=base)
    assert "11 output summaries for the 12 calls asked" in got.get("unconfirmed", ""), got  # best short: no keep
    best_more = _outputs(tmp_path / "v3" / "best_more", 12, calls=12)
    with pytest.raises(CorrectnessRefuted, match="11 output summaries for the 12 calls asked, not 12"):
        compare_outputs(best_more, cand_more, columns=COLUMNS, configs=set(KEYS), earlier=[], asked=asked, own=base)


def test_rocprof_range_openings_unlike_best_are_a_problem_when_nothing_is_asked():
    """The check 32b895b bypasses (control, passes): with rocprofv3 (openings counted) and no calls
    asked, a candidate that opened its ranges 3 times where best opened them 4 is a problem for
    its class ("the bench must run the same calls"), which then cannot be confirmed."""
    best, cand = _summary(1, 4, openings=True), _summary(2, 3, openings=True)
    cmp = compare_per_class([best], [cand], REFS)
    assert all(c.problems for c in cmp.classes), [c.problems for c in cmp.classes]


def test_rocprof_a_candidate_that_opened_its_ranges_fewer_times_than_asked_is_a_problem():
    """Attack (a regression of 32b895b, rocprofv3 only). `classes._calls` now takes the calls kopt
    asked of both sides before the range openings the tool counted, so openings are never looked
    at: the candidate runs 3 of the 4 calls asked in its ranges (the fourth call's outputs made
    where no kopt range is open, or on the host), its total is 3/4 of best's and the class reads
    -25% with no problem; the bytes floor, 3/4 x 1.5 = 1.1 of a call's bytes, passes. Before,
    the openings (3 against best's 4) made the class a problem. Fix: where the tool counts
    openings, a side whose openings differ from the calls asked is a problem (and the bytes
    floor should divide by the least of asked and openings)."""
    best, cand = _summary(1, 4, openings=True, asked=4), _summary(2, 3, openings=True, asked=4)
    cmp = compare_per_class([best], [cand], REFS)
    assert all(c.problems for c in cmp.classes), [(c.cls, c.ratio, c.problems) for c in cmp.classes]


# -- 2. a BEST that runs other counts than asked ----------------------------------------------------


def test_a_best_that_runs_twice_the_calls_asked_is_caught_by_its_floor():
    """Attack: v1, kept, as BEST in a fresh profile runs each call twice (an honest kernel, twice
    the work in each range): counted by its launches (least-launched: 8) its time per call is
    unchanged, and every later candidate reads 2x faster against it. Divided by the 4 calls kopt
    asked, best is 2x slower per call than in its kept profile: best's floor names both classes."""
    kept, fresh = _summary(1, 4, asked=4), _summary(2, 8, asked=4)
    assert {s.cls for s in slower_than_kept(kept, fresh, REFS)} == {NARROW, WIDE}
    unasked = [dataclasses.replace(x, asked=None) for x in (kept, fresh)]  # a bench that never said its calls
    assert slower_than_kept(*unasked, REFS) == []


def test_a_best_with_a_helper_launch_does_not_lower_the_bytes_a_candidates_call_must_move():
    """Attack: the bytes floor counts a call from best's profile. v1 as BEST launches one tiny
    kernel once in each range of its fresh profile; counted by launches best's calls are 1, so
    a later candidate that hid 3 of its 4 calls' work from ncu (cuProfilerStop) moved 1.5 x a
    call's bytes "per call" and passed. Counted by the 4 calls kopt asked it moved 0.375 x."""
    best = _summary(1, 4, helper=0.01, asked=4)
    cand = _summary(2, 1, asked=4)  # one call's work seen, three hidden
    short = bytes_short(best, cand, REFS, NEED)
    assert short is not None and {x.config for x in short} == set(KEYS), short
    unasked = bytes_short(dataclasses.replace(best, asked=None), dataclasses.replace(cand, asked=None), REFS, NEED)
    assert unasked == []  # the hole before 32b895b (still open for a bench that never said its calls)


# -- 3. an honest tree, kept on a closer profile ----------------------------------------------------


def test_an_honest_one_time_kernel_kept_on_a_closer_profile_is_no_slowed_best():
    """Honest run misjudged (new with 32b895b). v1 is a real gain whose tree launches one kernel
    once in each config's range (a lazily built table, a zeroed workspace: a tenth of a call),
    kept on a closer profile (its first could not tell): 12 calls a config, so its kept profile
    reads a call as 1 + 0.1/12. A kept closer profile is never reused, so the next keep profiles
    best afresh at its own 4 calls: 1 + 0.1/4 a call, +1.7% "slower", beyond the floor's noise
    on the wide class; the next real gain goes to review (best_slowed). Counted by launches, as
    before, both profiles read the helper as 1 call and the fresh one looked faster: this
    direction never fired. Fix: hold best to its kept profile only per config at equal calls
    (skip a config asked other counts in the two), or compare the kernels whose launches scale
    with the calls."""
    kept = _summary(1, 12, helper=0.1, asked=12)
    fresh = _summary(2, 4, helper=0.1, asked=4)
    assert slower_than_kept(kept, fresh, REFS) == []


def test_an_honest_one_time_kernel_kept_on_its_first_profile_is_no_slowed_best():
    """The same tree kept on its first profile (4 calls) and profiled afresh at 4 or 12: never slower."""
    kept = _summary(1, 4, helper=0.1, asked=4)
    assert slower_than_kept(kept, _summary(2, 4, helper=0.1, asked=4), REFS) == []
    assert slower_than_kept(kept, _summary(3, 12, helper=0.1, asked=12), REFS) == []


# -- 4. where own calls come from -------------------------------------------------------------------


def _ctx(tmp_path: Path, iterations: list[SimpleNamespace]) -> SimpleNamespace:
    """The little of a RunContext Evidence.own_calls reads: the baseline (v0) and the iterations."""
    base = iterations[0]
    configs = {key: {"cls": key.split(",")[0], "row": dict(p.split("=") for p in key.split(","))} for key in KEYS}
    base.record.setdefault("configs", configs)
    base.record.setdefault("config_columns", COLUMNS)
    store = SimpleNamespace(iterations=lambda: list(iterations))
    history = SimpleNamespace(baseline=lambda: base, store=store)
    cfg = SimpleNamespace(decide=SimpleNamespace(production_verdicts=False))
    return SimpleNamespace(history=history, ws=SimpleNamespace(profiles=tmp_path), cfg=cfg)


def _it(version: int, record: dict, masked: bool = False) -> SimpleNamespace:
    return SimpleNamespace(version=version, record=record, masked=masked, commit=f"c{version}")


def test_own_calls_are_never_read_from_a_candidates_outputs(tmp_path):
    """Attack: own calls are the count every later profile is divided by. A kept candidate's
    outputs.json (profiles/vN/cand, written in its process) says 1 call a config; the baseline's
    (profiles/v0/best) says 4. own_calls reads the baseline's; with no baseline profile and no
    anchor (first-keep mode before its pair) it reads nothing, never a candidate's folder."""
    _outputs(tmp_path / "v0" / "best", 4, calls=4)
    _outputs(tmp_path / "v1" / "cand", 1, calls=1)
    _outputs(tmp_path / "v1" / "best", 1, calls=1)  # best of a keep whose best was not the baseline's tree
    kept = {"profile": {"seed": 9, "taken": {"trees": {"cand": "t1"}}}}  # a keep's record: its seed, no anchor
    ev = Evidence(_ctx(tmp_path, [_it(0, {"profile": {"seed": 7}}), _it(1, kept)]))  # type: ignore[arg-type]
    assert ev.own_calls() == dict.fromkeys(KEYS, 4)
    ev = Evidence(_ctx(tmp_path, [_it(0, {}), _it(1, kept)]))  # type: ignore[arg-type]
    assert ev.own_calls() == {}
    assert baseline_reference((0, {}), [(1, kept)], tmp_path) is None


def test_masking_the_first_keep_anchor_does_not_forget_the_benchs_own_calls(tmp_path):
    """Honest run misjudged, and the s31 holes reopened ([profile].baseline = "first-keep"). The
    baseline's calls are read from the anchor pair's best/ (the first keep's profile of the
    baseline's tree), found through `baseline_reference` over the UNMASKED iterations. The
    engineer masks that iteration (`kopt memory mask v1`: a borderline they refused, or the
    first keep itself, kept out of the proposer's memory): own calls become {} for the rest of
    the run, every later profile runs unasked and is counted by the tree's launches, while the
    kept profiles recorded before say the calls asked. Best's floor then mixes the two counts
    (next test), and the one-time-launch attacks of the s31 review work again. Fix: record the
    own calls in the baseline's record once read (or read the anchor whether masked or not)."""
    _outputs(tmp_path / "v1" / "best", 4, calls=4)
    anchor = {"profile": {"anchor": 11, "seed": 11}}
    ev = Evidence(_ctx(tmp_path, [_it(0, {}), _it(1, anchor, masked=True)]))  # type: ignore[arg-type]
    assert ev.own_calls() == dict.fromkeys(KEYS, 4)


def test_a_kept_profile_counted_by_calls_asked_and_a_fresh_one_by_launches_are_not_compared():
    """Honest run misjudged where the two counts meet (the anchor masked, above: the only way found
    into it; a pre-32b895b baseline names no calls, so such a run counts launches throughout):
    best's tree has a one-time kernel in each
    range (a tenth of a call). Its kept profile was divided by the 4 calls asked (1 + 0.1/4 a
    call), the fresh one, nothing asked, by its least-launched kernel: the helper, 1 launch, so
    one "call" is all 12 calls' work, 12x "slower": best_slowed on every later keep. Fix:
    `slower_than_kept` compares a config only where both profiles were counted the same way."""
    kept = _summary(1, 4, helper=0.1, asked=4)
    fresh = _summary(2, 12, helper=0.1)
    assert slower_than_kept(kept, fresh, REFS) == []


def test_a_kept_profile_keeps_the_calls_asked_through_its_record():
    """The floor reads best's kept profile from its keep's record (JSON; a Ray lane's summary comes
    back pickled): the calls asked survive it, and a record written before 32b895b reads as
    nothing asked (counted by launches, never by a guess)."""
    cand = _summary(1, 12, asked={**dict.fromkeys(KEYS, 4), KEYS[2]: 12})
    taken = {"trees": {"cand": "t1"}, "gpu": "h:g", "format": 2}
    got = kept_profile((3, {"profile": {"cand": cand.to_dict(), "taken": taken}}), "t1", "h:g")
    assert got is not None and got[1].asked == cand.asked
    assert pickle.loads(pickle.dumps(cand)).asked == cand.asked  # a Ray lane's summary, returned by its worker
    calls = ProfileCalls.closer(dict.fromkeys(KEYS, 4), [KEYS[2]])
    assert pickle.loads(pickle.dumps(calls)) == calls  # and the calls sent to it (HeldProfile.matches: equality)
    old = {k: v for k, v in cand.to_dict().items() if k != "asked"}
    got = kept_profile((3, {"profile": {"cand": old, "taken": taken}}), "t1", "h:g")
    assert got is not None and got[1].asked is None


def test_own_calls_name_every_config_or_none_and_closer_asks_only_named_configs(tmp_path):
    """A baseline whose outputs left one config out (its summary failed) names no calls at all
    (all or nothing: never a profile divided partly by calls asked, partly by launches), and a
    closer profile built from them names every config (the others at their own)."""
    folder = _outputs(tmp_path / "a", 4, calls=4)
    data = json.loads((folder / PROFILE_OUTPUTS).read_text())
    del data["configs"][0]["calls"]
    (folder / PROFILE_OUTPUTS).write_text(json.dumps(data))
    assert own_calls(folder, COLUMNS, KEYS) == {}
    closer = ProfileCalls.closer(dict.fromkeys(KEYS, 4), [KEYS[2]])
    assert dict(closer.asked or ()) == {KEYS[0]: 4, KEYS[1]: 4, KEYS[2]: 12}


# -- 5. end to end ----------------------------------------------------------------------------------

LOOP_LINE = "    for k in range(many):"
MORE_CALLS = (
    "    if ranged and CLOSER and kernel_json.get('ncu_double_closer'):  # every call run twice in a closer profile\n"
    "        many *= 2\n"
    "    share = float(kernel_json.get('ncu_helper_share', 0))  # one launch in each range, that share of a call\n"
    "    if ranged and share:\n"
    "        launches.append(['fake_helper', f'kopt:shape=s{j},cls={cls},n={n}', base * 1000 * factor * share, 0.0])\n"
) + LOOP_LINE


@pytest.fixture
def calls_ncu() -> Iterator[Path]:
    """tests/fake_target/bin/ncu plus kernel.json knobs: "ncu_double_closer" (in a closer profile,
    twice the calls kopt asked of each config: each call's kernel launched twice), and
    "ncu_helper_share" (one launch of `fake_helper` in each config's range, that share of one of
    its calls long, in every pass). Written outside /tmp: the sandbox gives every process a
    private /tmp."""
    yield from patched_ncu("s32h", {LOOP_LINE: MORE_CALLS})


NOOP = "k['ncu_speed'] = {'small': 0.8, 'large': 0.8}; k['ncu_jitter_first'] = 0.25; k.pop('ncu_double_closer', None); "
"""A later candidate that changes no kernel of v1's (0.8), drops v1's knob and is noisy in its first
profile only, so that the closer profile (best afresh, never reused) is taken."""


def test_e2e_a_best_that_runs_twice_the_calls_asked_in_a_closer_profile_lends_no_gain(
    fake_env, tmp_path, monkeypatch, driven_clock, calls_ncu
):
    """Attack, end to end. v1 (an honest -20%, kept on its clear first profile) runs each call
    twice in every closer profile: it costs v1 nothing, its keep needed none. v2 and v3 change no
    kernel, patch their timers (-10%, -12%) and are noisy in their first profile only; the closer
    profile runs v1 as BEST at twice the work a call. Counted by launches (before 32b895b) best's
    time per call was unchanged and its floor blind, while v2's totals were half of best's.
    Divided by the calls kopt asked, best's floor sees v1 2x slower than when it was kept."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_double_closer'] = True; ")
    v2 = _do(NOOP, "speed['small'] *= 0.9; speed['large'] *= 0.9; ")
    v3 = _do(NOOP, "speed['small'] *= 0.88; speed['large'] *= 0.88; ")
    ws = s30_run(fake_env, tmp_path, monkeypatch, "d", [v1, v2, v3], ncu_bin=calls_ncu)
    r1, r2 = record(ws, 1), record(ws, 2)
    assert r1["status"] == "keep" and r1["profile"]["taken"]["calls"] is None, r1["decision"]
    assert r2["profile"]["taken"]["calls"] is not None  # the closer profile ran: the attack's path
    assert r2["profile"]["best_floor"]["from"] == 1
    assert r2["profile"]["best_floor"]["slower"], r2["decision"]  # what stopped it: best's floor
    kept = {v: record(ws, v)["decision"]["reason"] for v in (2, 3) if record(ws, v)["status"] in KEPT}
    assert not kept, kept


def test_e2e_an_honest_one_time_kernel_kept_on_a_closer_profile_does_not_send_a_real_gain_to_review(
    fake_env, tmp_path, monkeypatch, driven_clock, calls_ncu
):
    """Honest run misjudged (new with 32b895b), end to end: unit test above. v1 is a real -20%
    whose tree launches one kernel once in each config's range (a tenth of a call: a lazily built
    table), every pass. Its first profile is noisy (the GPU was busy: FAKE_NCU_JITTER for that
    pair only), so it is kept on the closer profile, 9 calls a config. v2 is a real -10% more,
    clear on its first profile, where best (v1) is profiled afresh at its own 3 calls: the one-time
    kernel weighs 1/3 of a tenth there and 1/9 in the kept profile, 2.2% "slower" per call, and
    best's floor sends v2 to review (rejected by the default policy)."""
    first_pair = Evidence.profile_pair

    def busy_gpu_for_v1s_first_pair(self, it, lane, prof, reused, calls, seed, best_dir="best"):  # type: ignore[no-untyped-def]
        if it.version == 1 and calls.more is None:
            monkeypatch.setenv("FAKE_NCU_JITTER", "0.25")
        try:
            return first_pair(self, it, lane, prof, reused, calls, seed, best_dir)
        finally:
            monkeypatch.delenv("FAKE_NCU_JITTER", raising=False)

    monkeypatch.setattr(Evidence, "profile_pair", busy_gpu_for_v1s_first_pair)
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_helper_share'] = 0.1; ")
    v2 = _do("speed['small'] = speed['large'] = 0.72; ")
    ws = s30_run(fake_env, tmp_path, monkeypatch, "o", [v1, v2], ncu_bin=calls_ncu)
    r1, r2 = record(ws, 1), record(ws, 2)
    assert r1["status"] == "keep" and r1["profile"]["taken"]["calls"] is not None, r1["decision"]
    assert r2["profile"]["best_floor"]["from"] == 1  # best profiled afresh and held to v1's closer profile
    assert r2["status"] == "keep", (r2["decision"], r2["profile"]["best_floor"])
