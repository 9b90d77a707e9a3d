"""Regenerate tests/tui/data/: two runs made by the real engine on the fake target, frozen.

    /work/main/.venv/bin/python -m tests.tui.make_fixture        # from the repository root, ~40 s
    /work/main/.venv/bin/python -m tests.tui.make_fixture lanes  # only fake-lanes
    /work/main/.venv/bin/python -m tests.tui.make_fixture lanes-review  # only fake-lanes-review
    /work/main/.venv/bin/python -m tests.tui.make_fixture lanes4        # only fake-lanes4

The TUI's snapshot tests need a run.db whose every shown value is fixed (times, commits,
measured latencies with real noise), so the runs are made once by the engine and kept as
SQL text (diffable) with their plans, diffs and a few logs:

- `fake-review`: a detached engine on a scripted proposer (keep, split, failed proposal,
  keep after a correctness repair, protected-file violation, two regressions, then a 0.5%
  gain measured under 1% noise: borderline), killed with SIGKILL while it awaits the
  review. v3 is then masked through `engine.api.send` (as `kopt memory mask` would).
- `fake-done`: three iterations run in the foreground and stopped by --max-iters.
- `fake-lanes` (`python -m tests.tui.make_fixture lanes` makes only this one): two lanes
  ([parallel] lanes = 2) on three fake GPUs, one of them busy with someone's training; a
  detached engine killed with SIGKILL once candidates have ended in both lanes and both
  measure at once (the dashboard's lanes panel).
- `fake-lanes-review` (`... make_fixture lanes-review`): two lanes on the same three GPUs,
  each proposing a 0.5% gain measured under 0.05% noise (borderline every time); a detached
  engine killed with SIGKILL once both candidates await the engineer at once (the TUI's
  review queue).
- `fake-lanes4` (`... make_fixture lanes4`): four lanes on four fake GPUs, one of them busy
  (so one lane waits for a GPU); v1 is 3.3× faster (a suspicious speedup: review), v2's
  proposer takes 3 s for a 1% gain measured under 0.3% noise (undecided for several looks: a live
  interval), v3's proposer hangs (proposing); killed with SIGKILL at the moment the lanes
  show exactly that (the dashboard at 80×24 and 200×60).

Both run the scripted proposer inside tests/tui/fixture_agent.py, which makes it look like
an agent CLI to kopt: a JSON-lines transcript (kept as logs/vN/proposer.out), the cost and
tokens it reports through $KOPT_USAGE, and plans that cite the context pack's evidence on
even iterations.

Times are shifted so each run starts at 2026-11-22 09:00 UTC; the workspace root and the
target repo are written as @ROOT@ and @REPO@, which `tests/tui/fixtures.py` fills in.
Run it again whenever engine/store.py's schema changes (test_fixture_schema_is_current says so).
"""

from __future__ import annotations

import calendar
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import api, daemon
from kopt_supervisor.engine.workspace import Workspace, secret_path
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import FAKE, make_fake_repo

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
AGENT = {f"{sys.executable} {FAKE / 'proposer.py'}": f"{sys.executable} {HERE / 'fixture_agent.py'}"}
"""The scripted proposer, run inside the fixture's agent wrapper."""
T0 = calendar.timegm((2026, 11, 22, 9, 0, 0))
GPUS = [
    [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-5c1d0e2a",
            "util_pct": 97,
            "mem_used_mib": 61234,
            "mem_total_mib": 81559,
            "processes": [{"pid": 4711, "name": "python train.py", "user": "maria", "mem_mib": 61000}],
        },
        {
            "index": 1,
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-9f3b77c4",
            "util_pct": 0,
            "mem_used_mib": 3,
            "mem_total_mib": 81559,
        },
    ]
]
LANE_GPUS = [[*GPUS[0], {**GPUS[0][1], "index": 2, "uuid": "GPU-2e81a0d9"}]]
"""The lanes run's GPUs: GPU 0 busy with someone's training, 1 and 2 idle (one per lane)."""
LANE4_GPUS = [[*LANE_GPUS[0], {**GPUS[0][1], "index": 3, "uuid": "GPU-71c4d2b8"}]]
"""fake-lanes4's GPUs: GPU 0 busy, 1, 2 and 3 idle: one of its four lanes waits."""
LANES4_SCRIPT = [
    "do:speed['small'] *= 0.3; speed['large'] *= 0.3; json.dump(k, open('kernel.json', 'w')); "
    "plan = 'skip the softmax rescale in the inner loop\\nscope: global\\n'",
    "do:time.sleep(3); speed['small'] *= 0.99; speed['large'] *= 0.99; json.dump(k, open('kernel.json', 'w')); "
    "plan = 'split K over two warps and reduce in shared memory\\nscope: global\\n'",
    "hang_proposer",
]
REVIEW_SCRIPT = ["gain5", "split", "nochange", "wrong_fixed_on_repair", "protected", "loss5", "loss5", "gain05"]
DONE_SCRIPT = ["gain5", "loss5", "gain1"]


