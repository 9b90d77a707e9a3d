"""The profiler interface the loop calls, and the choice of profiler for a vendor.

The loop asks `choose_profiler(cfg.profile.kind, vendor)` for a `Profiler`, builds the
wrapped command with `command(bench_argv, out_dir, kernel_regex)`, runs it with its own
runner (cwd = the worktree, env with KOPT_PROFILE=1), then runs each of
`after_commands(out_dir)` (post-processing of the tool's own output, no GPU needed), then
calls `parse(out_dir, kernel_regex)` for a `ProfileSummary`. Nothing here runs a subprocess.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kopt_supervisor.engine.errors import BadInput, KoptFailure
from kopt_supervisor.engine.profile.model import ProfileSummary

PROFILE_ENV = {"KOPT_PROFILE": "1"}
"""Set by the loop for profiled runs; a bench may run fewer repetitions, but must run the
same number of calls for best and candidate (see docs/profiling.md)."""


class Profiler:
    """Base of the adapters: `name`, the executable it needs, and the three calls."""

    name = ""
    executable = ""

    def available(self) -> bool:
        """True when the tool is on PATH."""
        return shutil.which(self.executable) is not None

    def command(self, inner_argv: list[str], out_dir: Path, kernel_regex: str) -> list[str]:
        raise NotImplementedError

    def after_commands(self, out_dir: Path) -> list[list[str]]:
        """Commands to run, in order, after `command` succeeded and before `parse` (none by
        default). A failing one is a failed profile."""
        return []

    def parse(self, out_dir: Path, kernel_regex: str) -> ProfileSummary:
        raise NotImplementedError


def choose_profiler(kind: str, vendor: str) -> Profiler | None:
    """The profiler for [profile].kind on a GPU of `vendor` ("nvidia", "amd", other).

    "none" -> None. "auto" -> ncu on NVIDIA, rocprofv3 on AMD, None for other vendors or
    when the tool is not on PATH. "ncu"/"rocprofv3" named explicitly must be on PATH:
    a missing tool is a KoptFailure rather than a silently unprofiled run.
    """
    from kopt_supervisor.engine.profile.ncu import NcuProfiler
    from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler

    if kind == "none":
        return None
    if kind == "auto":
        auto = {"nvidia": NcuProfiler, "amd": Rocprofv3Profiler}.get(vendor.lower())
        if auto is None:
            return None
        candidate = auto()
        return candidate if candidate.available() else None
    explicit = {"ncu": NcuProfiler, "rocprofv3": Rocprofv3Profiler}.get(kind)
    if explicit is None:
        raise BadInput(f'[profile].kind must be "auto", "ncu", "rocprofv3" or "none", not {kind!r}')
    profiler = explicit()
    if not profiler.available():
        raise KoptFailure(f'[profile].kind = "{kind}" but `{profiler.executable}` is not on PATH')
    return profiler
