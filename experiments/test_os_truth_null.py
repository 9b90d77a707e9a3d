"""experiments/os_truth_null.py: its looks in two real pyserve processes as ServedTrees takes
them, its busy loops' command, and its sequential weighing of recorded looks."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

from experiments.os_truth_null import run, sequential
from kopt_supervisor.engine.decide.external_truth import SideCost

ROOT = Path(__file__).resolve().parent.parent


def _costs(saved_share: float, looks: int = 20, seed: int = 0) -> list[SideCost]:
    """Looks whose candidate claims 0.1 s saved and saves `saved_share` of it, the machine's
    speed moving each look's seconds by 15%."""
    rnd = random.Random(seed)
    out = []
    for r in range(looks):
        speed = rnd.uniform(0.85, 1.15)
        best_cpu, claim = 0.4 * speed * rnd.gauss(1, 0.03), 0.1 * speed
        cand_cpu = best_cpu - saved_share * claim * rnd.gauss(1, 0.1)
        out += [
            SideCost("best", r, best_cpu, best_cpu, 0.2 * speed),
            SideCost("cand", r, cand_cpu, cand_cpu, 0.2 * speed - claim),  # single-threaded: wall = CPU
        ]
    return out


def test_a_saving_of_its_claim_is_shown_and_none_is_never() -> None:
    shown, looks = sequential(_costs(1.0), trials=200)
    assert shown == {"shown": 1.0} and 3 <= looks <= 14
    patched, _ = sequential(_costs(0.0), trials=200)
    assert "shown" not in patched and patched.get("refuted", 0) > 0.9, patched


def test_the_command_line_with_its_load_runs_and_writes_its_looks(tmp_path: Path) -> None:
    """As docs/decision.md runs it (`python -m`, where `__name__` is "__main__": its busy loops
    once failed to import there, silently, and "loaded" runs had no load); the run stops if
    they do not start."""
    out = tmp_path / "looks.jsonl"
    argv = [sys.executable, "-m", "experiments.os_truth_null", "--looks", "2", "--load", "bursty", "--out", str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Error" not in done.stderr, done.stderr
    assert len(out.read_text().splitlines()) == 4 and "1 steady look(s): too few to weigh" in done.stdout


def test_two_looks_of_best_and_a_timer_patch() -> None:
    costs = run("marshal", 2, "none")
    assert [(c.side, c.round, c.started) for c in costs] == [
        ("best", 0, True),
        ("cand", 0, True),
        ("best", 1, False),
        ("cand", 1, False),
    ]
    best, cand = costs[2], costs[3]
    assert best.cpu_s > 0 and cand.cpu_s > 0 and best.wall_s > 0
    assert best.claimed_s is not None and cand.claimed_s is not None
    assert 0.3 < cand.claimed_s / best.claimed_s < 0.7  # the patch halves every timed call's reading
