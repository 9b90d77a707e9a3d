"""The calls per config kopt asks of a profile (profiler.ProfileCalls, profiler.own_calls) and the
count each config's time is divided by (classes._calls, floors._calls): the calls kopt asked where
the bench said its own in the baseline's profile, never the tree's own launches."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kopt_supervisor.engine.profile.classes import compare_per_class
from kopt_supervisor.engine.profile.floors import slower_than_kept
from kopt_supervisor.engine.profile.profiler import (
    ESCALATED_CALLS,
    PROFILE_CALLS_ENV,
    PROFILE_CONFIGS_ENV,
    PROFILE_OUTPUTS,
    ProfileCalls,
    own_calls,
)
from kopt_supervisor.engine.profile.summary import Launch, ProfileSummary, summarize
from tests.profile.test_profile_classes import CONFIGS, NARROW, REFS, WIDE

KEYS = list(CONFIGS)


def test_first_and_closer_calls_name_every_config_from_its_own():
    own = {KEYS[0]: 4, KEYS[1]: 4, KEYS[2]: 2}
    first = ProfileCalls.first(own)
    assert first.more is None and dict(first.asked or ()) == own
    assert json.loads(first.env()[PROFILE_CALLS_ENV]) == own and PROFILE_CONFIGS_ENV not in first.env()
    closer = ProfileCalls.closer(own, [KEYS[0], KEYS[2]])  # narrow's first config and wide's
    assert closer.more == ESCALATED_CALLS
    assert dict(closer.asked or ()) == {KEYS[0]: 12, KEYS[1]: 4, KEYS[2]: 6}  # 3x its own, at most 12
    # a bench that never said its own calls: the number and the configs, as before, and nothing asked
    legacy = ProfileCalls.closer({}, [KEYS[0]])
    assert legacy.asked is None
    assert legacy.env() == {PROFILE_CALLS_ENV: "12", PROFILE_CONFIGS_ENV: json.dumps([KEYS[0]])}
    assert ProfileCalls.first({}).env() == {} and ProfileCalls.first({}) == ProfileCalls()


def _outputs(folder: Path, calls: dict[str, int | None]) -> Path:
    """A profile's outputs.json (kopt's harness's shape) with a `calls` entry where given."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {"sample": [0, 1.0]}
    entries = []
    for key in KEYS:
        cols = dict(part.split("=") for part in key.split(","))
        entry = {"config": cols, "sets": 1, "set": 0, "atol": 1e-3, "rtol": 1e-3}
        entry["outputs"] = [{"numel": 1, "nan": 0, "inf": 0, "sum": 1.0, "abs_sum": 1.0, "samples": [out["sample"]]}]
        if calls.get(key) is not None:
            entry["calls"] = calls[key]
        entries.append(entry)
    (folder / PROFILE_OUTPUTS).write_text(json.dumps({"version": 1, "configs": entries}))
    return folder


def test_own_calls_are_the_baselines_word_for_every_config_or_none(tmp_path):
    columns = ["dclass", "n"]
    said = {KEYS[0]: 4, KEYS[1]: 4, KEYS[2]: 2}
    assert own_calls(_outputs(tmp_path / "a", said), columns, KEYS) == said
    # one config unsaid (a summary left out), none said (not kopt's harness), no file: counted from launches
    assert own_calls(_outputs(tmp_path / "b", {**said, KEYS[2]: None}), columns, KEYS) == {}
    assert own_calls(_outputs(tmp_path / "c", {}), columns, KEYS) == {}
    assert own_calls(tmp_path / "none", columns, KEYS) == {}
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / PROFILE_OUTPUTS).write_text('{"version": 1, "configs": [{"calls": 0}]}')
    assert own_calls(tmp_path / "d", columns, KEYS) == {}


def _profile(calls: int, *, scale: float = 1.0, extra: int = 0, asked: int | None = None) -> ProfileSummary:
    """`calls` launches of `k` per config (`scale` on all) and `extra` tiny launches of another
    kernel in each range; kopt asked `asked` calls of every config (None: nothing named)."""
    launches = []
    for key, ns in CONFIGS.items():
        launches += [Launch("helper", 400.0, range=f"kopt:{key}")] * extra
        launches += [Launch("k", ns * scale * (1 + 0.001 * i), range=f"kopt:{key}") for i in range(calls)]
    summary = summarize(launches, "", tool="test")
    return dataclasses.replace(summary, asked=tuple((k, asked) for k in KEYS)) if asked else summary


def test_the_comparison_divides_by_the_calls_kopt_asked_not_the_launches():
    """A candidate whose each call launches its kernel twice at half the work: counted by its
    launches best's anchor still holds (the least-launched in best's ranges), but a one-time
    helper launch in best's ranges made best's "calls" 1; asked, both are 4 a config."""
    best, cand = _profile(4, extra=1, asked=4), _profile(4, scale=0.8, asked=4)
    cmp = compare_per_class([best], [cand], REFS)
    narrow = next(c for c in cmp.classes if c.cls == NARROW)
    assert narrow.best_ns is not None and abs(narrow.best_ns - (5000 + 9000) * 1.0015 - 2 * 100) < 30
    assert {c.best_calls for c in narrow.configs} == {4} and {c.calls_basis for c in narrow.configs} == {
        "calls kopt asked"
    }
    unasked = compare_per_class([_profile(4, extra=1)], [_profile(4, scale=0.8)], REFS)
    assert {c.best_calls for c in next(c for c in unasked.classes if c.cls == NARROW).configs} == {1}


def test_bests_floor_holds_a_kept_profile_with_a_helper_launch_to_the_calls_asked():
    """The attack of test_review_s31_hostile, both ways: asked, a helper launch lifts no floor; unasked
    (a bench that never said its calls) the same profiles pass, the hole docs/security.md names."""
    kept, fresh = _profile(3, extra=1, asked=3), _profile(12, scale=1.12, asked=12)
    assert WIDE in {s.cls for s in slower_than_kept(kept, fresh, REFS)}
    assert slower_than_kept(_profile(3, extra=1), _profile(12, scale=1.12), REFS) == []
    # honest: an unchanged tree at 3 and at 12 calls, each with a one-time kernel, is no slower
    assert slower_than_kept(_profile(3, extra=1, asked=3), _profile(12, extra=1, asked=12), REFS) == []
