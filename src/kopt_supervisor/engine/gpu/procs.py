"""Who a GPU process is, through psutil: its name and owner, and this run's own processes.

Backends report PIDs (and sometimes names). The gate needs names and owners to explain a
busy GPU, and the set of this run's own processes (the engine and the benchmark children
with all their descendants) so that they never count as foreign. A PID that psutil cannot
see (it ended, or it lives in another PID namespace, as in a container) keeps NA fields.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

import psutil

from kopt_supervisor.engine.gpu.base import NA, GpuProcess, is_na


def enrich(p: GpuProcess) -> GpuProcess:
    """The process with its name and user filled in from psutil where the backend had none."""
    if not is_na(p.name) and not is_na(p.user):
        return p
    try:
        proc = psutil.Process(p.pid)
        name = p.name if not is_na(p.name) else _safe(proc.name)
        user = p.user if not is_na(p.user) else _safe(proc.username)
    except (psutil.Error, OSError):
        return p
    return dataclasses.replace(p, name=name, user=user)


def _safe(getter) -> object:  # type: ignore[no-untyped-def]
    try:
        return getter() or NA
    except (psutil.Error, OSError):
        return NA


def family(pids: Iterable[int]) -> set[int]:
    """The given PIDs, this process, and all their live descendants."""
    out = {os.getpid()}
    for pid in set(pids) | {os.getpid()}:
        out.add(pid)
        try:
            out.update(c.pid for c in psutil.Process(pid).children(recursive=True))
        except (psutil.Error, OSError):
            continue
    return out


def alive(pid: int) -> bool:
    try:
        return psutil.pid_exists(pid)
    except OSError:
        return False
