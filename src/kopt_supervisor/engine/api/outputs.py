"""What a run leaves behind and what a machine measures: results.md (`kopt report`), a
clean branch in the target repo (`kopt export`), and this GPU's measured ceilings
(`kopt ceilings`). The modules behind them load only when asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kopt_supervisor.engine.workspace import Workspace


def write_report(ws: Workspace) -> Path:
    """Write results.md (and its chart) in the run's workspace; its path."""
    from kopt_supervisor.engine.report.writer import write_report as write

    return write(ws)


def export_branch(ws: Workspace, branch: str) -> str:
    """Create `branch` in the target repo: the kept source changes, one commit per keep, and
    results.md; nothing is checked out. One line saying what was made."""
    from kopt_supervisor.engine.report.writer import export_branch as export

    return export(ws, branch)


def measure_ceilings(root: Path) -> dict[str, Any]:
    """Measure this GPU's copy bandwidth and matrix rate and register them as cited sources
    under `root`; the stable JSON of `kopt ceilings --json` (its "lines" for people)."""
    from kopt_supervisor.engine.ceilings import measure_ceilings as measure

    return measure(root)
