"""A held profile's warm-up (loop/profile_runs.py `WarmUp`): on a served target that prepares,
the held profile's tree runs once without the profiler in the profile's own copy while the
decision's new process prepares, so that its kernels are compiled in the profile's cache
before `go`. It ends before the decision's first timed look (killed at WARM_WAIT_S), and it
cannot reach the held profile's go file: were it able to, the tree's code could release its
own profile into the timed looks. Scripted fake GPU, stand-in ncu, the fake served target."""

from __future__ import annotations

from pathlib import Path

from kopt_supervisor.engine.profile.profiler import PROFILE_HOLD_GO, PROFILE_WARM_ENV
from kopt_supervisor.engine.workspace import Workspace
from tests.engine.test_profile_ahead import looks_of, said_of, served_gpu
from tests.engine.test_served_trees import record, run
from tests.security.harness import NEEDS_BWRAP


def lines(log: Path, *words: str) -> list[tuple[str, str, float, list[str]]]:
    """(word, cwd, time, the rest) of the fake's log lines that start with one of `words`."""
    out = []
    for ln in log.read_text().splitlines():
        w = ln.split()
        if w[0] in words:
            out.append((w[0], w[2], float(w[3]), w[4:]))
    return out


def test_kopt_and_its_harness_name_the_warm_up_alike() -> None:
    from kopt_supervisor.kernels.harness.bench import PROFILE_WARM_ENV as harness_word

    assert PROFILE_WARM_ENV == harness_word == "KOPT_PROFILE_WARM"  # the fake bench's word too


def profile_logs(ws: Workspace, v: int) -> list[str]:
    return sorted(p.name for p in ws.log_dir(v).glob("profile_*warm*"))


@NEEDS_BWRAP  # the go file is out of reach where a sandbox works (unconfined, tree code writes anywhere)
def test_a_warm_up_compiles_in_the_profiles_copy_ends_before_the_timed_looks_and_cannot_say_go(
    fake_env, tmp_path, monkeypatch
):
    # hostile: the warm-up runs the tree's code; it writes "go" where the held profile reads it
    ws, log = served_gpu(
        fake_env, tmp_path, monkeypatch, ["gain30"], start={"warm_go": f"../out/{PROFILE_HOLD_GO}"}, prepare=True
    )
    statuses = run(ws, 1)
    v1 = record(ws, 1)
    assert statuses[1] == "keep" and sorted(v1["profile"]["taken"]["ahead"]) == ["best", "cand"], v1["decision"]
    warm = lines(log, "warm", "warm_end", "warm_go_written", "warm_go_refused")
    looks = looks_of(ws, log, 1)
    ends = [t for w, _, t, _ in warm if w == "warm_end"]
    # one warm-up per held profile (best's and the candidate's, the first keep), both over before any timed look
    assert [w for w, *_ in warm].count("warm") == 2 and len(ends) == 2, warm
    assert looks and max(ends) < min(looks), (warm, looks[:2])
    # in the held profiles' own copies: the same folders, and their caches warmed when `go` came
    held = lines(log, "held")
    warmed = lines(log, "warmed")
    assert {cwd for w, cwd, *_ in warm if w == "warm"} == {cwd for _, cwd, *_ in held}, (warm, held)
    assert [rest for *_, rest in warmed] == [["1"], ["1"]], warmed
    # the go file was out of its reach: nothing written, and the profiles went on only after the looks
    assert [w for w, *_ in warm if w.startswith("warm_go")] == ["warm_go_refused"] * 2, warm
    gone = [t for w, _, t, _ in lines(log, "go")]
    assert len(gone) == 2 and max(looks) < min(gone), (looks, gone)
    assert said_of(ws, 1, "warm-up ended (exit code 0)")
    assert profile_logs(ws, 1) == [
        "profile_best_warm.err",
        "profile_best_warm.out",
        "profile_cand_warm.err",
        "profile_cand_warm.out",
    ]


def test_a_warm_up_still_running_when_the_looks_begin_is_killed_before_them(fake_env, tmp_path, monkeypatch):
    monkeypatch.setattr("kopt_supervisor.engine.loop.profile_runs.WARM_WAIT_S", 0.5)
    ws, log = served_gpu(fake_env, tmp_path, monkeypatch, ["gain30"], start={"warm_s": 60}, prepare=True)
    statuses = run(ws, 1)
    v1 = record(ws, 1)
    assert statuses[1] == "keep" and sorted(v1["profile"]["taken"]["ahead"]) == ["best", "cand"], v1["decision"]
    warm = lines(log, "warm", "warm_end")
    assert [w for w, *_ in warm] == ["warm", "warm"], warm  # started, never ended on their own
    with ws.open_store(readonly=True) as s:
        ended = [(e.t, e.message) for e in s.events(version=1) if "warm-up ended" in e.message]
    assert len(ended) == 2 and all("timed out" in m for _, m in ended), ended
    looks = looks_of(ws, log, 1)
    assert looks and max(t for t, _ in ended) < min(looks), (ended, looks[:2])  # killed before the first
    # the profiles compiled for themselves (no warm-up's mark in their caches)
    assert [rest for *_, rest in lines(log, "warmed")] == [["0"], ["0"]]
