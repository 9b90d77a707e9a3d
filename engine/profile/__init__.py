"""Profilers: ncu (NVIDIA) and rocprofv3 (AMD) adapters -> per-kernel GPU time (DESIGN.md §5.5).

The loop calls:

    profiler = choose_profiler(cfg.profile.kind, vendor)        # None: no profiling
    argv = profiler.command(bench_argv, out_dir, cfg.profile.kernel)
    ... run argv (cwd = worktree, env + PROFILE_ENV) ...
    summary = profiler.parse(out_dir, cfg.profile.kernel)       # KoptFailure on bad output
    comparison = compare(best_summary, cand_summary)
    decide.reconcile_profiler(verdict, comparison.ratio, agree_margin_pct=cfg.profile.agree_margin_pct)

See engine/profile/model.py for the definition of the target kernels' time per call.
"""

from kopt_supervisor.engine.profile.base import PROFILE_ENV, Profiler, choose_profiler
from kopt_supervisor.engine.profile.model import (
    KernelChange,
    KernelStat,
    Launch,
    ProfileComparison,
    ProfileSummary,
    compare,
    summarize,
    summary_from_stats,
)
from kopt_supervisor.engine.profile.ncu import NcuProfiler, parse_ncu_csv
from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler

__all__ = [
    "PROFILE_ENV",
    "KernelChange",
    "KernelStat",
    "Launch",
    "NcuProfiler",
    "ProfileComparison",
    "ProfileSummary",
    "Profiler",
    "Rocprofv3Profiler",
    "choose_profiler",
    "compare",
    "parse_ncu_csv",
    "summarize",
    "summary_from_stats",
]
