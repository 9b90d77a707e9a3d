"""Per-test CPU, opt-in: `KOPT_TEST_CPU=/path/to/file.jsonl pytest ...` appends one JSON line
per test (setup, call and teardown together) with

- `wall`: seconds;
- `self`: the worker's own CPU-s (user + sys, `RUSAGE_SELF`);
- `children`: CPU-s of the worker's children reaped meanwhile (`RUSAGE_CHILDREN`: a child
  counts once it is waited for, with every descendant that its own parent chain waited for;
  a process nobody reaps, or one reparented to init, is missing here);
- `cgroup`: where this machine lets the worker make a cpuacct cgroup of its own (cgroup v1,
  root), the CPU-s of everything in it, the worker and every process started under it,
  reaped or not, orphaned or not (a detached engine, a killed sandbox's benches): the figure
  to rank by. Absent where no cgroup could be made.

The worker's cgroup is left, emptied of it, at the session's end. Nothing here changes what a
test does; without the variable the module is never loaded (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


class CpuProbe:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.cgroup: Path | None = None
        self.parent: Path | None = None

    def join_cgroup(self) -> None:
        """The worker (and from now on every process it starts) in a cpuacct cgroup of its own."""
        if not (CPUACCT / "cgroup.procs").exists():
            return
        try:
            self.parent = CPUACCT / "/".join(
                line.split(":", 2)[2].strip("/")
                for line in Path("/proc/self/cgroup").read_text().splitlines()
                if "cpuacct" in line.split(":")[1].split(",")
            )
            group = self.parent / f"kopt-test-cpu-{os.getpid()}"
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
            self.cgroup = group
        except OSError:
            self.cgroup = None

    def leave_cgroup(self) -> None:
        if self.cgroup is None or self.parent is None:
            return
        try:
            (self.parent / "cgroup.procs").write_text(str(os.getpid()))
            self.cgroup.rmdir()  # fails while a leftover process is still in it: left for it
        except OSError:
            pass

    def _usage(self) -> float | None:
        if self.cgroup is None:
            return None
        try:
            return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9
        except OSError:
            return None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        t0, s0, c0, g0 = time.monotonic(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), self._usage()
        yield
        g1 = self._usage()
        row = {
            "test": item.nodeid,
            "worker": self.worker,
            "wall": round(time.monotonic() - t0, 3),
            "self": round(_cpu(resource.RUSAGE_SELF) - s0, 3),
            "children": round(_cpu(resource.RUSAGE_CHILDREN) - c0, 3),
        }
        if g0 is not None and g1 is not None:
            row["cgroup"] = round(g1 - g0, 3)
        with self.out.open("a") as f:
            f.write(json.dumps(row) + "\n")


def register(config: pytest.Config, out: str) -> None:
    probe = CpuProbe(Path(out))
    # workers only (or a run without xdist): the controller runs no test
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        probe.join_cgroup()
        config.add_cleanup(probe.leave_cgroup)
    config.pluginmanager.register(probe, "kopt-cpu-probe")