def _shift(value: Any, dt: float) -> Any:
    """Every timestamp in a JSON value moved by dt (numbers between 2023 and 2036 are times)."""
    if isinstance(value, dict):
        return {k: _shift(v, dt) for k, v in value.items()}
    if isinstance(value, list):
        return [_shift(v, dt) for v in value]
    if isinstance(value, float | int) and not isinstance(value, bool) and 1.7e9 < value < 2.1e9:
        return value + dt
    return value


def freeze(ws: Workspace, repo: Path, dest: Path) -> None:
    """Copy a run into tests/tui/data/TAG with its times shifted and its paths replaced."""
    src = sqlite3.connect(ws.db_path)
    src.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db = sqlite3.connect(":memory:")
    src.backup(db)
    src.close()
    created = json.loads(db.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()[0])
    dt = T0 - created

    def text(s: str | None) -> str | None:
        if s is None:
            return None
        return s.replace(str(ws.root), "@ROOT@").replace(str(repo), "@REPO@")

    def js(s: str | None) -> str | None:
        return None if s is None else text(json.dumps(_shift(json.loads(s), dt)))

    for key, value in db.execute("SELECT key, value FROM meta").fetchall():
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (js(value), key))
    for row in db.execute("SELECT version, started_at, finished_at, record FROM iterations").fetchall():
        v, started, finished, record = row
        db.execute(
            "UPDATE iterations SET started_at = ?, finished_at = ?, record = ? WHERE version = ?",
            (started + dt, None if finished is None else finished + dt, js(record), v),
        )
    db.execute("UPDATE samples SET t = t + ?", (dt,))
    for eid, message, data in db.execute("SELECT id, message, data FROM events").fetchall():
        db.execute(
            "UPDATE events SET t = t + ?, message = ?, data = ? WHERE id = ?", (dt, text(message), js(data), eid)
        )
    db.execute("UPDATE commands SET t = t + ?, handled_at = handled_at + ?", (dt, dt))
    db.commit()
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / "run.sql").write_text("\n".join(db.iterdump()) + "\n")
    toml = (
        ws.config_path.read_text()
        .replace(sys.executable, "python")
        .replace(str(FAKE), "tests/fake_target")
        .replace(str(HERE), "tests/tui")
        .replace(str(repo), "@REPO@")
    )
    (dest / "kopt.toml").write_text(toml)
    # the run's secret: offline commands (a restart) check the chain of keeps it sealed
    shutil.copy(secret_path(ws.dir), secret_path(dest))
    shutil.copytree(ws.plans, dest / "plans")
    last = max(int(p.name[1:]) for p in ws.logs.iterdir() if p.name.startswith("v"))
    for d in sorted(ws.logs.iterdir()):
        if not d.is_dir():
            continue
        keep = [
            p
            for p in d.iterdir()
            if p.name == "candidate.diff"
            or (p.name.startswith("proposer") and p.suffix == ".out")  # the agent's transcripts
            or (d.name == f"v{last}" and p.suffix == ".out" and p.stat().st_size)
        ]
        for p in keep:
            (dest / "logs" / d.name).mkdir(parents=True, exist_ok=True)
            shutil.copy(p, dest / "logs" / d.name / p.name)


def make_review_run(base: Path) -> tuple[Workspace, Path]:
    gpus = base / "gpus.json"
    gpus.write_text(json.dumps(GPUS))
    os.environ["KOPT_FAKE_GPUS"] = str(gpus)
    os.environ["FAKE_NOISE"] = "0.01"  # a 0.5% gain under 1% noise stays undecided: borderline
    repo = make_fake_repo(
        base / "review-target",
        script=REVIEW_SCRIPT,
        toml_replace={"review_timeout_s = 2": "review_timeout_s = 1800", **AGENT},
    )
    os.environ["FAKE_SCRIPT"] = str(base / "review-target.script.json")
    root = base / "ws"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "fake-review"]) == 0
    ws = Workspace(root, "fake-review")
    pid = daemon.start_detached(ws)
    deadline = time.monotonic() + 300
    try:
        while api.status(ws)["state"] != "awaiting_review":
            if time.monotonic() > deadline or (api.status(ws)["iteration"] or 0) > len(REVIEW_SCRIPT):
                raise NoBorderline(
                    f"fake-review: v{len(REVIEW_SCRIPT)} (a 0.5% gain under 1% noise) was decided "
                    "without the engineer this time"
                )
            time.sleep(0.2)
    finally:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        while daemon.engine_alive(ws)[0]:
            time.sleep(0.05)
    api.send(ws, "mask", {"versions": [3]}, source="make_fixture")
    return ws, repo


