"""A --profile run started ahead and held (KOPT_PROFILE_HOLD, harness/hold.py): it says it holds,
runs none of the tree's code and nothing on the GPU until kopt writes `go`, and then profiles what
a run never held would, the same inputs included; `stop` ends it with nothing written."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kopt_supervisor.kernels.harness import bench as hb
from kopt_supervisor.kernels.harness import hold
from tests.conftest import installed
from tests.kernels.test_public_harness import make_inputs, spec

pytestmark = installed("torch")


def marked_tree(root: Path) -> Path:
    """A tree whose solution leaves a file behind when it is imported: its code ran."""
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "scale.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(root / 'imported')!r}).write_text('ran')\n"
        "def scale(x):\n    return x * 2\n"
    )
    return root


def held_run(tree: Path, go: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Thread, list[object]]:
    monkeypatch.setenv(hold.PROFILE_HOLD_ENV, str(go))
    result: list[object] = []

    def run() -> None:
        try:
            result.append(hb.main(spec(), ["--profile"], tree=tree))
        except SystemExit as e:
            result.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def forget_tree_modules(tree: Path) -> None:
    import sys

    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if where and Path(where).resolve().is_relative_to(tree.resolve()):
            del sys.modules[name]


def wait_for(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_a_held_profile_runs_no_tree_code_until_go_then_profiles_as_an_unheld_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    t = marked_tree(tmp_path / "tree")
    monkeypatch.setenv("KOPT_PROFILE_SEED", "11")
    unheld = tmp_path / "unheld.json"
    monkeypatch.setenv("KOPT_PROFILE_OUTPUTS", str(unheld))
    assert hb.main(spec(), ["--profile"], tree=t) == 0
    (t / "imported").unlink()
    capsys.readouterr()
    forget_tree_modules(t)  # a held run is a process of its own: nothing of the tree imported yet

    outputs, go = tmp_path / "held.json", tmp_path / "go"
    monkeypatch.setenv("KOPT_PROFILE_OUTPUTS", str(outputs))
    thread, result = held_run(t, go, monkeypatch)
    wait_for(Path(f"{go}{hold.HELD_SUFFIX}"))
    time.sleep(0.3)
    assert thread.is_alive() and not (t / "imported").exists() and not outputs.exists()
    assert thread.native_id is not None and os.sched_getscheduler(thread.native_id) != os.SCHED_IDLE
    go.write_text("go\n")
    thread.join(60)
    assert result == [0] and (t / "imported").exists()
    assert outputs.read_text() == unheld.read_text()  # the same seed, the same inputs: the same outputs
    assert "shape" in capsys.readouterr().out  # its CSV


def test_a_held_profile_told_to_stop_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    t = marked_tree(tmp_path / "tree")
    outputs, go = tmp_path / "held.json", tmp_path / "go"
    monkeypatch.setenv("KOPT_PROFILE_OUTPUTS", str(outputs))
    thread, result = held_run(t, go, monkeypatch)
    wait_for(Path(f"{go}{hold.HELD_SUFFIX}"))
    go.write_text("stop")
    thread.join(60)
    assert result == [0] and not (t / "imported").exists() and not outputs.exists()
    assert capsys.readouterr().out == ""


def test_a_held_profile_refuses_a_word_it_does_not_know(tmp_path: Path) -> None:
    go = tmp_path / "go"
    go.write_text("later")
    with pytest.raises(SystemExit, match=r"KOPT_PROFILE_HOLD .*/go: 'later' is neither go nor stop"):
        hold.wait_for_go(go)
    with pytest.raises(SystemExit, match="no word from kopt in 0 s"):
        hold.wait_for_go(tmp_path / "never", max_s=0.05)


def test_the_held_draws_are_the_runs_own_seeds_and_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """What the held run draws (profile_draws) is what the run asks for, config by config and
    call by call: on this CPU the run's draws are recorded, then compared."""
    import torch

    asked: list[tuple[str, int]] = []
    real_draw = hb.Case.draw

    def recording(self: hb.Case, seed: int) -> tuple[tuple, dict]:
        asked.append((self.key, seed))
        return real_draw(self, seed)

    monkeypatch.setattr(hb.Case, "draw", recording)
    monkeypatch.setenv("KOPT_PROFILE_SEED", "5")
    t = marked_tree(tmp_path / "tree")
    assert hb.main(spec(), ["--profile"], tree=t) == 0
    capsys.readouterr()
    a = hb.parse_args(["--profile"], gpu=False)
    planned = hb.profile_draws(torch, spec(), a, 5, gpu=False)
    assert asked and [(k, s) for k, s, _ in planned] == asked
    # a draw made while held is the one the case takes, once, with the values a draw on the host gives
    s = spec()
    key = hb.Case(torch, s, None, s.shapes[0], "float32", 9, False, reference=False).key
    drawn = hold.predraw([(key, 123, lambda: hb.host_inputs(torch, s, s.shapes[0], torch.float32, 123))])
    assert list(drawn) == [(key, 123)] and hold.nbytes(*drawn[(key, 123)]) == 64 * 32 * 4
    case = hb.Case(torch, s, None, s.shapes[0], "float32", 9, False, reference=False, predrawn=drawn)
    monkeypatch.setattr(hb, "host_inputs", lambda *a, **k: pytest.fail("drawn again"))
    got = case.host_draw(123)
    gen = torch.Generator().manual_seed(123)
    assert torch.equal(got[0][0], make_inputs(torch, {"M": 64, "N": 32}, torch.float32, "cpu", gen)[0][0])
    assert drawn == {}  # taken once


