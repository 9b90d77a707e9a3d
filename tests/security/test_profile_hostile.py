"""Hostile candidates against a keep's profile: the closer second profile (commit 86d8622) and
the outputs under the profiler (commit 8d2c3e0); docs/security.md, "A profile too coarse to tell
is taken again, closer" and "The outputs under the profiler"; engine/loop/evidence.py
`Evidence.confirm` and `Evidence.profile_outputs`.

The outputs file (profiles/vN/<side>/outputs.json) is written by the profiled tree's own process:
whatever the harness summarises, a candidate can rewrite, replace by a link, a FIFO, a huge or a
deeply nested file, and kopt reads it after the sandbox. Best's file is written by best's tree,
which was a candidate once. Each attack here is a tree that does other (less) work only while it
is profiled (`CHEAT`: the bench and the profiler show a 30% gain, its profiled outputs are wrong
for cls=large) plus a way around the comparison; each test asserts it is not kept. The attacks
that worked before are each a test now; what is still open is listed in docs/security.md, "The
outputs under the profiler".

File-level attacks call `Evidence.profile_outputs` on two folders (milliseconds); the attacks
that need the loop (the sandbox, the order of the profiles, best's reused or escalated profile)
run the fake target with the stand-in ncu (tests/engine/test_keep_profile_reuse.py `two_keeps`,
tests/fake_target/bench.py's profile_* knobs, bin/ncu's ncu_jitter_first)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kopt_supervisor.engine.decide import audit
from kopt_supervisor.engine.loop.evidence import CorrectnessRefuted, Evidence
from kopt_supervisor.engine.profile.profiler import MAX_PROFILE_OUTPUTS_BYTES, PROFILE_OUTPUTS
from tests.engine.test_keep_profile_reuse import record, two_keeps

CHEAT = "k['speed'] = {'small': 0.7, 'large': 0.7}; k['profile_wrong'] = ['large']; "
"""A tree that does other (less) work only while it is profiled: the bench's and the profiler's
numbers show a 30% gain, its outputs under the profiler are wrong for cls=large (alone, it fails
correctness: tests/engine/test_profile_escalation.py)."""

COLUMNS = ["shape", "cls", "n"]
CONFIGS = [("small", 128), ("small", 256), ("large", 4096), ("large", 8192)]


def do(*statements: str) -> str:
    """The scripted proposer's `do:` action: kernel.json edited in cand/."""
    return "do:" + "".join(statements) + "json.dump(k, open('kernel.json', 'w'))"


# -- the file kopt reads, attacked directly --------------------------------------------------------


def summary(value: float = 1.0, *, atol: float = 1e-3, wrong: tuple[str, ...] = ()) -> dict[str, Any]:
    """An outputs file as the fake bench writes it (one output per config, one sample)."""
    entries = []
    for i, (cls, n) in enumerate(CONFIGS):
        v = (value + n) * (0.5 if cls in wrong else 1.0)
        entries.append(
            {
                "config": {"shape": f"s{i}", "cls": cls, "n": n},
                "sets": 1,
                "set": 0,
                "atol": atol,
                "rtol": atol,
                "outputs": [{"numel": n, "nan": 0, "inf": 0, "sum": v * n, "abs_sum": v * n, "samples": [[0, v]]}],
            }
        )
    return {"version": audit.VERSION, "configs": entries}


def evidence(earlier: list[Any] | None = None) -> Evidence:
    """An Evidence whose context knows the baseline's config columns and configs (all profile_outputs reads)."""
    keys = {f"shape=s{i},cls={cls},n={n}": {} for i, (cls, n) in enumerate(CONFIGS)}  # metrics.key_of
    base = SimpleNamespace(record={"config_columns": COLUMNS, "configs": keys})
    store = SimpleNamespace(iterations=lambda: list(earlier or []))  # earlier iterations (none: no comparison yet)
    return Evidence(SimpleNamespace(history=SimpleNamespace(baseline=lambda: base, store=store)))  # type: ignore[arg-type]


