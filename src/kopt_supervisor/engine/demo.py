"""`kopt demo`: a bundled kernel, a fresh git repo, the `tune` proposer, the whole loop.

The kernel (kernels/<name>: a PyTorch baseline, a Triton solution, its bench, contract and
roofline) is copied into `<root>/.repos/<tag>/` from a deliberately naive configuration and
committed; a workspace is created for it and the engine runs it. On a machine with no GPU
the bench runs the Triton kernel through Triton's interpreter on small shapes, and the run
says so plainly: its timings are CPU timings.

The engine never imports the bundled kernels: the caller (the CLI) hands `prepare_demo` the
kernels' names and the function that writes one into a directory (`kernels.catalog`'s
`KERNELS` and `materialize`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Collection
from pathlib import Path
from typing import Protocol

from kopt_supervisor.engine import gitops
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, create_workspace

CPU_NOTICE = (
    "No GPU here: the Triton kernel runs through Triton's interpreter on the CPU "
    "on small shapes. Timings are CPU timings, not GPU performance."
)
DEFAULT_ITERS_GPU = 30
DEFAULT_ITERS_CPU = 6


def has_gpu() -> bool:
    """Whether any GPU backend reads a GPU on this machine."""
    backend = open_backend("auto")
    try:
        return bool(backend.read())
    finally:
        backend.close()


class Materialize(Protocol):
    """Writes bundled kernel `name` as a self-contained repo into `dest` (an existing,
    empty directory), its kopt.toml shaped by the keywords (`kernels.catalog.materialize`)."""

    def __call__(
        self,
        name: str,
        dest: Path,
        naive: bool = True,
        *,
        cpu: bool = False,
        review_timeout_s: float | None = None,
        profile: bool = True,
    ) -> None: ...


HEADLESS_REVIEW_S = 0.0
"""Nobody watches a headless demo: a borderline candidate gets the review policy at once."""
TUI_REVIEW_S = 300.0
"""Under the TUI the engineer has five minutes to accept or reject a borderline candidate."""


def prepare_demo(
    root: Path,
    kernel: str,
    tag: str | None = None,
    *,
    kernels: Collection[str],
    materialize: Materialize,
    headless: bool = False,
    profile: bool = True,
) -> tuple[Workspace, bool]:
    """Materialise `kernel` (one of `kernels`) into a fresh repo and create its workspace;
    returns the workspace and whether a GPU runs it."""
    if kernel not in kernels:
        raise BadInput(f"unknown demo kernel {kernel!r} (bundled: {', '.join(sorted(kernels))})")
    tag = tag or f"demo-{kernel}-{time.strftime('%m%d-%H%M%S')}"
    repo = root / ".repos" / tag
    if repo.exists():
        raise BadInput(f"{repo} exists already; choose another --tag")
    gpu = has_gpu()
    repo.mkdir(parents=True, mode=0o700)
    try:
        materialize(
            kernel,
            repo,
            naive=True,
            cpu=not gpu,
            review_timeout_s=HEADLESS_REVIEW_S if headless else TUI_REVIEW_S,
            profile=profile,
        )
        gitops.init_repo(repo, f"{kernel}: bundled kopt demo kernel, naive configuration")
        text = (repo / "kopt.toml").read_text(encoding="utf-8")
        ws, _, _ = create_workspace(root, tag, repo, text, config_source=str(repo / "kopt.toml"))
    except BaseException:
        shutil.rmtree(repo, ignore_errors=True)
        raise
    with Store(ws.db_path) as store:
        store.set_many(
            {"demo": {"kernel": kernel, "repo": str(repo), "gpu": gpu}, "notice": None if gpu else CPU_NOTICE}
        )
    from kopt_supervisor.engine.loop import write_initial_projections

    write_initial_projections(ws)
    return ws, gpu


def demo_iterations(gpu: bool, max_iters: int | None) -> int:
    """How many candidate iterations the demo runs: `max_iters`, or its default on a GPU or a CPU."""
    return max_iters if max_iters is not None else (DEFAULT_ITERS_GPU if gpu else DEFAULT_ITERS_CPU)


def run_headless(ws: Workspace, iters: int, *, no_sandbox: bool = False) -> int:
    """The demo in this process, its progress logged to stdout; returns the engine's exit
    code when the demo run ends."""
    from kopt_supervisor.engine.daemon import run_engine

    return run_engine(ws, proposer="tune", max_iters=iters, log_to_stdout=True, no_sandbox=no_sandbox, demo=True)
