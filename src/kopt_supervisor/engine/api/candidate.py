"""What a candidate worktree holds now, for a client that submits it (`kopt mcp`): the files
it changes against a commit, read by git on a scratch index (the worktree's own index is
untouched), as the police reads them after a proposal."""

from __future__ import annotations

from kopt_supervisor.engine import gitops
from kopt_supervisor.engine.workspace import Workspace


def candidate_changes(ws: Workspace, base: str) -> list[str]:
    """The files cand/ changes against `base` (tracked diffs and new untracked files, not
    ignored ones), sorted; [] when it holds no change."""
    return gitops.changed_files(ws.cand, base)
