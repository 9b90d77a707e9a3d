"""Best's profile is reused only when it was taken as a keep's profile is taken today
(profiler.PROFILE_FORMAT): a run resumed across an upgrade profiles best again."""

from __future__ import annotations

from pathlib import Path

from kopt_supervisor.engine.config import ProfileConfig
from kopt_supervisor.engine.profile.profiler import PROFILE_FORMAT, reusable
from kopt_supervisor.engine.profile.summary import Launch, summarize


def made(**taken: object) -> tuple[int, dict]:
    summary = summarize([Launch(kernel="k", duration_ns=10.0, range="kopt:shape=a", l2_bytes=1.0)], "", tool="ncu")
    base = {"trees": {"cand": "t1"}, "gpu": "local:GPU-0", "keep": "time", "calls": None, "t": 1000.0, "seed": 7}
    return 3, {"profile": {"cand": summary.to_dict(), "taken": {**base, **taken}}}


def test_only_a_profile_of_todays_format_is_reused(tmp_path: Path) -> None:
    def again(record: tuple[int, dict]) -> object:
        return reusable(record, "t1", "local:GPU-0", ProfileConfig(), now=1010.0, profiles=tmp_path)

    got = again(made(format=PROFILE_FORMAT))
    assert got is not None and got.version == 3 and got.seed == 7
    assert again(made()) is None  # taken before the format was recorded: 2 calls, no L2 bytes
    assert again(made(format=PROFILE_FORMAT - 1)) is None
    assert again(made(format=PROFILE_FORMAT, calls=12)) is None  # a closer profile is not the bench's own


def test_the_baselines_own_profile_is_reused_and_a_keeps_best_side_never_is(tmp_path: Path) -> None:
    """[profile].baseline "early": the baseline's record says it is the baseline's and names best's
    tree alone, and its summary under "best" is what a first keep compares its candidate with. A
    keep's record names both trees: only its candidate's side is ever lent, whatever else it says
    (best's side there was profiled in best/, from a tree a proposer wrote: docs/security.md, "A
    kept tree slow as BEST")."""
    base = {"gpu": "local:GPU-0", "keep": "time", "calls": None, "t": 1000.0, "seed": 5, "format": PROFILE_FORMAT}
    summary = made()[1]["profile"]["cand"]
    own = (0, {"profile": {"best": summary, "taken": {**base, "trees": {"best": "t0"}, "baseline": True}}})
    got = reusable(own, "t0", "local:GPU-0", ProfileConfig(), now=1010.0, profiles=tmp_path)
    assert got is not None and (got.version, got.seed, got.out_dir) == (0, 5, tmp_path / "v0" / "best")
    assert reusable(own, "t1", "local:GPU-0", ProfileConfig(), now=1010.0, profiles=tmp_path) is None
    unsaid = (0, {"profile": {"best": summary, "taken": {**base, "trees": {"best": "t0"}}}})
    assert reusable(unsaid, "t0", "local:GPU-0", ProfileConfig(), now=1010.0, profiles=tmp_path) is None
    keep = (
        3,
        {"profile": {"best": summary, "cand": summary, "taken": {**base, "trees": {"best": "t0", "cand": "t1"}}}},
    )
    assert reusable(keep, "t0", "local:GPU-0", ProfileConfig(), now=1010.0, profiles=tmp_path) is None
    said = (3, {"profile": {**keep[1]["profile"], "taken": {**keep[1]["profile"]["taken"], "baseline": True}}})
    assert reusable(said, "t0", "local:GPU-0", ProfileConfig(), now=1010.0, profiles=tmp_path) is None
    assert reusable(keep, "t1", "local:GPU-0", ProfileConfig(), now=1010.0, profiles=tmp_path).out_dir.name == "cand"
