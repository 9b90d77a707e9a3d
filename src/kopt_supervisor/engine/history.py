"""Changes to a run's history that both the engine and an offline CLI make: mask, unmask,
restart; and the chain of keeps read against the run's seals (`chain`, `check_chain`),
which every reader of BEST takes its answer from. One implementation, so a command means
the same thing whoever applies it.

The caller owns the workspace (the engine, or a CLI holding the workspace lock).
`write_projections` re-renders performance.md and README.md from the history its seals
vouch for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kopt_supervisor.engine import integrity, projections, records
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.errors import BadInput, KoptError
from kopt_supervisor.engine.records import KEPT, Iteration, Phase, Status, restart_point_problem
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, write_atomic, write_memory


def rewrite_memory(ws: Workspace, store: Store, versions: list[int]) -> None:
    for it in store.iterations(versions=versions):
        write_memory(ws, it)


def set_masked(ws: Workspace, store: Store, versions: list[int], masked: bool) -> list[int]:
    """Mask or unmask iterations; the baseline and an iteration in flight cannot be. The
    chain of keeps is checked before (a forged history is never resealed) and sealed after."""
    rows = {it.version: it for it in store.rows()}
    for v in versions:
        if v not in rows:
            raise BadInput(f"v{v} does not exist")
        if v == 0 or rows[v].status in (Status.RUNNING, Status.BORDERLINE):
            raise BadInput(f"v{v} cannot be {'masked' if masked else 'unmasked'} (the baseline or in flight)")
    key = integrity.read_secret(ws.dir)
    check_chain(key, store)
    with store.transaction():  # the masks and their seals together: a crash between never breaks the chain
        changed = store.set_masked(versions, masked)
        reseal(key, store)
    rewrite_memory(ws, store, changed)
    return changed


def kept_rows(store: Store) -> list[Iteration]:
    """The iterations the chain of keeps is made of (with their records)."""
    return store.iterations(
        versions=[
            r.version
            for r in store.rows()
            if (r.status in KEPT and r.commit)
            or (r.status == Status.RUNNING and r.phase in (Phase.COMMIT, Phase.ADVANCE))
        ]
    )


def chain(key: bytes | None, store: Store, *, note: str = "") -> integrity.ChainCheck:
    """What the run's seals vouch for (integrity.verify_chain), read from `store`."""
    return chain_of(key, kept_rows(store), {k: store.get(k) for k in CHAIN_META}, note=note)


CHAIN_META = ("chain_sealed", "chain_head", "baseline_commit")
"""The meta keys the chain check reads."""


def chain_of(
    key: bytes | None, iterations: Sequence[Iteration], meta: Mapping[str, Any], *, note: str = ""
) -> integrity.ChainCheck:
    """What the run's seals vouch for, from its iterations (all, or only the kept ones) and
    its meta. key None: the secret could not be read (`note` says why). A run made before
    keeps were sealed (no meta chain_sealed, and no link carrying a seal) is taken as it
    stands."""
    baseline_commit = meta.get("baseline_commit")
    sealed = any(it.record.get("seal") for it in iterations)
    if not meta.get("chain_sealed") and not sealed:
        return integrity.unverifiable(iterations, baseline_commit, "")
    if key is None:
        return integrity.unverifiable(
            iterations, baseline_commit, note or "the run's secret cannot be read: no keep can be verified"
        )
    if not meta.get("chain_sealed"):
        return integrity.ChainCheck(
            note="run.db's record that its keeps are sealed was removed, but its keeps carry "
            "seals: the chain was tampered with"
        )
    return integrity.verify_chain(key, iterations, baseline_commit=baseline_commit, head=meta.get("chain_head"))


def read_chain(ws: Workspace, iterations: Sequence[Iteration], meta: Mapping[str, Any]) -> integrity.ChainCheck:
    """`chain_of` for a reader (status, projections): the secret is read, never made."""
    try:
        key = integrity.existing_secret(ws.dir)
    except KoptError as e:
        return chain_of(None, iterations, meta, note=f"{e}: no keep can be verified")
    return chain_of(key, iterations, meta, note="" if key else "the run's secret is missing: no keep can be verified")


def check_chain(key: bytes, store: Store) -> integrity.ChainCheck:
    """Raise integrity.Tampered when a kept iteration's seal is wrong or the chain is not
    the one the engine sealed last. A run made before keeps were sealed is sealed as it
    stands, once (meta chain_sealed); one made before the chain had a head gets one."""
    kept = kept_rows(store)
    if not store.get("chain_sealed") and not any(it.record.get("seal") for it in kept):
        reseal(key, store)
        store.set("chain_sealed", True)
        store.event("integrity", "sealed the chain of keeps (a run made by an earlier kopt)", level="warn")
    found = chain(key, store)
    if found.problem:
        raise integrity.Tampered(found.problem)
    if store.get("chain_head") is None:
        kept = kept_rows(store)
        store.set("chain_head", integrity.chain_head(key, kept))
        if kept:
            store.event(
                "integrity", "sealed the head of the chain of keeps (a run made by an earlier kopt)", level="warn"
            )
    return found


def reseal(key: bytes, store: Store) -> None:
    """Seal the chain of keeps as it stands (after a change the engine or the user's CLI
    made), and its head, in one transaction."""
    with store.transaction():
        kept = kept_rows(store)
        want = integrity.reseal_chain(key, kept)
        for it in kept:
            if it.version in want and it.record.get("seal") != want[it.version]:
                it.record["seal"] = want[it.version]
                store.save_iteration(it)
        store.set("chain_head", integrity.chain_head(key, kept))


def check_restart_point(store: Store, version: int) -> None:
    problem = restart_point_problem(store.iteration(version), version)
    if problem:
        raise BadInput(problem)


def restart_from(ws: Workspace, store: Store, version: int, why: str = "") -> list[int]:
    """Mask every later unmasked iteration (the masked partial restart). Counters and
    BEST_COMMIT follow by derivation; the engine re-syncs the worktrees."""
    check_restart_point(store, version)
    key = integrity.read_secret(ws.dir)
    check_chain(key, store)
    later = [it.version for it in store.rows() if it.version > version and not it.masked]
    with store.transaction():
        changed = store.set_masked(later, True)
        reseal(key, store)
    rewrite_memory(ws, store, changed)
    store.event(
        "restart",
        f"restarted from v{version}; masked {', '.join(f'v{v}' for v in changed) or 'nothing'}"
        + (f": {why}" if why else ""),
        version=version,
    )
    return changed


def write_projections(ws: Workspace, store: Store, cfg: Config) -> None:
    """performance.md and README.md, re-rendered from the store."""
    meta = store.meta()
    everything = store.iterations()
    chain = read_chain(ws, everything, meta)  # a forged keep is never shown, nor BEST
    its = records.trusted_rows(everything, chain.trusted)
    meta["best_commit"] = records.best_commit(its) or chain.baseline_commit
    meta["tampered"] = chain.problem
    write_atomic(ws.performance, projections.render_performance(cfg, meta, its, records.counters(its)))
    write_atomic(
        ws.readme,
        projections.render_readme(
            cfg,
            meta,
            config_columns=meta.get("config_columns"),
            classes=meta.get("classes"),
            hardware=meta.get("hardware_md"),
            roofline=meta.get("roofline_md"),
        ),
    )