@pytest.fixture
def sides(tmp_path: Path) -> tuple[Path, Path]:
    """profiles/v3/best (an honest best's outputs written) and profiles/v3/cand (empty)."""
    best, cand = tmp_path / "profiles" / "v3" / "best", tmp_path / "profiles" / "v3" / "cand"
    best.mkdir(parents=True)
    cand.mkdir()
    (best / PROFILE_OUTPUTS).write_text(json.dumps(summary()))
    return best, cand


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fails (never hangs) when kopt blocks on what the candidate left."""

    def stop(signum: int, frame: object) -> None:
        raise AssertionError(f"kopt still reading the candidate's outputs after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def refuted(best: Path, cand: Path, earlier: list[Any] | None = None) -> str:
    """The one-line reason kopt refutes the candidate's outputs for (fails when it does not)."""
    with within(10), pytest.raises(CorrectnessRefuted) as e:
        evidence(earlier).profile_outputs(best, cand)
    why = str(e.value)
    assert "\n" not in why and len(why) < 600, why
    return why


def test_honest_outputs_are_checked(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(summary()))
    assert evidence().profile_outputs(best, cand)["checked"] == 4


def test_a_link_to_bests_outputs_is_not_read_as_the_candidates(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    (cand / PROFILE_OUTPUTS).symlink_to(Path("..") / "best" / PROFILE_OUTPUTS)
    assert "link" in refuted(best, cand) or "regular file" in refuted(best, cand)


def test_a_link_out_of_the_profiles_folder_is_not_followed(sides: tuple[Path, Path], tmp_path: Path) -> None:
    best, cand = sides
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text((best / PROFILE_OUTPUTS).read_text())
    (cand / PROFILE_OUTPUTS).symlink_to(elsewhere)
    refuted(best, cand)


def test_a_fifo_or_a_link_to_one_is_refuted_without_blocking(sides: tuple[Path, Path], tmp_path: Path) -> None:
    best, cand = sides
    os.mkfifo(cand / PROFILE_OUTPUTS)
    assert "none written" in refuted(best, cand)
    (cand / PROFILE_OUTPUTS).unlink()
    os.mkfifo(tmp_path / "fifo")
    (cand / PROFILE_OUTPUTS).symlink_to(tmp_path / "fifo")
    refuted(best, cand)


def test_a_huge_file_is_refused_by_its_size_unread(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    with open(cand / PROFILE_OUTPUTS, "w") as f:
        f.truncate(MAX_PROFILE_OUTPUTS_BYTES + 1)  # sparse: nothing to read if kopt read it
    assert "bytes, more than" in refuted(best, cand)


def test_deeply_nested_json_is_refuted_in_one_line(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    (cand / PROFILE_OUTPUTS).write_text("[" * 500_000)
    assert "not JSON" in refuted(best, cand)
    (cand / PROFILE_OUTPUTS).write_text('{"version": 1, "configs": ' + "[" * 200_000 + "]" * 200_000 + "}")
    refuted(best, cand)


@pytest.mark.parametrize(
    "text",
    [
        b"\xff\xfe\x00not utf-8",
        b"",
        b'{"version": 1, "configs": []}',
        b'{"version": 2, "configs": []}',
        b'{"version": 1, "configs": "all"}',
        b"NaN",
    ],
)
def test_a_malformed_or_empty_file_is_refuted(sides: tuple[Path, Path], text: bytes) -> None:
    best, cand = sides
    (cand / PROFILE_OUTPUTS).write_bytes(text)
    refuted(best, cand)


def test_a_config_twice_the_honest_one_last_is_refuted(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    wrong, right = summary(wrong=("large",)), summary()
    both = {"version": 1, "configs": wrong["configs"] + right["configs"]}
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(both))
    assert "twice" in refuted(best, cand)


def test_nan_outputs_with_their_count_hidden_are_refuted(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    data = summary()
    out = data["configs"][2]["outputs"][0]
    out.update(samples=[[0, float("nan")]])  # "nan": 0 kept: the count lies, the sample does not
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(data))
    assert "config s2,large,4096" in refuted(best, cand) or "large" in refuted(best, cand)
    out.update(samples=[[0, 4097.0]], sum=float("nan"), abs_sum=float("nan"))  # the sample right, the sums NaN
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(data))
    assert "sum" in refuted(best, cand)
    out.update(sum=float("inf"), abs_sum=float("inf"), inf=0)
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(data))
    refuted(best, cand)


def test_the_candidates_own_wide_tolerance_is_not_used(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(summary(atol=1e30, wrong=("large",))))
    assert "large" in refuted(best, cand)


def test_a_best_file_declaring_a_huge_tolerance_does_not_wave_wrong_outputs_through(sides: tuple[Path, Path]) -> None:
    # the tolerance is best's file's, and best's tree was a candidate once: once a comparison of
    # the run has recorded one (the first: best was the baseline's tree), that one stands
    best, cand = sides
    (best / PROFILE_OUTPUTS).write_text(json.dumps(summary(atol=1e30)))
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(summary(atol=1e30, wrong=("large",))))
    keys = {f"shape=s{i},cls={cls},n={n}": [1e-3, 1e-3] for i, (cls, n) in enumerate(CONFIGS)}
    earlier = SimpleNamespace(record={"profile": {"outputs": {"checked": 4, "tolerance": keys}}})
    assert "large" in refuted(best, cand, earlier=[earlier])
    # and the first comparison records the tolerance it used
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(summary()))
    (best / PROFILE_OUTPUTS).write_text(json.dumps(summary()))
    assert evidence().profile_outputs(best, cand)["tolerance"] == keys


