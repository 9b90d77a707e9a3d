"""Best's floor (engine/profile/floors.py `slower_than_kept`): a kept tree profiled afresh as BEST
must not run slower per call than the profile taken when it was kept, on the same GPU.

Why it exists. Every profile runs in a copy that says neither side (profile_runs.ProfiledTree), but
a tree still knows which pass it is in: a closer profile (KOPT_PROFILE_CALLS) is asked for only
when a keep's first profile could not tell, and best is never reused there. v1, an honest gain
kept on its first profile, carries code that slows its kernels in every closer profile: that
costs it nothing, since its own keep needed none. v2 changes no kernel, drops that code, patches
its timer and is noisy in its first profile only (a tree knows that pass too): the closer profile
then runs v1 (BEST) slowed beside v2, sees a gain, and the looks run v2's timer. Without the
floor v2 was kept at -11%, and every later no-op could do the same. With it, best's closer
profile is held to v1's profile from its keep: 12% slower per call, beyond noise, and the keep
goes to review (`best_slowed`).

The honest counterpart: a real gain whose first profile is noisy takes the closer profile too,
best (not slowed) is no slower than when kept, and the keep stands.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kopt_supervisor.engine.profile.floors import slower_than_kept
from kopt_supervisor.engine.profile.summary import ProfileSummary
from tests.engine.test_keep_profile_reuse import record
from tests.profile.test_profile_classes import NARROW, REFS, WIDE, profile
from tests.security.test_review_s30_hostile import _do, _run

# -- the rule, unit level --------------------------------------------------------------------------


def test_a_profile_at_more_calls_is_compared_per_call():
    """The kept profile ran the bench's own calls (3 a config), the closer one 12: the same
    kernels give the same time per call, whatever the totals."""
    kept, fresh = profile(1, calls=3), profile(2, calls=12)
    assert slower_than_kept(kept, fresh, REFS) == []


def test_best_slowed_in_a_closer_profile_is_found_per_class():
    """Best's narrow kernels 12% slower per call than when kept: narrow is named, with its ratio;
    wide, unchanged, is not."""
    kept, fresh = profile(1, calls=3), profile(2, calls=12, scale={NARROW: 1.12})
    (slow,) = slower_than_kept(kept, fresh, REFS)
    assert slow.cls == NARROW and 1.0 < slow.lo < slow.ratio and 1.10 < slow.ratio < 1.14 and slow.configs == 2
    assert "+11.9" in slow.line() and "when it was kept" in slow.line()


def test_a_drift_within_noise_is_not_a_slowed_best():
    """0.2% slower per call (inside the run-to-run noise of two profiles) is no finding, nor is a
    best that got faster: the floor holds best to no more than it was, never to less."""
    kept = profile(1, calls=3)
    assert slower_than_kept(kept, profile(2, calls=12, shift=1.002), REFS) == []
    assert slower_than_kept(kept, profile(3, calls=12, scale={WIDE: 0.8}), REFS) == []


def test_a_config_in_one_profile_only_is_left_to_the_comparison():
    """A config the closer profile did not run (it runs the unshown classes' configs) is not
    compared; the configs both ran are."""
    kept = profile(1, calls=3)
    fresh = profile(2, calls=12, drop=("dclass=narrow,n=1024",), scale={NARROW: 1.2})
    (slow,) = slower_than_kept(kept, fresh, REFS)
    assert slow.cls == NARROW and slow.configs == 1


# -- end to end ------------------------------------------------------------------------------------


def test_e2e_a_kept_tree_slow_in_every_closer_profile_lends_no_later_timer_patch_a_gain(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    """The attack above, through the whole loop: v2 and v3 (no kernel changed, timer patched, noisy
    in their first profile) are not kept, and the reason is best's floor."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_slow_closer'] = 1.12; ")
    noop = "k['ncu_speed'] = {'small': 0.8, 'large': 0.8}; k['ncu_jitter_first'] = 0.25; k['ncu_slow_closer'] = 1.0; "
    v2 = _do(noop, "speed['small'] *= 0.9; speed['large'] *= 0.9; ")
    v3 = _do(noop, "speed['small'] *= 0.88; speed['large'] *= 0.88; ")
    ws = _run(fake_env, tmp_path, monkeypatch, "f", [v1, v2, v3])
    r1, r2, r3 = (record(ws, v) for v in (1, 2, 3))
    assert r1["status"] == "keep", r1["decision"]
    kept = [v for v, r in ((2, r2), (3, r3)) if r["status"] == "keep"]
    assert not kept, {v: record(ws, v)["decision"]["reason"] for v in kept}
    assert r2["profile"]["taken"]["calls"] is not None  # the closer profile ran: the attack's path
    assert "best_slowed" in r2["decision"]["flags"], r2["decision"]
    floor = r2["profile"]["best_floor"]
    assert floor["from"] == 1 and floor["slower"], floor


