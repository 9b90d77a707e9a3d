"""experiments/pooled_spread_sim.py runs end to end on a few trials: every cell's row, no A/A
decision kept under either pool, and the pool that leaves a noisier decision out (not adopted) given the same runs."""

from __future__ import annotations

from experiments import pooled_spread_sim as sim


def test_the_simulation_prints_every_cell_and_keeps_no_aa_decision(capsys) -> None:
    assert sim.main(["--trials", "12", "--seed", "3"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert len(rows) == 2 * len(sim.SCENARIOS)
    for row in rows:
        scenario, pool, verdicts = (c.strip() for c in row.strip("|").split("|")[:3])
        assert pool in ("kopt's", "noisier left out")
        if scenario.startswith("aa"):
            assert "keep" not in verdicts, row