def test_both_files_listing_no_config_is_no_silent_pass(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    empty = json.dumps({"version": 1, "configs": []})
    (best / PROFILE_OUTPUTS).write_text(empty)
    (cand / PROFILE_OUTPUTS).write_text(empty)
    got = evidence().profile_outputs(best, cand)
    assert "not the baseline's 4" in got["unconfirmed"], got  # the keep goes to review


def test_best_unreadable_is_said_not_silently_passed(sides: tuple[Path, Path]) -> None:
    best, cand = sides
    (best / PROFILE_OUTPUTS).write_text("[" * 100_000)
    (cand / PROFILE_OUTPUTS).write_text(json.dumps(summary(wrong=("large",))))
    got = evidence().profile_outputs(best, cand)
    assert got["checked"] == 0 and "unreadable" in got["note"] and "\n" not in got["note"]


# -- the loop: the sandbox, the profiles' order, best's reused or escalated profile ------------------


def test_e2e_a_candidate_linking_its_outputs_to_bests_is_not_kept(fake_env, tmp_path, monkeypatch, driven_clock):
    ws = two_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        "l1",
        script=[do(CHEAT, "k['profile_link'] = '../best/outputs.json'; ")],
        iters=1,
    )
    v1 = record(ws, 1)
    assert (ws.profiles / "v1" / "cand" / PROFILE_OUTPUTS).is_symlink()  # the attack was tried
    assert v1["status"] != "keep", (v1["decision"]["reason"], v1["profile"].get("outputs"))


def test_e2e_a_fifo_for_outputs_fails_the_candidate_and_the_engine_goes_on(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "f1", script=[do(CHEAT, "k['profile_fifo'] = True; ")], iters=1)
    v1 = record(ws, 1)  # two_keeps: the engine's session ended 0, nothing blocked on the FIFO
    assert (ws.profiles / "v1" / "cand" / PROFILE_OUTPUTS).is_fifo()  # the attack was tried
    assert v1["status"] == "fail_correctness" and "none written" in v1["decision"]["reason"], v1["decision"]


def test_e2e_nan_outputs_under_the_profiler_fail_correctness(fake_env, tmp_path, monkeypatch, driven_clock):
    ws = two_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        "n1",
        script=[do("k['speed'] = {'small': 0.7, 'large': 0.7}; k['profile_nan'] = ['large']; ")],
        iters=1,
    )
    v1 = record(ws, 1)
    assert v1["status"] == "fail_correctness" and "cls=large" in v1["decision"]["reason"], v1["decision"]