def test_e2e_a_real_gain_whose_first_profile_is_noisy_is_still_kept(fake_env, tmp_path, monkeypatch, driven_clock):
    """The honest counterpart: v2 really is 10% faster (its kernels too), noisy in its first profile;
    the closer profile runs v1 unslowed, best's floor finds nothing, and v2 is kept."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; ")
    v2 = _do("speed['small'] = speed['large'] = 0.72; k['ncu_jitter_first'] = 0.25; ")
    ws = _run(fake_env, tmp_path, monkeypatch, "g", [v1, v2])
    r1, r2 = record(ws, 1), record(ws, 2)
    assert r1["status"] == "keep" and r2["status"] == "keep", (r1["decision"], r2["decision"])
    assert r2["profile"]["taken"]["calls"] is not None
    assert r2["profile"]["best_floor"] == {"from": 1, "slower": []}


def test_a_profiles_summary_names_its_files_where_they_were_moved(fake_env, tmp_path, monkeypatch, driven_clock):
    """A profile ran in a copy that is gone after it: its summary names the files in
    profiles/vN/<side>/, where they were moved, never the copy's folder."""
    ws = _run(fake_env, tmp_path, monkeypatch, "h", [_do("speed['small'] = speed['large'] = 0.8; ")])
    r1 = record(ws, 1)
    assert r1["status"] == "keep", r1["decision"]
    for side in ("best", "cand"):
        files = r1["profile"][side]["files"]
        assert files and all(f.startswith(str(ws.profiles / "v1")) for f in files), files
        assert all(Path(f).is_file() for f in files), files
    assert not list((ws.dir / "sandbox").iterdir())  # every copy removed


def test_a_small_configs_drift_between_profiles_is_not_a_slowed_best():
    """On the H200 one 2.7 us config read +19% per call against its keep's profile, the class's other
    four within 0.7%: an honest best that the floor sent to review until a call's drift between
    profiles (floors.DRIFT_NS) counted. A 5 us config 19% slower, the others unchanged, is no finding;
    every config of the class 12% slower still is."""
    from kopt_supervisor.engine.profile.floors import DRIFT_NS

    assert DRIFT_NS > 0
    kept = profile(1, calls=3)
    drifted = profile(2, calls=12, scale={NARROW: 1.0}, drop=())
    tiny = "dclass=narrow,n=1024"  # 5 us a launch
    drifted = ProfileSummary(
        **{
            **drifted.__dict__,
            "ranged": tuple(
                type(g)(**{**g.__dict__, "total_ns": g.total_ns * (1.19 if tiny in g.range else 1.0)})
                for g in drifted.ranged
            ),
        }
    )
    assert slower_than_kept(kept, drifted, REFS) == []
    assert [x.cls for x in slower_than_kept(kept, profile(3, calls=12, scale={NARROW: 1.12}), REFS)] == [NARROW]


def test_a_failed_profile_says_why_in_one_line(fake_env, tmp_path, monkeypatch, driven_clock):
    """A profile run writes its logs in its copy, moved into logs/vN/ when it ends: the one line
    that says why it failed is read before they move (it read "(no output)" when they moved first)."""
    broke = f"{sys.executable} -c \"import sys; sys.stderr.write('the profiled bench broke (s31)'); sys.exit(3)\""
    ws = _run(
        fake_env,
        tmp_path,
        monkeypatch,
        "p",
        [_do("speed['small'] = speed['large'] = 0.8; ")],
        profile=f"command = '''{broke}'''",
    )
    r1 = record(ws, 1)
    assert "profiler_failed" in r1["decision"]["flags"], r1["decision"]
    assert "exit code 3: the profiled bench broke (s31)" in r1["profile"]["error"], r1["profile"]
    (err,) = [p for p in ws.log_dir(1).glob("profile_*.err")]  # the first profiled (a coin's): best's or cand's
    assert err.name in ("profile_best.err", "profile_cand.err") and err.read_text().endswith("broke (s31)")