class NoBorderline(Exception):
    """The noise decided the last scripted candidate (the futility rule can): run it again."""


def make_done_run(base: Path) -> tuple[Workspace, Path]:
    os.environ.pop("KOPT_FAKE_GPUS", None)
    os.environ.pop("FAKE_NOISE", None)
    repo = make_fake_repo(base / "done-target", script=DONE_SCRIPT, toml_replace=AGENT)
    os.environ["FAKE_SCRIPT"] = str(base / "done-target.script.json")
    root = base / "ws"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "fake-done"]) == 0
    ws = Workspace(root, "fake-done")
    assert daemon.run_engine(ws, max_iters=3) == 0
    return ws, repo


def make_lanes_run(base: Path) -> tuple[Workspace, Path]:
    from tests.lanes.test_lanes import FAST_GATE
    from tests.reliability.helpers import FAST

    gpus = base / "gpus.json"
    gpus.write_text(json.dumps(LANE_GPUS))
    os.environ.update({"KOPT_FAKE_GPUS": str(gpus), "KOPT_GPU_CLAIMS_DIR": str(base / "claims"), "FAKE_SLEEP": "0.4"})
    os.environ.pop("FAKE_NOISE", None)
    repo = make_fake_repo(
        base / "lanes-target",
        script=LANES_SCRIPT,
        toml_replace={**FAST, **dict([FAST_GATE])},
        extra_toml="\n[parallel]\nlanes = 2\n",
    )
    os.environ["FAKE_SCRIPT"] = str(base / "lanes-target.script.json")
    root = base / "ws"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "fake-lanes"]) == 0
    ws = Workspace(root, "fake-lanes")
    pid = daemon.start_detached(ws)
    deadline = time.monotonic() + 300
    try:
        while not both_lanes_measure(ws):
            if time.monotonic() > deadline:
                raise SystemExit("fake-lanes: never saw both lanes measuring after candidates ended in both")
            time.sleep(0.05)
    finally:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        while daemon.engine_alive(ws)[0]:
            time.sleep(0.05)
    for key in ("KOPT_FAKE_GPUS", "KOPT_GPU_CLAIMS_DIR", "FAKE_SLEEP"):
        os.environ.pop(key, None)
    return ws, repo


def make_lanes_review_run(base: Path) -> tuple[Workspace, Path]:
    from tests.lanes.test_lanes import FAST_GATE
    from tests.reliability.helpers import FAST
    from tests.tui.live import BORDERLINE_NOISE

    gpus = base / "gpus.json"
    gpus.write_text(json.dumps(LANE_GPUS))
    os.environ.update(
        {"KOPT_FAKE_GPUS": str(gpus), "KOPT_GPU_CLAIMS_DIR": str(base / "claims"), "FAKE_NOISE": BORDERLINE_NOISE}
    )
    os.environ.pop("FAKE_SLEEP", None)
    repo = make_fake_repo(
        base / "lanes-review-target",
        script=["gain05"],
        toml_replace={**FAST, **dict([FAST_GATE]), "review_timeout_s = 2": "review_timeout_s = 1800", **AGENT},
        extra_toml="\n[parallel]\nlanes = 2\n",
    )
    os.environ["FAKE_SCRIPT"] = str(base / "lanes-review-target.script.json")
    root = base / "ws"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "fake-lanes-review"]) == 0
    ws = Workspace(root, "fake-lanes-review")
    pid = daemon.start_detached(ws)
    deadline = time.monotonic() + 300
    try:
        while len(api.status(ws)["pending_reviews"]) < 2:
            if time.monotonic() > deadline:
                raise SystemExit("fake-lanes-review: never saw both lanes awaiting review at once")
            time.sleep(0.05)
    finally:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        while daemon.engine_alive(ws)[0]:
            time.sleep(0.05)
    for key in ("KOPT_FAKE_GPUS", "KOPT_GPU_CLAIMS_DIR", "FAKE_NOISE"):
        os.environ.pop(key, None)
    return ws, repo