def test_e2e_a_kept_tree_colluding_as_best_does_not_get_the_next_cheat_kept(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    """A kept tree (v1, an honest 5% gain) that does the same other work as the next cheat once
    it is profiled as best (KOPT_PROFILE_OUTPUTS ends in /best/outputs.json) made v2's wrong
    outputs equal best's ('checked 4', v2 KEPT) while best's outputs were the reference. The
    reference is the baseline's profile at the same seed: the user's tree, which no candidate
    wrote."""
    dormant = "k['profile_as_best'] = {'profile_wrong': ['large']}; "
    ws = two_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        "c1",
        extra="reuse_best_s = 0\n",
        script=[do("k['speed'] = {'small': 0.95, 'large': 0.95}; ", dormant), do(CHEAT)],
        iters=2,
    )
    v1, v2 = record(ws, 1), record(ws, 2)
    assert v1["status"] == "keep", v1["decision"]  # the dormant code passed its own keep
    assert v1["profile"]["outputs"]["against"] == "baseline", v1["profile"]["outputs"]
    assert v2["status"] == "fail_correctness", (v2["decision"]["reason"], v2["profile"].get("outputs"))
    assert "cls=large" in v2["decision"]["reason"] and "the baseline's" in v2["decision"]["reason"]


def test_e2e_a_kept_tree_writing_no_outputs_as_best_does_not_turn_the_comparison_off(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    dormant = "k['profile_as_best'] = {'profile_no_outputs': True}; "
    ws = two_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        "c2",
        extra="reuse_best_s = 0\n",
        script=[do("k['speed'] = {'small': 0.95, 'large': 0.95}; ", dormant), do(CHEAT)],
        iters=2,
    )
    v1, v2 = record(ws, 1), record(ws, 2)
    assert v1["status"] == "keep" and v1["profile"]["outputs"]["checked"] == 4, v1["decision"]
    assert v2["status"] != "keep", (v2["decision"]["reason"], v2["profile"].get("outputs"))


def test_e2e_with_bests_profile_reused_the_dormant_tree_cannot_switch_the_comparison_off_nor_does_a_forced_escalation(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    """The same dormant tree, best's profile reused (its outputs as the keep that made it BEST
    wrote them, as a candidate): v2's cheat fails correctness; v3, the cheat again with its
    escalation forced (a noisy first profile), on the same BEST, does not bypass best's reused
    outputs either. (v3 was a run of its own, the same v1 before it.)"""
    dormant = "k['profile_as_best'] = {'profile_no_outputs': True}; "
    ws = two_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        "c4",
        script=[
            do("k['speed'] = {'small': 0.95, 'large': 0.95}; ", dormant),
            do(CHEAT),
            do(CHEAT, "k['ncu_jitter_first'] = 0.6; "),
        ],
        iters=3,
    )
    v1, v2, v3 = record(ws, 1), record(ws, 2), record(ws, 3)
    assert v1["status"] == "keep", v1["decision"]
    assert not (ws.profiles / "v2" / "best").exists()  # best's profile was v1's, reused
    assert v2["status"] == "fail_correctness", (v2["decision"], v2.get("profile"))
    assert v3["best_commit_before"] == v2["best_commit_before"]  # on the same BEST as v2
    assert v3["profile"]["taken"]["calls"] == 12, v3["profile"]  # the escalation was forced
    assert v3["status"] != "keep", (v3["decision"]["reason"], v3["profile"].get("outputs"))


# -- the harness: what its summary of a profiled call can tell --------------------------------------

PROFILED_ONLY = """import os
SEEN = {}
def computed():  # one whole computation, counted for the test
    with open(os.path.join(os.path.dirname(__file__), "computed"), "a") as f:
        f.write("1")
def scale(x):
    if not os.environ.get("KOPT_PROFILE"):
        return x * 2
    key = (tuple(x.shape), x.dtype)
"""
"""The start of both cheats: honest unless profiled; under the profiler, keyed by config."""

MEMO = (
    PROFILED_ONLY
    + """    if key not in SEEN:  # a config's first call computes, the others hand it back
        SEEN[key] = x * 2
        computed()
    return SEEN[key]
"""
)
"""Computes each config's first profiled call and hands its result back on the others: the
profiler sees 1/calls of the work. With one set of inputs for every call (before), its outputs
were exactly best's."""

PARTIAL = (
    PROFILED_ONLY
    + """    SEEN[key] = SEEN.get(key, 0) + 1
    if SEEN[key] == int(os.environ["KOPT_PROFILE_CALLS"]):  # the last call, the one summarised before
        computed()
        return x * 2
    y = x.clone()  # the others: half the work
    y.reshape(-1)[: x.numel() // 2].mul_(2)
    return y
"""
)
"""Does the whole work only on a config's last profiled call (the one summarised before) and
half of it on the others."""


