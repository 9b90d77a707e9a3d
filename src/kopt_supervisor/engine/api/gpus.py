"""What the GPU gate sees: `kopt gpus` (one gate check, as stable JSON or a table) and
`GpuSampler`, the TUI's own readings judged by the gate's rules with a run's [gpu]
thresholds, without taking a claim."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kopt_supervisor.engine.config import GpuConfig
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.gate import ClaimRegistry, claim_key, enrich
from kopt_supervisor.engine.gpu.state import Backend, GpuState, assess
from kopt_supervisor.engine.workspace import Workspace

BackendFactory = Callable[[str], Backend]
"""Opens a GPU backend for a vendor ("auto", "nvidia", "amd", "none"): `open_backend`, or a
fake one in tests."""


def gpus_report(ws: Workspace | None = None) -> dict[str, Any]:
    """`kopt gpus [--tag TAG]`: one gate check with the run's [gpu] thresholds (the defaults
    without a run); the stable JSON of docs/gpu-gate.md."""
    from kopt_supervisor.engine.gpu.report import gpus_report as check

    if ws is None:
        return check(GpuConfig())
    cfg = ws.load_config()
    report = check(cfg.gpu)
    from kopt_supervisor.engine.api.reading import pending_reviews
    from kopt_supervisor.engine.api.run_summary import lane_states

    with ws.open_store(readonly=True) as store:  # which lane holds which GPU (docs/lanes.md)
        report["lanes"] = lane_states(store.meta(), store.iterations(), cfg.parallel.lanes, pending_reviews(ws))
    return report


def format_gpus_report(report: dict[str, Any]) -> str:
    """`gpus_report`'s result as a table for the terminal."""
    from kopt_supervisor.engine.gpu.report import format_report

    return format_report(report)


def own_pids(meta: Mapping[str, Any]) -> set[int]:
    """A run's engine and its benchmark's process group (from the run's meta): never
    "foreign" on the GPU."""
    pids = {int(p) for p in [(meta.get("heartbeat") or {}).get("pid"), meta.get("engine_pid")] if p}
    pgid = meta.get("child_pgid")
    if pgid:
        from kopt_supervisor.engine.runner import group_members

        pids |= {p.pid for p in group_members(int(pgid))}
    return pids


class GpuSampler:
    """Readings of the GPUs, each judged idle or busy (with the reasons) by the gate's own
    rules and `cfg`'s thresholds. Takes no claim; the watched run's claim is not "another
    run". Use it from one thread."""

    def __init__(self, cfg: GpuConfig, factory: BackendFactory = open_backend) -> None:
        self.cfg = cfg
        self.backend = factory(cfg.vendor)
        self.claims = ClaimRegistry(owner="kopt TUI")
        self.namespace = str(getattr(self.backend, "claim_namespace", ""))

    def read(self, run_meta: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One reading, judged; `run_meta` is the watched run's meta (its engine's pids)."""
        own = own_pids(run_meta)

        def claimed_by(g: GpuState) -> dict[str, Any] | None:
            claim = self.claims.probe(claim_key(self.namespace, g.uuid, g.index))
            return None if claim and claim.get("pid") in own else claim

        sample = self.backend.read()
        return [a.to_dict() for a in assess([sample], self.cfg, own, claimed_by=claimed_by, enrich=enrich)]

    def close(self) -> None:
        self.backend.close()
