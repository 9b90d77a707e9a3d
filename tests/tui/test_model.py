"""The TUI's pure parts (formatting, view records) and its incremental reader."""

from __future__ import annotations

import time
from pathlib import Path

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.store import Iteration, Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.watch import Poller, RunCache, RunsSnapshot
from tests.tui.fixtures import DONE, PENDING, REVIEW, grow_run


def dead(ws: Workspace) -> tuple[bool, int | None]:
    return False, None


def engine_written_flags() -> tuple[set[str], set[str]]:
    """(decision flags, plan flags) the engine can write: decide.estimate.FLAGS, and every flag
    literal the engine's source adds to a verdict outside it (`flags=(*verdict.flags, "x")`,
    `send_to_review(v, "x", ...)`, `note(v, "x", ...)`), and the flags a PlanAssessment is
    made with. Read from the syntax tree, so a flag added anywhere in engine/ is found."""
    import ast

    from kopt_supervisor.engine.decide.estimate import FLAGS

    decision, plan = set(FLAGS), set()
    for path in (Path(__file__).resolve().parents[2] / "src" / "kopt_supervisor" / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Tuple) and any(
                isinstance(e, ast.Starred) and isinstance(e.value, ast.Attribute) and e.value.attr == "flags"
                for e in node.elts
            ):
                decision |= {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if (
                    name in ("send_to_review", "note")
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                ):
                    decision.add(node.args[1].value)
                if name == "PlanAssessment":
                    given = [k.value for k in node.keywords if k.arg == "flags"] + node.args[3:4]
                    plan |= {
                        e.value
                        for g in given
                        if isinstance(g, ast.Tuple)
                        for e in g.elts
                        if isinstance(e, ast.Constant)
                    }
    return decision, plan


def test_every_flag_the_engine_writes_is_explained():
    from kopt_supervisor.kopt_tui.flags import FLAG_HELP, PLAN_FLAG_HELP

    decision, plan = engine_written_flags()
    assert {"reverify_disagrees", "profiler_disagrees", "likely_regression", "diff_constructs"} <= decision
    assert plan == {"uncited"}
    assert decision <= set(FLAG_HELP), decision - set(FLAG_HELP)
    assert plan <= set(PLAN_FLAG_HELP), plan - set(PLAN_FLAG_HELP)
    assert set(FLAG_HELP) <= decision, f"help for flags the engine never writes: {set(FLAG_HELP) - decision}"
    assert all(len(h) > 20 for h in [*FLAG_HELP.values(), *PLAN_FLAG_HELP.values()])


def test_formats_stay_short_and_signed():
    assert [fmt.num(x) for x in (10.8349, 149.91, 0.012345, 12345678.0, None)] == [
        "10.83",
        "149.9",
        "0.01235",
        "1.235e+07",
        "—",
    ]
    assert fmt.pct(-5.0234) == "-5.02%" and fmt.ratio_pct(1.0123) == "+1.23%"
    assert fmt.interval(0.95, 0.99) == "[-5.0, -1.0]"
    assert [fmt.age(s) for s in (3.4, 119, 600, 3 * 3600 + 300, 2 * 86400 + 7200)] == [
        "3s",
        "119s",
        "10m",
        "3h05m",
        "2d2h",
    ]
    assert [fmt.clock(s) for s in (42, 723, 3723)] == ["0:42", "12:03", "1:02:03"]


def test_headline_delta_uses_the_target_class_or_the_geomean():
    classes = {"a": {"ratio": 0.9}, "b": {"ratio": 1.0 / 0.9}}
    it = Iteration(1, "keep", record={"classes": classes})
    assert abs(model.headline_delta(it)) < 1e-9  # geometric mean of 0.9 and 1/0.9
    it.target_class = "a"
    assert abs(model.headline_delta(it) + 10.0) < 1e-9
    assert model.headline_delta(Iteration(0, "baseline", record={"classes": classes})) is None


def test_restart_points_and_masks(runs_root: Path):
    with Store(Workspace(runs_root, REVIEW).db_path, readonly=True) as s:
        its = s.iterations()
    assert [it.version for it in model.restart_points(its)] == [0, 1, 4]
    assert [it.version for it in model.restart_masks(its, 4)] == [5, 6, 7, 8]
    assert model.nearest_restart_point(its, 7) == 4 and model.nearest_restart_point(its, 3) == 1
    assert model.nearest_restart_point(its, None) == 4


def test_views_of_the_frozen_review_run(runs_root: Path):
    data = RunCache(Workspace(runs_root, REVIEW), probe=lambda ws: (True, 4242)).refresh()
    assert data is not None and data.state == "awaiting_review" and data.pending_reviews == (PENDING,)
    now = data.heartbeat_t + 2.2
    st = model.state_view(data, now)
    assert (st.heartbeat, st.pid, st.reviews) == ("2s", 4242, (PENDING,))
    prog = model.progress_view(data, now)
    deadline = data.by_version[PENDING].record["review"]["deadline"]
    assert prog.active and prog.left == fmt.clock(deadline - now)
    counters = model.counters_view(data)
    assert (counters.consecutive, counters.limit, [r.version for r in counters.recent]) == (2, 5, [6, 7])
    series = {s.cls: s for s in model.best_series(data)}
    assert set(series) == {"cls=large", "cls=small"}
    assert len(series["cls=small"].values) == PENDING + 1
    assert series["cls=small"].last < series["cls=small"].first  # two keeps made it faster
    gpus = model.gpus_view(data, None, now)  # no live sampling: the engine's gate record
    assert gpus.source == "gate" and [g.idle for g in gpus.rows] == [False, True]
    assert gpus.rows[1].chosen and "foreign" in gpus.rows[0].reasons[0]


def test_run_cache_rereads_only_what_changed(runs_root: Path):
    ws = Workspace(runs_root, DONE)
    cache = RunCache(ws, probe=dead)
    first = cache.refresh()
    assert first is not None and cache.refresh() is None  # nothing moved: nothing read
    with Store(ws.db_path) as s:
        s.set("heartbeat", {"t": time.time(), "pid": 1})
    beat = cache.refresh()
    assert beat is not None and beat.generation == first.generation
    assert all(a is b for a, b in zip(beat.iterations, first.iterations, strict=True))  # rows not re-read
    with Store(ws.db_path) as s:
        s.set_masked([2], True)
    masked = cache.refresh()
    assert masked.generation == first.generation + 1
    assert masked.iterations[2].masked and masked.iterations[1] is first.iterations[1]


def test_run_cache_reads_a_thousand_iterations_and_then_one(runs_root: Path):
    ws = Workspace(runs_root, DONE)
    grow_run(ws, 1000)
    cache = RunCache(ws, probe=dead)
    t0 = time.perf_counter()
    data = cache.refresh()
    assert len(data.iterations) == 1000 and [it.version for it in data.iterations] == list(range(1000))
    first_s = time.perf_counter() - t0
    with Store(ws.db_path) as s:
        s.save_iteration(Iteration(1000, "running", started_at=time.time()))
    t0 = time.perf_counter()
    data = cache.refresh()
    assert len(data.iterations) == 1001 and data.iterations[-1].status == "running"
    assert time.perf_counter() - t0 < first_s  # the second look reads one row, not a thousand


def test_poller_reports_each_run_and_survives_a_broken_one(runs_root: Path):
    (runs_root / "broken").mkdir()
    (runs_root / "broken" / "run.db").write_text("not a database")
    poller = Poller(runs_root, probe=dead, runs_every_s=0.0)
    poller.want_runs = True
    items = poller.step()
    snaps = [i for i in items if isinstance(i, RunsSnapshot)]
    assert snaps and {d.tag: d.state for d in snaps[0].runs} == {
        DONE: "stopped",
        REVIEW: "crashed",
        "broken": "unreadable",
    }
    assert poller.step() == []  # nothing changed since: nothing to report
    poller.close()


def test_fixture_schema_is_current(runs_root: Path):
    """The frozen runs were made by this engine's store: same tables, same schema version.
    If this fails, regenerate them: python -m tests.tui.make_fixture."""
    import sqlite3

    from kopt_supervisor.engine import store as store_mod

    def schema(con: sqlite3.Connection) -> dict[str, str]:
        return {
            name: " ".join(sql.split())
            for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")
        }

    fresh = sqlite3.connect(":memory:")
    fresh.executescript(store_mod.SCHEMA)
    for tag in (REVIEW, DONE):
        con = sqlite3.connect(Workspace(runs_root, tag).db_path)
        assert schema(con) == schema(fresh), tag
        version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        assert int(version) == store_mod.SCHEMA_VERSION
        con.close()


def test_a_cpu_demo_says_so_on_the_state_line(runs_root: Path):
    from kopt_supervisor.kopt_tui.widgets.state_line import StateLine

    ws = Workspace(runs_root, DONE)
    plain = model.state_view(RunCache(ws, probe=dead).refresh(), time.time())
    assert (plain.notice, plain.cpu_demo) == ("", False)
    with Store(ws.db_path) as s:
        s.set_many({"demo": {"kernel": "rmsnorm", "gpu": False}, "notice": "Timings are CPU timings."})
    st = model.state_view(RunCache(ws, probe=dead).refresh(), time.time())
    assert (st.notice, st.cpu_demo) == ("Timings are CPU timings.", True)
    top_and_second = str(StateLine._second_line(st))
    assert top_and_second.startswith("stopped")  # why it stopped still comes first
    running = model.StateView(**{**st.__dict__, "state": "running", "reason": ""})
    assert "Timings are CPU timings." in str(StateLine._second_line(running))


def test_the_class_table_drops_whole_columns_to_fit_instead_of_truncating_numbers() -> None:
    """CPU timings have five-digit values: a 56-cell panel used to show "119…" for best. Now
    the least important columns go first (roof, rnd, best, ...) and what stays is whole."""

    from kopt_supervisor.kopt_tui.model import ClassRow
    from kopt_supervisor.kopt_tui.widgets.class_deltas import COLUMNS

    rows = (
        ClassRow(
            cls="dclass=narrow",
            best=11937.2,
            cand=11371.0,
            ratio=0.9968,
            lo=0.963,
            hi=1.032,
            rounds=6,
            verdict="undecided",
            roof_pct=None,
            target=False,
        ),
        ClassRow(
            cls="dclass=wide",
            best=17750.0,
            cand=13826.0,
            ratio=0.778,
            lo=0.721,
            hi=0.84,
            rounds=6,
            verdict="improved",
            roof_pct=41.0,
            target=True,
        ),
    )

    def render(width: int | None, console_width: int) -> str:
        return rendered_classes(rows, width, console_width)

    full = render(None, 120)
    assert all(c in full.splitlines()[0] for c in COLUMNS) and "11937" in full and "41%" in full
    for width in (30, 48, 56, 62, 70, 80):
        text = render(width, width)
        assert "…" not in text, (width, text)
        assert "-22.20%" in text and "dclass=narrow" in text
    at56 = render(56, 56)
    assert "undecided" in at56 and "[-27.9, -16.0]" in at56 and "11937" not in at56 and "rnd" not in at56
    assert "11937" in render(70, 70) and "roof" not in render(70, 70).splitlines()[0]


def test_a_flag_the_reason_already_names_gets_no_second_explanation() -> None:
    from kopt_supervisor.kopt_tui.flags import flags_to_explain

    reason = "dclass=wide is 3.1x faster, more than the suspicious_speedup of 3x: check that it computes the same thing"
    assert flags_to_explain(reason, ("suspicious_speedup", "outliers_dropped")) == ["outliers_dropped"]
    assert flags_to_explain("undecided after 8 rounds", ["undecided_at_max_rounds"]) == ["undecided_at_max_rounds"]


def test_one_iteration_prints_its_numbers_alike_in_the_tui_results_md_and_the_export() -> None:
    """The same latency, change and interval are the same text on the dashboard, in
    results.md's kept iterations and in the export branch's commit message (engine.fmt)."""
    from rich.console import Console

    from kopt_supervisor.engine.report import ExportedKeep, keep_message
    from kopt_supervisor.engine.report.iterations import _class_deltas
    from kopt_supervisor.kopt_tui.widgets.class_deltas import class_table

    best, cand = 11937.2, 10522.46
    c = {
        "best": best,
        "cand": cand,
        "ratio": cand / best,
        "lo": 0.838,
        "hi": 0.9301,
        "delta_pct": (cand / best - 1) * 100,
        "verdict": "improved",
        "rounds": 6,
    }
    it = Iteration(3, "keep", hypothesis="h", commit="c" * 40, record={"classes": {"dclass=narrow": c}})
    console = Console(width=200, record=True, color_system=None)
    console.print(class_table(model.class_rows(it)))
    tui = console.export_text()
    md = _class_deltas(it)
    message = keep_message(it, "t", ExportedKeep(3, "e" * 40))
    latency, change, interval = fmt.num(best), fmt.pct(c["delta_pct"]), fmt.interval(c["lo"], c["hi"])
    assert (latency, fmt.num(cand), change, interval) == ("11937", "10522", "-11.85%", "[-16.2, -7.0]")
    for text in (latency, fmt.num(cand)):
        assert text in tui and text in message
    for text in (change, interval):
        assert text in tui and text in md and text in message


def rendered_classes(rows: tuple, width: int | None, console_width: int) -> str:
    """The class table as text at `width` (None: every column) in a console that wide."""
    from rich.console import Console

    from kopt_supervisor.kopt_tui.widgets.class_deltas import class_table

    console = Console(width=console_width, record=True, color_system=None)
    console.print(class_table(rows, width=width))
    return console.export_text()


def test_a_long_class_name_leaves_room_for_the_delta_its_interval_and_the_verdict() -> None:
    """The class column is cut at CLASS_MAX cells: fitting the columns counts it so."""
    from kopt_supervisor.kopt_tui.model import ClassRow
    from kopt_supervisor.kopt_tui.widgets.class_deltas import CLASS_MAX

    # cls, best, cand, ratio, lo, hi, rounds, verdict, roof_pct, target
    row = ClassRow(
        "dclass=narrow,dtype=bfloat16,esize=2,layout=nhwc",
        69.12,
        70.77,
        1.0238,
        1.011,
        1.037,
        8,
        "regressed",
        None,
        False,
    )
    header, line = rendered_classes((row,), 70, 70).splitlines()[:2]
    assert {"Δ", "interval", "verdict"} <= set(header.split()), header
    assert "+2.38% slower" in line and "[+1.1, +3.7]" in line and "regressed" in line, line
    assert len(line.split("  ")[0]) <= CLASS_MAX
