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

`choose_profiler` (here: the package picks among its adapters) gives the loop its profiler.
The rooms: profiler.py (the interface, units; the outputs under the profiler checked),
roofline.py (hardware specs and a tree's roofline), ncu.py and rocprof.py (the adapters),
summary.py (a profile, the whole-run comparison), classes.py (range names, attribution, the
per-class comparison), class_records.py (what that comparison holds, the agreement).
"""

from kopt_supervisor.engine.errors import BadInput, KoptFailure
from kopt_supervisor.engine.profile.ncu import NcuProfiler
from kopt_supervisor.engine.profile.profiler import Profiler
from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler


def choose_profiler(kind: str, vendor: str, *, outside_ranges: str = "time") -> Profiler | None:
    """The profiler for [profile].kind on a GPU of `vendor` ("nvidia", "amd", other).
    `outside_ranges` ([profile].outside_ranges) goes to ncu; rocprofv3 takes one pass.

    "none" -> None. "auto" -> ncu on NVIDIA, rocprofv3 on AMD, None for other vendors or
    when the tool is not on PATH. "ncu"/"rocprofv3" named explicitly must be on PATH:
    a missing tool is a KoptFailure rather than a silently unprofiled run.
    """
    if kind == "none":
        return None
    if kind == "auto":
        auto = {"nvidia": "ncu", "amd": "rocprofv3"}.get(vendor.lower())
        if auto is None:
            return None
        candidate = NcuProfiler(outside_ranges=outside_ranges) if auto == "ncu" else Rocprofv3Profiler()
        return candidate if candidate.available() else None
    if kind not in ("ncu", "rocprofv3"):
        raise BadInput(f'[profile].kind must be "auto", "ncu", "rocprofv3" or "none", not {kind!r}')
    profiler: Profiler = NcuProfiler(outside_ranges=outside_ranges) if kind == "ncu" else Rocprofv3Profiler()
    if not profiler.available():
        raise KoptFailure(f'[profile].kind = "{kind}" but `{profiler.executable}` is not on PATH')
    return profiler
