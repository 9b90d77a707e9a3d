"""Reports and provenance: `kopt report` (results.md) and `kopt export` (a reviewable branch).

    write_report(ws) -> Path               results.md + results_latency.{txt,png} in the workspace
    export_branch(ws, branch) -> str       a new branch in the target repo: the kept source
                                           changes, one commit per keep, then results.md
    capture_environment(cfg, worktree)     the environment record (the loop stores it as meta
                                           `environment` after the baseline)

See docs/reports.md for what results.md holds, where each number comes from, and the
export's rules on what is source.
"""

from kopt_supervisor.engine.environment import capture_environment
from kopt_supervisor.engine.report.export import export_branch
from kopt_supervisor.engine.report.writer import write_report

__all__ = ["capture_environment", "export_branch", "write_report"]
