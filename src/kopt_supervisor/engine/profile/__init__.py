"""Profilers: ncu (NVIDIA) and rocprofv3 (AMD) adapters -> per-kernel GPU time, attributed to
configs through NVTX/roctx ranges, compared per class (docs/design.md §5.5, §12 layer 3).

The loop calls:

    profiler = choose_profiler(cfg.profile.kind, vendor, outside_ranges=cfg.profile.outside_ranges)
    done = []
    while (p := profiler.next_pass(bench_argv, out_dir, cfg.profile.kernel, done)) is not None:
        ... run p.argv (cwd = worktree, env + PROFILE_ENV), then each profiler.after_commands(p.out_dir) ...
        done.append(p)
    summary = profiler.parse_passes(done, cfg.profile.kernel)   # KoptFailure on bad output
    cmp = compare_per_class(best_summary, cand_summary, config_refs(record["configs"]),
                            confidence=policy.confidence, run_noise_pct=cfg.profile.run_noise_pct)
    agreement = agrees(verdict.classes, cmp, min_effect_pct=policy.min_effect_pct)
    # agreement.disagrees -> review with agreement.reason()

See engine/profile/classes.py for what is compared and how the noise is measured, and
engine/profile/ranges.py for the range names.
"""

from kopt_supervisor.engine.profile.base import PROFILE_ENV, Profiler, choose_profiler
from kopt_supervisor.engine.profile.classes import (
    ALL_CLASSES,
    NO_RANGES_NOTE,
    Agreement,
    ClassAgreement,
    ClassChange,
    ClassComparison,
    ClassKernel,
    ConfigChange,
    Unattributed,
    UnattributedGroup,
    agrees,
    compare_per_class,
)
from kopt_supervisor.engine.profile.model import (
    KOPT_PREFIX,
    KernelChange,
    KernelStat,
    Launch,
    ProfileComparison,
    ProfileSummary,
    RangeKernelStat,
    compare,
    summarize,
    summary_from_stats,
)
from kopt_supervisor.engine.profile.ncu import NcuProfiler, parse_ncu_csv
from kopt_supervisor.engine.profile.ranges import ConfigRef, RangeMatcher, config_refs, range_name
from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler

__all__ = [
    "ALL_CLASSES",
    "KOPT_PREFIX",
    "NO_RANGES_NOTE",
    "PROFILE_ENV",
    "Agreement",
    "ClassAgreement",
    "ClassChange",
    "ClassComparison",
    "ClassKernel",
    "ConfigChange",
    "ConfigRef",
    "KernelChange",
    "KernelStat",
    "Launch",
    "NcuProfiler",
    "ProfileComparison",
    "ProfileSummary",
    "Profiler",
    "RangeKernelStat",
    "RangeMatcher",
    "Rocprofv3Profiler",
    "Unattributed",
    "UnattributedGroup",
    "agrees",
    "choose_profiler",
    "compare",
    "compare_per_class",
    "config_refs",
    "parse_ncu_csv",
    "range_name",
    "summarize",
    "summary_from_stats",
]
