"""What the context pack is built from (`PackInputs`, the loop has all of it at proposal
time), what it yields (`Pack`), and the one edge of the pack: `list_sources`, which reads the
worktree for the source list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.records import Iteration

DISPATCH_WORD = re.compile(r"(?i)\bdispatch")


@dataclass(frozen=True)
class SourceFile:
    path: str
    """Relative to the worktree."""
    bytes: int
    lines: int | None = None
    editable: bool = True
    """False: a protected file (the bench, its harness): read it, never change it."""
    role: str = "source"
    """"source", "dispatch" (names dispatch), "params" (the tune params file), "protected"."""


@dataclass(frozen=True)
class PackInputs:
    """Everything the pack is built from; the loop has all of it at proposal time."""

    config: Config
    meta: Mapping[str, Any]
    """The run's meta (store.meta()): tag, classes, config_columns, baseline_commit, ..."""
    iterations: Sequence[Iteration]
    """Every iteration, masked ones included (the pack leaves them out)."""
    iteration: int
    """The version being proposed."""
    repair: int = 0
    failing_rows: Sequence[Mapping[str, Any]] = ()
    """On a repair: {config, cls, reasons} per failing row (the loop's CorrectnessFailure)."""
    hypothesis: str = ""
    """On a repair: the hypothesis being repaired."""
    target_class: str | None = None
    sources: Sequence[SourceFile] = ()
    worktree: Path | None = None
    prompt_json_path: Path | None = None
    plan_path: Path | None = None
    other_lanes: Sequence[str] = ()
    """Hypotheses other lanes are trying right now (empty with one lane)."""
    max_bytes: int | None = None
    """The size budget; default [propose].prompt_max_kib."""


@dataclass(frozen=True)
class Pack:
    markdown: str
    data: dict[str, Any]
    summarised: int = 0
    """History entries summarised to fit the budget."""
    over_budget: bool = False

    @property
    def json(self) -> str:
        return json.dumps(self.data, indent=1, sort_keys=False, default=str) + "\n"


# ---------------------------------------------------------------------------------------
# The edge: source files of the worktree


def list_sources(worktree: Path, cfg: Config, tracked: Sequence[str] | None = None) -> list[SourceFile]:
    """The target's files at the worktree's HEAD: [target].sources (default every tracked
    file), protected ones marked read-only, files that name `dispatch` marked as such.
    Reads the files (sizes, line counts, the word `dispatch`); nothing is written."""
    from kopt_supervisor.engine import gitops

    files = sorted(tracked if tracked is not None else gitops.tree_files(worktree, "HEAD"))
    t = cfg.target
    chosen = gitops.matching(list(files), t.sources) if t.sources else list(files)
    protected = set(gitops.matching(list(files), t.protected)) if t.protected else set()
    params = cfg.propose.tune.params
    out = []
    for rel in sorted(set(chosen) | protected):
        path = worktree / rel
        try:
            size = path.stat().st_size
            data = path.read_bytes()[: 2 * 2**20] if size <= 8 * 2**20 else b""
        except OSError:
            continue
        text = data.decode("utf-8", "replace") if b"\0" not in data[:4096] else ""
        lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0) if text else None
        if rel in protected:
            role, editable = "protected", False
        elif params and rel == params:
            role, editable = "params", True
        elif text and DISPATCH_WORD.search(text):
            role, editable = "dispatch", True
        else:
            role, editable = "source", True
        out.append(SourceFile(rel, size, lines, editable, role))
    return out
