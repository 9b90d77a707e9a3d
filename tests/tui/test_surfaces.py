"""What the engine records beyond the decision, as the front door shows it: the sandbox, the
cost of one decision, the agent's cost, the phase timings, the plan's citations, the
profiler per class, the keep decided again, the diff scan, and agent transcripts (the pure
views, the transcript reader's refusals, and `kopt status`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kopt_supervisor.engine import api, fmt
from kopt_supervisor.engine.records import AgentRun
from kopt_supervisor.engine.store import Iteration
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui import iteration_view as iv
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.model import RunData

SLOW = {
    "mode": "process",
    "seconds_change": 400.0,
    "seconds_tie": 610.0,
    "undecided_tie": False,
    "slow": True,
    "text": "one decision takes about 6.7 min for a clear change (6 ABBA rounds of 2 runs). Slow: a bench on "
    "kopt's harness ...",
}
UNCONFINED = {
    "confined": False,
    "summary": "UNSANDBOXED (--no-sandbox): the `command` proposer and every bench ran without confinement",
    "ever_unconfined": True,
}


def agent(cost: float | None, tin: int | None, tout: int | None, **kw: object) -> dict:
    return AgentRun(
        agent=str(kw.pop("name", "claude-code")), cost_usd=cost, input_tokens=tin, output_tokens=tout, wall_s=12.5, **kw
    ).to_dict()  # type: ignore[arg-type]


def run_data(meta: dict, its: list[Iteration]) -> RunData:
    return RunData("t", meta, tuple(its), alive=False, pid=None)


# -- the dashboard ---------------------------------------------------------------------------


def test_no_sandbox_and_a_slow_decision_are_said_on_the_state_line_and_in_the_counters():
    its = [
        Iteration(0, "baseline", record={"decision_cost": SLOW}),
        Iteration(1, "keep", record={"proposal": {"agent": agent(0.42, 1000, 200)}}),
        Iteration(
            2,
            "tie",
            masked=True,
            record={
                "proposal": {"agent": agent(1.0, 5000, 100)},
                "repairs": [{"agent": agent(None, 10, 10, name="gemini")}],
            },
        ),
    ]
    d = run_data({"state": "stopped", "sandbox": UNCONFINED, "notice": "Timings are CPU timings."}, its)
    st = model.state_view(d, 0.0)
    assert st.unsandboxed and st.agent_cost == "$1.42"  # the masked iteration's money was spent too
    assert st.cautions[0].startswith("UNSANDBOXED (--no-sandbox)") and st.cautions[1] == SLOW["text"]
    assert st.cautions[2] == "Timings are CPU timings."
    c = model.counters_view(d)
    assert c.decision_slow and c.decision == "≈ 6:40 for a change, 10:10 for none (process-level)"
    assert c.agent == "$1.42 · 6.32k tok · 3 runs in 0:38 · 1 without cost (gemini)"
    # a run with the sandbox on and a fast bench says neither
    calm = run_data(
        {
            "state": "stopped",
            "sandbox": {
                **UNCONFINED,
                "confined": True,
                "ever_unconfined": False,
                "summary": "sandboxed: bubblewrap 0.9.0",
            },
            "decision_cost": {**SLOW, "slow": False},
        },
        its[:2],
    )
    st = model.state_view(calm, 0.0)
    assert not st.unsandboxed and st.cautions == () and not model.counters_view(calm).decision_slow


def test_an_earlier_unsandboxed_session_is_still_said_when_the_latest_was_confined():
    meta = {"sandbox": {"confined": True, "summary": "sandboxed: bubblewrap 0.9.0", "ever_unconfined": True}}
    st = model.state_view(run_data(meta, []), 0.0)
    assert st.unsandboxed and "earlier session ran with --no-sandbox" in st.cautions[0]


@pytest.mark.parametrize(
    "runs,expected",
    [
        ([agent(None, 1000, 200, name="codex")], "1.2k tok"),  # tokens only: said as tokens
        ([agent(None, None, None, name="command")], ""),  # nothing reported: nothing said
        ([], ""),
    ],
)
def test_the_top_line_cost_says_dollars_else_tokens(runs, expected):
    its = [Iteration(1, "keep", record={"proposal": {"agent": r}}) for r in runs]
    assert model.state_view(run_data({}, its), 0.0).agent_cost == expected


def test_agent_line_with_a_budget_and_without_any_cost():
    spend = api.agent_spending(
        [Iteration(1, "keep", record={"proposal": {"agent": agent(None, 900, 100, name="codex")}})],
        budget_usd=0.0,
        budget_tokens=50000,
    )
    assert api.agent_line(spend) == "1k of 50k tok · 1 run in 0:13 · no cost reported (codex)"
    spend = api.agent_spending([Iteration(1, "keep", record={"proposal": {"agent": agent(2.5, 10, 10)}})], 10.0)
    assert api.agent_line(spend) == "$2.50 of $10.00 · 20 tok · 1 run in 0:13"


# -- the iteration detail --------------------------------------------------------------------


def test_decision_notes_explain_flags_and_quote_the_evidence():
    record = {
        "decision": {
            "verdict": "borderline",
            "reason": "k=1 is 3.1x faster, more than the suspicious_speedup of 3x",
            "flags": ["suspicious_speedup", "profiler_disagrees", "reverify_disagrees", "made_up_flag"],
        },
        "reverify": {"verdict": "tie", "reason": "no class changed", "agrees": False, "seconds": 41.0},
        "profile": {
            "comparison": {
                "per_class": True,
                "confidence": 0.99,
                "noise": "n",
                "problems": [],
                "classes": [
                    {
                        "cls": "k=1",
                        "best_ns": 1000.0,
                        "cand_ns": 990.0,
                        "ratio": 0.99,
                        "lo": 0.98,
                        "hi": 1.0,
                        "appeared": ["new_k"],
                        "disappeared": [],
                        "problems": [],
                    }
                ],
                "unattributed": {"best_ns": 0.0, "cand_ns": 500.0, "grew": True, "groups": []},
            },
            "agreement": {
                "per_class": True,
                "classes": [
                    {
                        "cls": "k=1",
                        "status": "disagrees",
                        "bench_verdict": "improved",
                        "bench_ratio": 0.9,
                        "bench_lo": 0.88,
                        "bench_hi": 0.92,
                        "profiler_ratio": 0.99,
                        "profiler_lo": 0.98,
                        "profiler_hi": 1.0,
                        "reason": "the profiler rules out a gain of 1%",
                    }
                ],
            },
        },
        "diff_scan": {
            "findings": [
                {"rule": "clock-time", "path": "k.py", "line": 7, "text": "time.perf_counter = lambda: 0\x1b[2J"}
            ],
            "reason": "...",
        },
    }
    notes = iv.decision_notes(Iteration(3, "borderline", record=record))
    by = {n.label: n for n in notes}
    assert "suspicious_speedup" not in by  # the reason names it already
    assert "does not agree with the benchmark" in by["profiler_disagrees"].text
    assert by["reverify_disagrees"].tone == "bad" and "fresh separate processes" in by["reverify_disagrees"].text
    assert by["made_up_flag"].text == "(a flag this version of kopt does not know)"
    assert by["fresh processes"].text == "DISAGREES: tie: no class changed (41.0 s)"
    prof = by["profiler k=1"]
    assert prof.tone == "bad" and "1000 → 990 ns/call -1.00% [-2.0, +0.0]" in prof.text
    assert "bench -10.00% [-12.0, -8.0]: disagrees (the profiler rules out a gain of 1%)" in prof.text
    assert "kernels +new_k" in prof.text
    assert "grew beyond noise" in by["outside ranges"].text
    assert by["diff clock-time"].text == "k.py:7  time.perf_counter = lambda: 0␛[2J"  # no escape reaches the screen
    assert iv.decision_notes(Iteration(0, "baseline")) == ()


def test_decision_notes_say_how_a_keep_was_confirmed_and_by_what_truth():
    record = {
        "decision": {"verdict": "keep", "reason": "cls=a -30%", "flags": []},
        "confirmation": {
            "outcome": "confirmed",
            "reason": "cls=a -29.5% in 3 looks",
            "looks": 3,
            "seconds": 2.4,
            "path": "served",
            "classes": {},
        },
        "external_truth": {
            "kind": "os_time",
            "outcome": "confirmed",
            "reason": "the OS's accounting shows 0.30 s saved of the 0.31 s claimed",
        },
    }
    by = {n.label: n for n in iv.decision_notes(Iteration(4, "keep", record=record))}
    assert by["confirmation"].tone == "good"
    assert by["confirmation"].text.startswith("confirmed in 3 fresh look(s), 2.4 s: cls=a -29.5%")
    assert by["truth: os time"].tone == "good" and "0.30 s saved" in by["truth: os time"].text
    timer_only = {
        **record,
        "external_truth": {"kind": "none", "outcome": "unconfirmed", "reason": "confirmed by the bench's timer only"},
        "confirmation": {**record["confirmation"], "outcome": "refuted"},
    }
    by = {n.label: n for n in iv.decision_notes(Iteration(5, "rejected", record=timer_only))}
    assert by["confirmation"].tone == "bad" and by["truth: none"].tone == ""
    assert by["truth: none"].text == "confirmed by the bench's timer only"
    by_profile = {
        **record,
        "confirmation": {**record["confirmation"], "path": "profiler", "looks": 0, "seconds": 0.0},
    }
    by = {n.label: n for n in iv.decision_notes(Iteration(6, "keep", record=by_profile))}
    assert by["confirmation"].tone == "good" and by["confirmation"].text.startswith("confirmed by its profile pair")


def test_plan_view_puts_the_citations_beside_the_plan_and_explains_uncited():
    cited = Iteration(
        2,
        "keep",
        hypothesis="h",
        target_class="cls=large",
        record={
            "plan": {
                "ok": True,
                "hypothesis": "Cut fake_kernel_large",
                "flags": [],
                "reason": "",
                "citations": [
                    {"kind": "kernel", "term": "fake_kernel_large", "evidence": "61% of GPU time, 12 regs"},
                    {"kind": "class", "term": "cls=large", "evidence": "best 149.1 us"},
                ],
            }
        },
    )
    p = iv.plan_view(cited)
    assert p.assessed and p.target == "cls=large" and p.flags == ()
    assert [(c.kind, c.term, c.evidence) for c in p.citations] == [
        ("kernel", "fake_kernel_large", "61% of GPU time, 12 regs"),
        ("class", "cls=large", "best 149.1 us"),
    ]
    uncited = iv.plan_view(
        Iteration(
            3,
            "regression",
            hypothesis="try",
            record={
                "plan": {
                    "hypothesis": "try",
                    "flags": ["uncited"],
                    "reason": "the plan names no config class",
                    "citations": [],
                }
            },
        )
    )
    assert (
        uncited.flags[0][0] == "uncited"
        and "a guess" in uncited.flags[0][1]
        and uncited.target == "all classes (global)"
    )
    assert not iv.plan_view(Iteration(4, "fail_propose", hypothesis="")).assessed


def test_timing_rows_follow_the_iteration_and_give_shares():
    it = Iteration(
        5,
        "keep",
        record={
            "timings": {
                "gate_wait_s": 2.0,
                "proposer_s": 60.0,
                "police_s": 0.5,
                "looks_s": [1.0, 3.0, 4.0],
                "reverify_s": 12.0,
                "commit_s": 0.5,
                "total_s": 80.0,
                "engine_s": 3.0,
                "bogus": 9,
                "format_s": "nan",
            }
        },
    )
    rows = iv.timing_rows(it)
    assert [r.phase for r in rows] == [
        "gate wait",
        "proposer",
        "police",
        "looks",
        "reverify",
        "commit",
        "total",
        "kopt itself",
    ]
    looks = rows[3]
    assert looks.seconds == 8.0 and looks.note == "3 looks, slowest 4.00 s" and looks.share == pytest.approx(10.0)
    assert rows[-2].share is None and rows[-1].share == pytest.approx(3.75)
    assert iv.timing_rows(Iteration(6, "running")) == ()


def test_agent_rows_list_the_proposal_and_each_repair():
    it = Iteration(
        4,
        "keep",
        record={
            "proposal": {
                "agent": agent(
                    0.5,
                    20000,
                    900,
                    cache_read_tokens=15000,
                    session_id="s-9",
                    transcript_path="logs/v4/proposer.out",
                    transcript_bytes=4096,
                )
            },
            "repairs": [
                {
                    "agent": agent(
                        None,
                        None,
                        None,
                        name="command",
                        notes=("no usage reported",),
                        transcript_path="logs/v4/proposer_repair1.out",
                    )
                },
                {"exit": 1},
            ],
        },
    )
    rows = iv.agent_rows(it)
    assert [r.label for r in rows] == ["proposal", "repair 1"]
    assert rows[0].cost == "$0.50" and rows[0].tokens == "20k in (15k cached) · 900 out" and rows[0].session == "s-9"
    assert rows[0].transcript == "logs/v4/proposer.out" and rows[0].transcript_size == "4.0 KiB"
    assert rows[1].cost == "not reported" and rows[1].tokens == "not reported"
    assert rows[1].notes == ("no usage reported",)


def test_transcript_lines_are_readable_and_inert():
    """JSON lines become one event a line; an agent's text can carry terminal escapes, Rich
    markup, bidirectional overrides and megabyte lines: none reaches the terminal as such."""
    events = [
        {"type": "system", "subtype": "init", "session_id": "s", "tools": ["Read"]},
        {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": "[bold red]owned[/] \x1b]52;c;Zm9v\x07"}]},
        },
        {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]},
        },
        {"type": "result", "subtype": "success", "result": "done \u202ereversed", "total_cost_usd": 0.1},
    ]
    text = "\n".join(json.dumps(e) for e in events) + "\nplain\rover\n{not json\n" + "x" * 5000 + "\n"
    lines = iv.transcript_lines(text)
    assert lines[:4] == [
        "[system.init]",
        "[assistant] [bold red]owned[/] ␛]52;c;Zm9v�",
        '[assistant] Bash({"command": "ls"})',
        "[result.success] done �reversed",
    ]
    assert lines[4:7] == ["plain", "over", "{not json"] and len(lines[7]) == iv.LINE_MAX  # \r ends a line
    raw = iv.transcript_lines(text, raw=True)
    assert raw[0] == json.dumps(events[0]) and all("\x1b" not in ln and "\r" not in ln for ln in raw)


# -- the transcript reader refuses what is not a transcript under logs/ ------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    w = Workspace(tmp_path / "root", "t")
    (w.log_dir(1)).mkdir(parents=True)
    (w.log_dir(1) / "proposer.out").write_text("hello\n")
    (w.dir / "run.db").write_text("not for the TUI")
    (tmp_path / "secret.txt").write_text("outside")
    return w


def test_a_transcript_under_logs_is_read(ws: Workspace):
    t = api.read_transcript(ws, "logs/v1/proposer.out")
    assert (t.text, t.size, t.cut, t.error) == ("hello\n", 6, False, "")


@pytest.mark.parametrize(
    "path",
    [
        "../secret.txt",
        "logs/../../secret.txt",
        "run.db",
        "logs/../run.db",
        "",
        "/etc/passwd",
        "logs/v1/missing.out",
        "logs/v1/\x00x",
    ],
)
def test_paths_outside_logs_are_refused(ws: Workspace, path: str):
    t = api.read_transcript(ws, path)
    assert t.text == "" and t.error


def test_symbolic_links_and_fifos_are_refused(ws: Workspace, tmp_path: Path):
    (ws.log_dir(1) / "link.out").symlink_to(tmp_path / "secret.txt")
    (ws.log_dir(1) / "db.out").symlink_to(ws.dir / "run.db")
    os.mkfifo(ws.log_dir(1) / "fifo.out")  # opening it for reading would block the worker
    for name in ("link.out", "db.out", "fifo.out"):
        t = api.read_transcript(ws, f"logs/v1/{name}")
        assert t.text == "" and t.error, name


def test_a_large_transcript_shows_its_head_and_tail(ws: Workspace):
    (ws.log_dir(1) / "big.out").write_bytes(b"H" * 3000 + b"M" * 10000 + b"T" * 3000)
    t = api.read_transcript(ws, "logs/v1/big.out", limit=4000)
    assert t.cut and t.size == 16000 and t.text.startswith("H" * 2000) and t.text.endswith("T" * 2000)
    assert "M" not in t.text and "12000 bytes of the transcript not shown" in t.text


# -- kopt status ------------------------------------------------------------------------------------


def test_status_json_says_what_the_engine_recorded(runs_root: Path):
    from kopt_supervisor.engine.store import Store
    from tests.tui.fixtures import REVIEW

    ws = Workspace(runs_root, REVIEW)
    st = api.status(ws)
    with Store(ws.db_path, readonly=True) as s:
        meta, its = s.meta(), s.iterations()
    assert st["sandbox"] == meta["sandbox"] and st["unsandboxed"] is False
    assert st["decision_cost"] == meta["decision_cost"] and isinstance(st["decision_cost"]["slow"], bool)
    last = max((it for it in its if it.final and "total_s" in it.record.get("timings", {})), key=lambda it: it.version)
    assert st["timings"]["last_version"] == last.version and st["timings"]["last"] == last.record["timings"]
    engine = sorted(it.record["timings"]["engine_s"] for it in its if it.final and it.version > 0)
    assert st["timings"]["iterations"] == len(engine)
    assert st["timings"]["engine_s_median"] == pytest.approx(__import__("statistics").median(engine))
    runs = [r for it in its for r in [it.record.get("proposal"), *it.record.get("repairs", [])] if r and "agent" in r]
    a = st["agent"]
    assert a["runs"] == len(runs) and a["runs_without_cost"] == sum(r["agent"]["cost_usd"] is None for r in runs)
    assert a["cost_usd"] == pytest.approx(sum(r["agent"]["cost_usd"] or 0 for r in runs))
    assert a["tokens"] == sum(r["agent"]["input_tokens"] + r["agent"]["output_tokens"] for r in runs)
    assert (a["budget_usd"], a["budget_tokens"], a["no_cost_agents"]) == (0.0, 0, ["command"])
    assert set(a["by_version"]) == {str(v) for v in range(1, 9)}
    json.dumps(st)  # the stable JSON is JSON


def test_status_text_warns_of_no_sandbox_and_slow_decisions(runs_root: Path, capsys):
    from kopt_supervisor.engine.store import Store
    from kopt_supervisor.kopt_tui.cli import main as kopt
    from tests.tui.fixtures import DONE

    ws = Workspace(runs_root, DONE)
    with Store(ws.db_path) as s:
        s.set_many({"sandbox": UNCONFINED, "decision_cost": SLOW})
    assert kopt(["--root", str(runs_root), "status", DONE]) == 0
    out = capsys.readouterr().out
    assert f"⚠ {UNCONFINED['summary']}" in out and f"⚠ slow decisions: {SLOW['text']}" in out
    assert "agent: $" in out and "kopt's own time per iteration: median" in out
    assert kopt(["--root", str(runs_root), "status", DONE, "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["unsandboxed"] is True and st["decision_cost"]["slow"] is True
    assert fmt.usd(st["agent"]["cost_usd"]) in out


def test_every_status_key_is_documented_and_every_documented_key_exists(runs_root: Path):
    import re

    from tests.tui.fixtures import REVIEW

    doc = (Path(__file__).resolve().parents[2] / "docs" / "files.md").read_text()
    table = doc.split("## `kopt status TAG --json`", 1)[1].split("\n## ", 1)[0]
    documented = {
        name
        for line in table.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([a-z_]+)`", line.split(" | ")[0])
    }
    keys = set(api.status(Workspace(runs_root, REVIEW)))
    assert keys == documented, (keys - documented, documented - keys)


def test_every_status_fits_the_history_column_whole():
    from kopt_supervisor.engine.api import Status
    from kopt_supervisor.kopt_tui.widgets.history import STATUS_LABEL, columns_for
    from kopt_supervisor.kopt_tui.widgets.styles import STATUS_STYLE

    width = next(c.width for c in columns_for(80) if c.key == "status")
    for status in Status:
        assert len(STATUS_LABEL.get(status, status)) <= width, status
        assert status in STATUS_STYLE, status


def test_a_heartbeat_does_not_add_up_the_agent_costs_again(runs_root: Path):
    """The dashboard's cost line is derived from every record: a reading whose history did
    not move carries it over; one whose history moved computes it afresh."""
    from kopt_supervisor.engine.store import Store
    from kopt_supervisor.kopt_tui.watch import RunCache
    from tests.tui.fixtures import DONE

    ws = Workspace(runs_root, DONE)
    cache = RunCache(ws, probe=lambda w: (False, None))
    first = cache.refresh()
    spending = first.agent_spending
    with Store(ws.db_path) as s:
        s.set("heartbeat", {"t": 1.0, "pid": 1})
    beat = cache.refresh()
    assert beat is not first and beat.agent_spending is spending
    with Store(ws.db_path) as s:
        it = s.iteration(1)
        it.record["proposal"]["agent"]["cost_usd"] = 100.0
        s.save_iteration(it)
    moved = cache.refresh()
    assert moved.agent_spending is not spending and moved.agent_spending["cost_usd"] > spending["cost_usd"] + 99


async def test_the_runs_home_and_kopt_ls_mark_a_run_without_the_sandbox(runs_root: Path, capsys):
    from kopt_supervisor.engine.store import Store
    from kopt_supervisor.kopt_tui.app import KoptApp
    from kopt_supervisor.kopt_tui.cli import main as kopt
    from kopt_supervisor.kopt_tui.screens.runs import RunsScreen
    from tests.tui.fixtures import DONE, offline_services, until

    with Store(Workspace(runs_root, DONE).db_path) as s:
        s.set("sandbox", UNCONFINED)
    app = KoptApp(runs_root, None, services=offline_services(runs_root))
    async with app.run_test(size=(160, 20)) as pilot:
        await until(
            pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.query_one("DataTable").row_count == 2
        )
        table = app.screen.query_one("DataTable")
        cells = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[3]) for i in range(2)}
        assert cells[DONE].endswith("⚠ no sandbox") and "sandbox" not in cells["fake-review"]
    assert kopt(["--root", str(runs_root), "ls"]) == 0
    out = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "⚠ NO SANDBOX" in out[DONE] and "SANDBOX" not in out["fake-review"]