@pytest.mark.parametrize("cheat", [MEMO, PARTIAL], ids=["memo", "partial"])
def test_a_profile_that_computed_less_than_every_call_is_told_from_one_that_computed_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], cheat: str
) -> None:
    """Each profiled call draws inputs of its own (bench.profile_inputs) and every call's
    outputs are summarised: a tree that did less than every call's work writes wrong outputs
    for some call, and kopt's comparison refutes it (the xfail naming this hole before)."""
    pytest.importorskip("torch")
    from tests.kernels.test_public_harness import run_main, spec, tree

    best, cand = tree(tmp_path / "best"), tmp_path / "cand"
    (cand / "ops").mkdir(parents=True)
    (cand / "ops" / "scale.py").write_text(cheat)
    monkeypatch.setenv("KOPT_PROFILE", "1")
    monkeypatch.setenv("KOPT_PROFILE_SEED", "5")
    monkeypatch.setenv("KOPT_PROFILE_CALLS", "12")
    for side, t in (("best", best), ("cand", cand)):
        (tmp_path / "profiles" / side).mkdir(parents=True)
        monkeypatch.setenv("KOPT_PROFILE_OUTPUTS", str(tmp_path / "profiles" / side / PROFILE_OUTPUTS))
        df = run_main(spec(), ["--profile"], t, capsys)
    assert len((cand / "ops" / "computed").read_text()) == len(df)  # one whole call of 12 per config
    written = json.loads((tmp_path / "profiles" / "cand" / PROFILE_OUTPUTS).read_text())
    assert all(len(c["outputs"]) == 12 for c in written["configs"])  # every call summarised
    base = SimpleNamespace(record={"config_columns": ["shape", "dtype"]})  # the harness's config columns
    store = SimpleNamespace(iterations=lambda: [])
    ev = Evidence(SimpleNamespace(history=SimpleNamespace(baseline=lambda: base, store=store)))  # type: ignore[arg-type]
    with pytest.raises(CorrectnessRefuted, match="the candidate's outputs under the profiler, config"):
        ev.profile_outputs(tmp_path / "profiles" / "best", tmp_path / "profiles" / "cand")
    # an honest tree's calls agree with best's, each on its own inputs
    (tmp_path / "profiles" / "again").mkdir()
    monkeypatch.setenv("KOPT_PROFILE_OUTPUTS", str(tmp_path / "profiles" / "again" / PROFILE_OUTPUTS))
    run_main(spec(), ["--profile"], best, capsys)
    assert ev.profile_outputs(tmp_path / "profiles" / "best", tmp_path / "profiles" / "again")["checked"] == len(df)


def test_e2e_work_hidden_from_the_profiler_is_not_kept_and_an_honest_gain_is(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    """The profiled process switches ncu off around its real work (cudaProfilerStop, honoured by
    ncu on the H200: experiments/ncu_profiler_api_probe.py) and leaves a cheap kernel in each
    range; its timer claims the same 20%. Bench and profiler agree, the outputs are right: the
    kernels ncu saw moved a twentieth of the bytes each call reads and writes ([roofline].bytes),
    so it goes to review and is not kept (engine/profile/floors.py). The same gain done
    honestly (1.5x its bytes through L2) is kept, the check made."""
    hidden = do("k['fast'] = 1.25; k['ncu_speed'] = {'small': 0.8, 'large': 0.8}; k['ncu_hidden'] = True; ")
    ws = two_keeps(
        fake_env, tmp_path, monkeypatch, "h1", extra='\n[roofline]\nbytes = "n * 8"\n', script=[hidden, "gain30"]
    )
    v1, v2 = record(ws, 1), record(ws, 2)
    assert v1["status"] != "keep" and "profiler_bytes_short" in v1["decision"]["flags"], v1["decision"]
    assert (
        "shape=s2,cls=large,n=4096 moved 1.6 KiB through L2 a call, under the 32.0 KiB it reads"
        in v1["decision"]["reason"]
    )
    assert v1["profile"]["bytes"]["checked"] and len(v1["profile"]["bytes"]["short"]) == 4
    assert v2["status"] == "keep", v2["decision"]
    assert v2["profile"]["bytes"] == {"checked": True, "short": []}
