"""Changes to a run's history that both the engine and an offline CLI make: mask, unmask,
restart. One implementation, so a command means the same thing whoever applies it.

The caller owns the workspace (the engine, or a CLI holding the workspace lock).
"""

from __future__ import annotations

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, write_memory


def rewrite_memory(ws: Workspace, store: Store, versions: list[int]) -> None:
    for v in versions:
        it = store.iteration(v)
        if it is not None:
            write_memory(ws, it)


def set_masked(ws: Workspace, store: Store, versions: list[int], masked: bool) -> list[int]:
    """Mask or unmask iterations; the baseline and an iteration in flight cannot be."""
    busy = {it.version for it in store.iterations() if it.status in ("running", "borderline")}
    for v in versions:
        if store.iteration(v) is None:
            raise BadInput(f"v{v} does not exist")
        if v == 0 or v in busy:
            raise BadInput(f"v{v} cannot be {'masked' if masked else 'unmasked'} (the baseline or in flight)")
    changed = store.set_masked(versions, masked)
    rewrite_memory(ws, store, changed)
    return changed


def check_restart_point(store: Store, version: int) -> None:
    it = store.iteration(version)
    if it is None:
        raise BadInput(f"v{version} does not exist")
    if it.masked or not it.kept:
        raise BadInput(f"v{version} is not an unmasked baseline or kept iteration (status {it.status}"
                       f"{', masked' if it.masked else ''}); restart needs a committed best point")


def restart_from(ws: Workspace, store: Store, version: int, why: str = "") -> list[int]:
    """Mask every later unmasked iteration (the masked partial restart). Counters and
    BEST_COMMIT follow by derivation; the engine re-syncs the worktrees."""
    check_restart_point(store, version)
    later = [it.version for it in store.iterations() if it.version > version and not it.masked]
    changed = store.set_masked(later, True)
    rewrite_memory(ws, store, changed)
    store.event("restart", f"restarted from v{version}; masked {', '.join(f'v{v}' for v in changed) or 'nothing'}"
                + (f": {why}" if why else ""), version=version)
    return changed
