"""Changes to a run's history that both the engine and an offline CLI make: mask, unmask,
restart. One implementation, so a command means the same thing whoever applies it.

The caller owns the workspace (the engine, or a CLI holding the workspace lock).
"""

from __future__ import annotations

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.records import Status, restart_point_problem
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, write_memory


def rewrite_memory(ws: Workspace, store: Store, versions: list[int]) -> None:
    for it in store.iterations(versions=versions):
        write_memory(ws, it)


def set_masked(ws: Workspace, store: Store, versions: list[int], masked: bool) -> list[int]:
    """Mask or unmask iterations; the baseline and an iteration in flight cannot be."""
    rows = {it.version: it for it in store.rows()}
    for v in versions:
        if v not in rows:
            raise BadInput(f"v{v} does not exist")
        if v == 0 or rows[v].status in (Status.RUNNING, Status.BORDERLINE):
            raise BadInput(f"v{v} cannot be {'masked' if masked else 'unmasked'} (the baseline or in flight)")
    changed = store.set_masked(versions, masked)
    rewrite_memory(ws, store, changed)
    return changed


def check_restart_point(store: Store, version: int) -> None:
    problem = restart_point_problem(store.iteration(version), version)
    if problem:
        raise BadInput(problem)


def restart_from(ws: Workspace, store: Store, version: int, why: str = "") -> list[int]:
    """Mask every later unmasked iteration (the masked partial restart). Counters and
    BEST_COMMIT follow by derivation; the engine re-syncs the worktrees."""
    check_restart_point(store, version)
    later = [it.version for it in store.rows() if it.version > version and not it.masked]
    changed = store.set_masked(later, True)
    rewrite_memory(ws, store, changed)
    store.event("restart", f"restarted from v{version}; masked {', '.join(f'v{v}' for v in changed) or 'nothing'}"
                + (f": {why}" if why else ""), version=version)
    return changed
