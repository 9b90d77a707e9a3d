"""The loop: the state machine on one page (machine.py) and its collaborators beside it
(start, control, context, proposal, measure, served_trees, evidence, keep; run_history and
processes beneath them). docs/architecture.md follows one iteration through them."""

from __future__ import annotations

from kopt_supervisor.engine.history import write_projections
from kopt_supervisor.engine.loop.machine import BaselineFailed, Engine
from kopt_supervisor.engine.workspace import Workspace

__all__ = ["BaselineFailed", "Engine", "write_initial_projections"]


def write_initial_projections(ws: Workspace) -> None:
    """README.md and performance.md right after `kopt init`."""
    with ws.open_store() as store:
        write_projections(ws, store, ws.load_config())