def test_predraw_stops_at_its_budget_and_skips_a_draw_that_fails() -> None:
    import torch

    def boom() -> tuple[tuple, dict]:
        raise RuntimeError("needs the device")

    def draw() -> tuple[tuple, dict]:
        return (torch.zeros(256),), {}

    drawn = hold.predraw([("a", 1, boom), ("b", 1, draw), ("c", 1, draw), ("d", 1, draw)], budget=2048)
    assert sorted(drawn) == [("b", 1), ("c", 1)]


def test_the_held_work_runs_at_idle_priority_and_its_error_reaches_the_caller() -> None:
    """What a held run does before `go` runs on a thread at SCHED_IDLE; the caller's thread keeps
    its own priority for the run after `go`, and an error of the work is the caller's."""
    before = os.sched_getscheduler(0)
    assert hold.in_idle_thread(lambda: os.sched_getscheduler(0)) == os.SCHED_IDLE
    assert os.sched_getscheduler(0) == before

    def fails() -> None:
        raise SystemExit("--dtypes: 'int8' is not one of float16")

    with pytest.raises(SystemExit, match="int8"):
        hold.in_idle_thread(fails)


def test_the_held_contract_is_read_from_its_source_not_a_planted_bytecode(tmp_path: Path, monkeypatch) -> None:
    """The tree's bytecode cache is written by the candidate's served process while the
    decision runs. A .pyc made from other source of the same size and time is taken by Python's
    import for the contract's; a held run reads the contract from its source."""
    import importlib.util
    import py_compile
    import sys

    from kopt_supervisor.kernels.harness.loader import load_module

    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pycache"))
    real, forged = tmp_path / "contract.py", tmp_path / "forged.py"
    real.write_text("X = 1\n")
    forged.write_text("X = 2\n")
    for f in (real, forged):
        os.utime(f, (1_700_000_000, 1_700_000_000))
    cached = importlib.util.cache_from_source(str(real))
    py_compile.compile(str(forged), cfile=cached)
    assert load_module(real, "kopt_test_contract").X == 2  # the attack: the planted bytecode ran
    assert load_module(real, "kopt_test_contract", bytecode=False).X == 1


def test_a_bench_that_imported_its_tree_before_the_hold_refuses_to_hold(tmp_path: Path, monkeypatch) -> None:
    import sys
    import types

    t = marked_tree(tmp_path / "tree")
    hold.refuse_if_tree_ran(t)  # nothing of it imported: holds
    planted = types.ModuleType("kopt_test_tree_module")
    planted.__file__ = str(t / "ops" / "scale.py")
    monkeypatch.setitem(sys.modules, "kopt_test_tree_module", planted)
    go = tmp_path / "go"
    monkeypatch.setenv(hold.PROFILE_HOLD_ENV, str(go))
    with pytest.raises(SystemExit, match="kopt_test_tree_module .* of the tree was imported before the hold"):
        hb.main(spec(), ["--profile"], tree=t)
    assert not Path(f"{go}{hold.HELD_SUFFIX}").exists()  # never acknowledged: kopt says it did not hold


def test_the_profile_log_counts_the_threads_a_held_run_left_at_idle_priority() -> None:
    """A thread started from the held thread keeps SCHED_IDLE after `go` (torch's pool among
    them): the profile's log names how many there are, to tell a starved run apart."""
    ready, done = threading.Event(), threading.Event()

    def start() -> threading.Thread:
        t = threading.Thread(target=lambda: (ready.set(), done.wait()))
        t.start()
        ready.wait()
        return t

    t = hold.in_idle_thread(start)
    try:
        assert t.native_id is not None and os.sched_getscheduler(t.native_id) == os.SCHED_IDLE
        idle, total = (int(n) for n in hold.idle_threads().split(" threads")[0].split(" of "))
        assert 1 <= idle <= total and total >= 2
    finally:
        done.set()
        t.join()


def test_a_profiles_warm_up_calls_each_config_once_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """KOPT_PROFILE_WARM (engine/loop/profile_runs.py WarmUp): the --profile run kopt starts to
    compile a held profile's kernels calls the tree's function once per config (kopt asks one
    call: KOPT_PROFILE_CALLS=1), with no CSV on its output."""
    t = tmp_path / "tree"
    (t / "ops").mkdir(parents=True)
    calls = tmp_path / "calls"
    (t / "ops" / "scale.py").write_text(
        f"def scale(x):\n    open({str(calls)!r}, 'a').write('call\\n')\n    return x * 2\n"
    )
    monkeypatch.setenv("KOPT_PROFILE_CALLS", "1")
    assert hb.main(spec(), ["--profile"], tree=t) == 0
    configs = len([ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]) - 1  # its CSV's rows
    assert configs >= 2 and len(calls.read_text().splitlines()) == configs
    calls.unlink()
    forget_tree_modules(t)
    monkeypatch.setenv(hb.PROFILE_WARM_ENV, "1")
    assert hb.main(spec(), ["--profile"], tree=t) == 0
    out, err = capsys.readouterr()
    assert out == "" and "warm-up" in err
    assert len(calls.read_text().splitlines()) == configs  # each config once, as the profile will call it
