"""The iteration detail's new parts, driven with Pilot on the frozen engine runs: the decision's
evidence, the plan beside its citations, where the time went and what the agent cost, the
agent's transcript (and what the screen refuses to show), and the dashboard's word on the
sandbox, the agent's cost and a slow decision."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Log

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.app import KoptApp
from kopt_supervisor.kopt_tui.screens.detail import DetailScreen
from kopt_supervisor.kopt_tui.screens.transcript import TranscriptScreen
from kopt_supervisor.kopt_tui.widgets.counters import Counters
from kopt_supervisor.kopt_tui.widgets.state_line import StateLine
from tests.tui.fixtures import DONE, PENDING, REVIEW, offline_services, until
from tests.tui.test_actions import dashboard, select_version

SIZE = (120, 40)


def record(root: Path, version: int) -> dict:
    with Store(Workspace(root, REVIEW).db_path, readonly=True) as s:
        return s.iteration(version).record


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector).render())


async def open_detail(pilot, app: KoptApp, version: int) -> DetailScreen:
    await until(pilot, lambda: dashboard(app))
    await select_version(pilot, app, version)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.files_loaded)
    return app.screen


async def test_the_cost_tab_shows_the_phases_and_every_agent_run_and_t_opens_the_transcript(runs_root: Path):
    rec = record(runs_root, 4)  # kept after a correctness repair: two agent runs
    proposal, repair = rec["proposal"]["agent"], rec["repairs"][0]["agent"]
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_detail(pilot, app, 4)
        await pilot.press("right", "right", "right")
        assert screen.query_one("TabbedContent").active == "tab-cost"
        cost = text_of(screen, "#detail-cost")
        t = rec["timings"]
        assert f"{fmt.seconds(t['total_s'], 2)}" in cost and f"{len(t['looks_s'])} looks" in cost
        assert "kopt itself" in cost and f"{fmt.seconds(t['engine_s'], 2)}" in cost
        assert f"proposal  {fmt.usd(proposal['cost_usd'])}  wall {fmt.seconds(proposal['wall_s'])}" in cost
        assert f"repair 1  {fmt.usd(repair['cost_usd'])}  wall" in cost
        assert f"tokens {fmt.count(repair['input_tokens'])} in" in cost
        assert f"session {repair['session_id']}" in cost
        assert screen.query_one("#detail-transcripts").option_count == 2
        await pilot.press("t")  # the newest run: the repair
        await until(pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen.transcript is not None)
        log = app.screen.query_one(Log)
        assert "[assistant] Reading the brief for v4 (repair 1)." in log.lines
        assert any(line.startswith("[result.success]") for line in log.lines)
        await pilot.press("r")  # as written: JSON lines
        assert log.lines[0].startswith('{"type": "system"')
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))


async def test_the_plan_tab_shows_the_plan_beside_what_it_cites(runs_root: Path):
    cited, uncited = record(runs_root, 4)["plan"], record(runs_root, 5)["plan"]
    assert cited["citations"] and uncited["flags"] == ["uncited"]  # the fixture's agent cites on even iterations
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_detail(pilot, app, 4)
        await pilot.press("right")
        assert screen.query_one("TabbedContent").active == "tab-plan"
        assert "Evidence:" in text_of(screen, "#detail-plan")
        side = text_of(screen, "#detail-citations")
        assert f"the evidence it cites ({len(cited['citations'])})" in side
        for c in cited["citations"]:
            assert c["term"] in side and c["evidence"][:40] in side
        await pilot.press("escape")
        screen = await open_detail(pilot, app, 5)
        assert "uncited: the plan names no config class" in text_of(screen, "#detail-citations")


async def test_the_decision_tab_explains_flags_and_the_fresh_processes(runs_root: Path):
    flags = record(runs_root, PENDING)["decision"]["flags"]
    assert flags
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_detail(pilot, app, PENDING)
        evidence = text_of(screen, "#detail-evidence")
        for f in flags:
            assert f in evidence
        await pilot.press("escape")
        screen = await open_detail(pilot, app, 4)
        reverify = record(runs_root, 4)["reverify"]
        assert f"fresh processes agrees: {reverify['verdict']}: " in text_of(screen, "#detail-evidence")


async def test_a_forged_transcript_path_is_not_followed_out_of_the_logs(runs_root: Path):
    ws = Workspace(runs_root, REVIEW)
    (runs_root.parent / "private.txt").write_text("a file of the engineer's")
    with Store(ws.db_path) as s:
        it = s.iteration(1)
        it.record["proposal"]["agent"]["transcript_path"] = "../../private.txt"
        s.save_iteration(it)
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(pilot, app, 1)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen.transcript is not None)
        lines = app.screen.query_one(Log).lines
        assert lines == ["cannot show it: ../../private.txt is not under the run's logs/: not shown"]


def unsandbox(root: Path, tag: str) -> None:
    with Store(Workspace(root, tag).db_path) as s:
        s.set(
            "sandbox",
            {
                **s.get("sandbox"),
                "confined": False,
                "ever_unconfined": True,
                "summary": "UNSANDBOXED (--no-sandbox): every bench ran without confinement",
            },
        )
        s.set(
            "decision_cost",
            {
                **s.get("decision_cost"),
                "slow": True,
                "seconds_change": 400.0,
                "text": "one decision takes about 6.7 min",
            },
        )


async def test_the_dashboard_says_no_sandbox_the_agent_cost_and_a_slow_decision(runs_root: Path):
    unsandbox(runs_root, REVIEW)
    unsandbox(runs_root, DONE)
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: dashboard(app))
        d = dashboard(app)
        top, second = str(d.query_one(StateLine).render()).splitlines()[:2]
        assert "⚠ NO SANDBOX" in top and "$" in top
        assert "engine gone" in second  # what needs the engineer comes first
        counters = d.query_one(Counters).view
        assert counters.decision_slow and counters.agent.startswith("$")
    app = KoptApp(runs_root, DONE, services=offline_services(runs_root))
    async with app.run_test(size=(200, 24)) as pilot:
        await until(pilot, lambda: dashboard(app))
        top, second = str(dashboard(app).query_one(StateLine).render()).splitlines()[:2]
        assert "⚠ NO SANDBOX" in top
        assert second.startswith("stopped: ") and "⚠ UNSANDBOXED (--no-sandbox)" in second
        assert "⚠ one decision takes about 6.7 min" in second
