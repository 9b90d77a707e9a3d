"""The profiler interface the loop calls, and the choice of profiler for a vendor.

The loop asks `choose_profiler(cfg.profile.kind, vendor, outside_ranges=...)` for a
`Profiler`, then runs its passes, one run of the bench under the tool each:

    done = []
    while (p := profiler.next_pass(bench_argv, out_dir, kernel_regex, done)) is not None:
        ... run p.argv (cwd = the worktree, env with KOPT_PROFILE=1; p.out_dir lies in out_dir)
        ... then each of profiler.after_commands(p.out_dir) (reading the tool's output, no GPU)
        done.append(p)
    summary = profiler.parse_passes(done, kernel_regex)  # all the passes' launches, merged

`parse(out_dir, kernel_regex)` reads one pass's folder (what `command` wrote).

A profiler of one pass (rocprofv3, ncu with outside_ranges = "full") has `next_pass` return
`command(...)` once. ncu by default takes two (engine/profile/ncu.py): the full metrics
inside the `kopt:` ranges, GPU time alone outside them. The next pass may depend on what the
passes before it found (their folders are read), so the list is asked for one at a time.
Nothing here runs a subprocess.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.profile.model import ProfileSummary

PROFILE_ENV = {"KOPT_PROFILE": "1"}
"""Set by the loop for profiled runs; a bench may run fewer repetitions, but must run the
same number of calls for best and candidate (see docs/profiling.md)."""


OUTSIDE_RANGES = ("time", "full")
"""[profile].outside_ranges: what ncu records of the kernels launched outside the kopt ranges."""
KEEP_MODES = ("time", "full")
"""[profile].keep: what a keep's two trees are profiled for. "time": GPU time alone, in one
pass over the whole run (all the keep's check reads); "full": the baseline's passes."""


@dataclass(frozen=True)
class ProfilePass:
    """One run of the bench under the profiler: what it is for, its argv (the bench's argv at
    the end) and the folder it writes (created; `after_commands(out_dir)` reads it back)."""

    role: str
    """What the profiler parses it as: "single" (the one pass of `command`), or ncu's
    "ranges", "outside", "whole" (engine/profile/ncu.py)."""
    label: str
    argv: tuple[str, ...]
    out_dir: Path


class Profiler:
    """Base of the adapters: `name`, the executable it needs, and the calls above."""

    name = ""
    executable = ""

    def available(self) -> bool:
        """True when the tool is on PATH."""
        return shutil.which(self.executable) is not None

    def command(self, inner_argv: list[str], out_dir: Path, kernel_regex: str) -> list[str]:
        raise NotImplementedError

    def next_pass(
        self, inner_argv: list[str], out_dir: Path, kernel_regex: str, done: Sequence[ProfilePass]
    ) -> ProfilePass | None:
        """The next pass given those `done` (their outputs on disk), None when the profile is
        complete. By default one pass: `command` into `out_dir`."""
        if done:
            return None
        argv = self.command(inner_argv, out_dir, kernel_regex)
        return ProfilePass("single", "the whole run", tuple(argv), Path(out_dir).resolve())

    def for_keep(self, keep: str) -> Profiler:
        """The profiler a keep's two trees run under ([profile].keep, KEEP_MODES): by default
        this one (a tool of one cheap pass has nothing to leave out)."""
        return self

    def after_commands(self, out_dir: Path) -> list[list[str]]:
        """Commands to run after `command` succeeded and before `parse` (none by default);
        they read the pass's output and not each other's, so the loop may run them at once.
        A failing one is a failed profile."""
        return []

    def parse(self, out_dir: Path, kernel_regex: str) -> ProfileSummary:
        """The summary of one pass's folder (the output of `command`)."""
        raise NotImplementedError

    def parse_passes(self, done: Sequence[ProfilePass], kernel_regex: str) -> ProfileSummary:
        """The summary of the passes `next_pass` gave and the loop ran (the roles come from
        this list, never from what lies on disk). By default: the one pass, `parse`."""
        if len(done) != 1 or done[0].role != "single":
            raise KoptFailure(f"{self.name}: expected its one pass, got {[p.role for p in done]}")
        return self.parse(done[0].out_dir, kernel_regex)
