"""Small things a new user met on the command line: `--max-iters` refuses a negative count in one
line (it had started a demo of "up to -1 iterations"), and `kopt status` writes no `vNone` for
a step of no iteration (a pause sent to a stopped run)."""

from __future__ import annotations

import pytest

from kopt_supervisor.kopt_tui.cli import main as kopt


@pytest.mark.parametrize("argv", [["demo", "--headless", "--max-iters", "-1"], ["run", "t", "--max-iters", "x"]])
def test_a_count_of_iterations_below_zero_or_not_a_number_is_refused_in_one_line(argv, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        kopt(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --max-iters" in err and ("0 or more" in err or "whole number" in err), err


def test_status_writes_a_step_of_no_iteration_without_a_version(baselined, capsys) -> None:
    from kopt_supervisor.engine.workspace import Workspace

    _, root = baselined([])
    with Workspace(root, "t").open_store() as store:
        store.set("progress", {"version": None, "phase": "paused", "step": "paused by the engineer"})
    assert kopt(["--root", str(root), "status", "t"]) == 0
    out = capsys.readouterr().out
    assert "  now: paused: paused by the engineer" in out.splitlines() and "vNone" not in out, out


def test_doctor_says_what_a_run_s_proposer_needs_and_ends_its_last_line() -> None:
    """`kopt doctor --tag T` had said "its program is on PATH" of a manual proposer, which runs
    none, and its plain output had no final newline."""
    from kopt_supervisor.engine import api, doctor

    base = doctor.report()
    said = {}
    for kind, program, ok in (("manual", None, True), ("command", "claude", True), ("command", "claude", False)):
        problem = None if ok else "[propose].command: `claude` is not on PATH (the proposer could not start)"
        proposer = {"run": "t", "kind": kind, "program": program, "ok": ok, "problem": problem}
        text = api.format_doctor({**base, "proposer": proposer})
        assert text.endswith("\n") and not text.endswith("\n\n")
        said[(kind, ok)] = text.splitlines()[-1]
    assert said[("manual", True)] == "proposer of run t: the manual proposer runs no program"
    assert said[("command", True)] == "proposer of run t: its program `claude` is on PATH"
    assert said[("command", False)].startswith("proposer of run t: MISSING: [propose].command")
    assert api.format_doctor(base).endswith("\n")


def test_detaching_from_a_running_engine_says_it_goes_on(baselined, capsys, monkeypatch) -> None:
    """`q` in the dashboard left the terminal without a word while the engine went on."""
    from kopt_supervisor.engine import api
    from kopt_supervisor.engine.workspace import Workspace
    from kopt_supervisor.kopt_tui import app, cli

    _, root = baselined([])
    ws = Workspace(root, "t")
    monkeypatch.setattr(app, "run_app", lambda root, tag: 0)
    monkeypatch.setattr(api, "engine_alive", lambda w: (True, 4242))
    assert cli._attach(ws) == 0
    assert capsys.readouterr().out.startswith("detached from t; its engine goes on")
    monkeypatch.setattr(api, "engine_alive", lambda w: (False, None))
    assert cli._attach(ws) == 0 and capsys.readouterr().out == ""  # a stopped run: nothing to say
