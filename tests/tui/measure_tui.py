"""Measure the TUI's figures for docs/user-guide.md: idle CPU and time to open a big run.

    /work/main/.venv/bin/python -m tests.tui.measure_tui        # from the repository root, ~3 min

Everything runs the real `kopt` (python -m kopt_supervisor.kopt_tui.cli) in tmux, like an engineer over SSH:

1. idle CPU of `kopt attach` on a quiet run (the frozen fake-done run grown to 1,000
   iterations; no engine), as psutil's cpu_percent of the TUI process over 20 s;
2. idle CPU of `kopt attach` on a live engine that is paused (it still writes its heartbeat
   every second and its progress five times a second, so the TUI re-reads run.db all the time);
3. time to open a 1,000-iteration run: from starting `kopt attach` in a 200×60 tmux pane to the
   history showing "1000 iterations" (Python start-up and imports included), best of 3;
4. the same, headless in-process (App.run_test), best of 3;
5. paging through the 1,000 rows: PageUp ×20 at 200×60 (Pilot), per page, and the same for a
   bare Textual DataTable of 1,000 rows × 8 columns (what the library costs by itself);
6. Python start-up plus the TUI's imports (`python -c "import kopt_supervisor.kopt_tui.cli, kopt_supervisor.kopt_tui.app"`).

It prints a table; paste it into docs/user-guide.md with the date and the machine.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from kopt_supervisor.engine import api
from kopt_supervisor.engine.workspace import Workspace
from tests.conftest import make_fake_repo
from tests.tui.fixtures import DONE, install_runs, offline_services, until
from tests.tui.live import BORDERLINE_NOISE, cli, init_run, kill_engine, state, wait_for
from tests.tui.test_e2e_tmux import Tmux

SAMPLE_S = 20.0


def tui_pid(tmux: Tmux, session: str) -> int:
    return int(tmux.run("display", "-p", "-t", session, "#{pane_pid}").stdout.strip())


def attach(tmux: Tmux, session: str, root: Path, tag: str, size: str = "200x60") -> None:
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "TERM": "xterm-256color", "PATH": os.environ["PATH"]}
    w, h = size.split("x")
    command = (
        "env "
        + " ".join(f"{k}={v}" for k, v in env.items())
        + f" {sys.executable} -m kopt_supervisor.kopt_tui.cli --root {root} attach {tag}"
    )
    tmux.run("new-session", "-d", "-s", session, "-x", w, "-y", h, command)


def idle_cpu(tmux: Tmux, session: str, settle_s: float = 5.0) -> float:
    proc = psutil.Process(tui_pid(tmux, session))
    time.sleep(settle_s)
    proc.cpu_percent(None)
    time.sleep(SAMPLE_S)
    return proc.cpu_percent(None)


def open_time(tmux: Tmux, root: Path, tag: str, marker: str) -> float:
    best = float("inf")
    for i in range(3):
        session = f"open{i}"
        t0 = time.perf_counter()
        attach(tmux, session, root, tag)
        while marker not in tmux.run("capture-pane", "-p", "-t", session).stdout:
            time.sleep(0.01)
        best = min(best, time.perf_counter() - t0)
        tmux.run("kill-session", "-t", session)
    return best


async def headless_open_and_scroll(root: Path, tag: str) -> tuple[float, float]:
    from kopt_supervisor.kopt_tui.app import KoptApp
    from kopt_supervisor.kopt_tui.widgets.history import HistoryTable

    best_open, per_page = float("inf"), 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        app = KoptApp(root, tag, services=offline_services(root))
        async with app.run_test(size=(200, 60)) as pilot:
            await until(
                pilot,
                lambda a=app: a.screen.query("#history") and a.screen.query_one(HistoryTable).row_count == 1000,
                30,
            )
            best_open = min(best_open, time.perf_counter() - t0)
            t1 = time.perf_counter()
            for _ in range(20):
                await pilot.press("pageup")
            per_page = (time.perf_counter() - t1) / 20
            await pilot.press("q")
    return best_open, per_page


async def bare_datatable_page() -> float:
    from rich.text import Text
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    class Bare(App[None]):
        def compose(self) -> ComposeResult:
            yield DataTable(cursor_type="row")

        def on_mount(self) -> None:
            t = self.query_one(DataTable)
            for i in range(8):
                t.add_column(f"c{i}", width=60 if i == 3 else 10)
            for r in range(1000):
                t.add_row(*[Text(f"{r}:{c}", style="green") for c in range(8)])
            t.move_cursor(row=999)

    app = Bare()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause(0.5)
        t0 = time.perf_counter()
        for _ in range(20):
            await pilot.press("pageup")
        return (time.perf_counter() - t0) / 20


def import_time() -> float:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    best = float("inf")
    for _ in range(4):  # the first run warms the file cache
        t0 = time.perf_counter()
        res = subprocess.run(
            [sys.executable, "-c", "import kopt_supervisor.kopt_tui.cli, kopt_supervisor.kopt_tui.app"],
            cwd=root,
            env=env,
            capture_output=True,
        )
        assert res.returncode == 0, res.stderr
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    from tests.tui.fixtures import grow_run

    tmp = Path(tempfile.mkdtemp(prefix="kopt-measure-"))
    root = install_runs(tmp / "workspaces", [DONE])
    grow_run(Workspace(root, DONE), 1000)
    tmux = Tmux(f"kopt-measure-{os.getpid()}")
    rows: list[tuple[str, str]] = []
    live_ws = None
    try:
        attach(tmux, "quiet", root, DONE)
        wait_for(lambda: "1000 iterations" in tmux.screen("quiet"), 30, "the TUI")
        rows.append(
            ("idle CPU, `kopt attach` on a stopped 1,000-iteration run (20 s)", f"{idle_cpu(tmux, 'quiet'):.1f}%")
        )
        tmux.run("kill-session", "-t", "quiet")

        os.environ["FAKE_NOISE"] = BORDERLINE_NOISE
        repo = make_fake_repo(tmp / "live-target", script=["gain5", "loss5"])
        os.environ["FAKE_SCRIPT"] = str(tmp / "live-target.script.json")
        live_ws = init_run(repo, root, "live")
        assert cli("--root", str(root), "run", "live", "--headless").returncode == 0
        wait_for(lambda: len(api.status(live_ws).get("progress") or {}) and api.status(live_ws)["iteration"], 60)
        api.send(live_ws, "pause", source="measure")
        wait_for(lambda: state(live_ws) == "paused", 60, "the engine to pause")
        attach(tmux, "live", root, "live")
        wait_for(lambda: "paused" in tmux.screen("live"), 30, "the TUI")
        rows.append(
            (
                "idle CPU, `kopt attach` on a paused live engine (heartbeat 1/s, progress 5/s; 20 s)",
                f"{idle_cpu(tmux, 'live'):.1f}%",
            )
        )
        tmux.run("kill-session", "-t", "live")
        kill_engine(live_ws)

        rows.append(
            (
                "open a 1,000-iteration run in tmux 200×60 (process start → history drawn), best of 3",
                f"{open_time(tmux, root, DONE, '1000 iterations'):.2f} s",
            )
        )
        headless, page = asyncio.run(headless_open_and_scroll(root, DONE))
        rows.append(("open a 1,000-iteration run headless (App.run_test 200×60), best of 3", f"{headless:.2f} s"))
        rows.append(("PageUp through the 1,000 rows at 200×60 (Pilot), per page", f"{page * 1000:.0f} ms"))
        bare = asyncio.run(bare_datatable_page())
        rows.append(("the same, a bare Textual DataTable of 1,000 × 8 cells", f"{bare * 1000:.0f} ms"))
        rows.append(
            (
                "Python start-up + `import kopt_supervisor.kopt_tui.cli, kopt_supervisor.kopt_tui.app`, best of 4",
                f"{import_time():.2f} s",
            )
        )
    finally:
        tmux.kill_server()
        if live_ws is not None:
            kill_engine(live_ws)
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"# {time.strftime('%Y-%m-%d')} on {platform.node()}: {psutil.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), Python {platform.python_version()}"
    )
    print("| measure | value |\n|---|---|")
    for what, value in rows:
        print(f"| {what} | {value} |")


if __name__ == "__main__":
    main()