def make_lanes4_run(base: Path) -> tuple[Workspace, Path]:
    from tests.lanes.test_lanes import FAST_GATE
    from tests.reliability.helpers import FAST

    gpus = base / "gpus.json"
    gpus.write_text(json.dumps(LANE4_GPUS))
    os.environ.update(
        {
            "KOPT_FAKE_GPUS": str(gpus),
            "KOPT_GPU_CLAIMS_DIR": str(base / "claims"),
            "FAKE_SLEEP": "0.5",
            "FAKE_NOISE": "0.003",
        }
    )
    repo = make_fake_repo(
        base / "lanes4-target",
        script=LANES4_SCRIPT,
        toml_replace={**FAST, **dict([FAST_GATE]), "review_timeout_s = 2": "review_timeout_s = 1800", **AGENT},
        extra_toml="\n[parallel]\nlanes = 4\n",
    )
    os.environ["FAKE_SCRIPT"] = str(base / "lanes4-target.script.json")
    root = base / "ws"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "fake-lanes4"]) == 0
    ws = Workspace(root, "fake-lanes4")
    pid = daemon.start_detached(ws)
    deadline = time.monotonic() + 300
    try:
        while not four_lanes_show_everything(ws):
            if time.monotonic() > deadline:
                raise SystemExit("fake-lanes4: never saw a review, a live interval, a proposal and a wait at once")
            time.sleep(0.05)
    finally:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        while daemon.engine_alive(ws)[0]:
            time.sleep(0.05)
    for key in ("KOPT_FAKE_GPUS", "KOPT_GPU_CLAIMS_DIR", "FAKE_SLEEP", "FAKE_NOISE"):
        os.environ.pop(key, None)
    return ws, repo


def four_lanes_show_everything(ws: Workspace) -> bool:
    """One lane in review, one measuring with an interval, one proposing, one waiting for a GPU."""
    if not ws.db_path.exists():
        return False
    lanes = api.status(ws)["lanes"]
    phases = sorted(str(x["phase"]) for x in lanes)
    return phases == ["eval", "propose", "review", "waiting_gpu"] and all(
        x["interval"] for x in lanes if x["phase"] == "eval"
    )


LANES_SCRIPT = ["gain5", "loss5", "gain1", "loss5", "gain5", "loss5", "gain1", "loss5"]


def both_lanes_measure(ws: Workspace) -> bool:
    """Candidates ended in both lanes, and both lanes are past their first look of another."""
    if not ws.db_path.exists():
        return False
    st = api.status(ws)
    with ws.open_store(readonly=True) as store:
        ended = {it.record.get("lane") for it in store.iterations() if it.final and it.version > 0}
    return ended == {0, 1} and all(x["phase"] == "eval" and (x["done"] or 0) >= 1 for x in st["lanes"])


def main() -> None:
    if sys.argv[1:] == ["lanes"]:
        with tempfile.TemporaryDirectory(prefix="kopt-fixture-") as tmp:
            ws, repo = make_lanes_run(Path(tmp))
            freeze(ws, repo, DATA / "fake-lanes")
        return
    if sys.argv[1:] == ["lanes4"]:
        with tempfile.TemporaryDirectory(prefix="kopt-fixture-") as tmp:
            ws, repo = make_lanes4_run(Path(tmp))
            freeze(ws, repo, DATA / "fake-lanes4")
        return
    if sys.argv[1:] == ["lanes-review"]:
        with tempfile.TemporaryDirectory(prefix="kopt-fixture-") as tmp:
            ws, repo = make_lanes_review_run(Path(tmp))
            freeze(ws, repo, DATA / "fake-lanes-review")
        return
    for attempt in range(1, 4):
        with tempfile.TemporaryDirectory(prefix="kopt-fixture-") as tmp:
            try:
                ws, repo = make_review_run(Path(tmp))
            except NoBorderline as e:
                print(f"{e}: attempt {attempt} of 3")
                continue
            freeze(ws, repo, DATA / "fake-review")
            break
    else:
        raise SystemExit("fake-review: no borderline candidate in 3 attempts")
    with tempfile.TemporaryDirectory(prefix="kopt-fixture-") as tmp:
        base = Path(tmp)
        ws, repo = make_done_run(base)
        freeze(ws, repo, DATA / "fake-done")
    for d in sorted(DATA.iterdir()):
        print(f"{d.name}: {sum(p.stat().st_size for p in d.rglob('*') if p.is_file()) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
