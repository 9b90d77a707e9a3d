"""Subprocesses in their own process group, with timeouts, output limits and logs: this module
holds what a command leaves behind and its logs; `runner.command` runs commands (`run`,
`Server`) and says what is guaranteed.

What a command leaves behind: its process group (and what it started in sessions of its
own), orphans of a crashed engine found by the run's marker, what an unconfined step leaves
behind found by its step token (`STEP_ENV`) in the environment it was started with, the CPU
time a process tree spent (`cpu_seconds`); and its log files with their output limit: logs
opened fresh (a name left in their folder is removed first, and never followed: a sandboxed
process that can write in a log folder cannot turn kopt's next log into a write through a
link or a block on a FIFO), the kernel's file-size cap, a flooded log cut to the limit, the
tail of a log.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

import psutil

STEP_ENV = "KOPT_STEP"
"""Every command kopt runs carries a token of its own in this variable: what it leaves
behind is found by it when the step ends (unconfined runs; a confined one's PID namespace
dies with it)."""

_LIVE_STEPS: set[str] = set()
"""The tokens of the steps running now in this process (several lanes run steps at once):
a sweep by the run's marker spares the processes of these."""
_LIVE_LOCK = threading.Lock()


def new_step(env: dict[str, str]) -> str:
    """A new step token, put into `env` and registered as live until `forget_step`."""
    token = secrets.token_hex(12)
    env[STEP_ENV] = token
    with _LIVE_LOCK:
        _LIVE_STEPS.add(token)
    return token


def forget_step(token: str) -> None:
    with _LIVE_LOCK:
        _LIVE_STEPS.discard(token)


def group_members(pgid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def process_tree(pgid: int) -> list[psutil.Process]:
    """The group's members and all their descendants: what a sandboxed command started in a
    session of its own (`setsid`) has left the group but not the tree (e.g. the GPU gate's
    own processes, which must never count as foreign). One pass over the process table."""
    return process_trees((pgid,))


def process_trees(pgids: Iterable[int]) -> list[psutil.Process]:
    """`process_tree` of every group in `pgids`, in one pass over the process table (a pass
    reads every process's stat: ~20 us each, hundreds of processes on a busy machine)."""
    groups = set(pgids)
    if not groups:
        return []
    children: dict[int, list[int]] = {}
    todo: list[int] = []
    for pid, ppid, group in _table():
        children.setdefault(ppid, []).append(pid)
        if group in groups:
            todo.append(pid)
    out: dict[int, psutil.Process] = {}
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        try:
            out[pid] = psutil.Process(pid)
        except psutil.Error:
            continue
        todo.extend(children.get(pid, ()))
    return list(out.values())


def _table() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every process, read from /proc/PID/stat (a few
    milliseconds where psutil's iteration takes tens: a served look reads it several times)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2 :].split()
            out.append((int(name), int(fields[1]), int(fields[2])))
        except (OSError, ValueError, IndexError):
            continue
    return out


def cpu_seconds(pgid: int, token: str | None = None) -> float:
    """User + system CPU seconds spent so far by a command's process tree (`process_tree`)
    and, with `token`, by every process carrying that step token (one that left the tree,
    unconfined): each live process's own time plus what it reaped of its children, so a
    child that ended and was waited for still counts. Read from /proc, in clock ticks (10 ms
    on most kernels); a process that ends while it is read counts as nothing more. Never
    raises."""
    total = 0.0
    for p in _with_token(process_tree(pgid), token):
        try:
            t = p.cpu_times()
        except (psutil.Error, OSError):
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _with_token(procs: list[psutil.Process], token: str | None) -> list[psutil.Process]:
    """`procs` and, with `token`, every live process carrying that step token."""
    if token is None:
        return procs
    seen = {p.pid: p for p in procs}
    for p in marked_processes(lambda env: env.get(STEP_ENV) == token, {os.getpid()}):
        seen.setdefault(p.pid, p)
    return list(seen.values())


def signal_tree(pgid: int, sig: int, token: str | None = None) -> None:
    """`sig` to a command's process group, then to every process of its tree (`process_tree`:
    those that left the group in a session of their own) and, with `token`, every process
    carrying that step token. Never raises."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for p in _with_token(process_tree(pgid), token):
        with contextlib.suppress(psutil.Error, OSError):
            p.send_signal(sig)


def wait_stopped(pgid: int, timeout_s: float) -> bool:
    """Wait until every process of the tree is stopped (SIGSTOP is delivered when the process
    is next scheduled: on a loaded machine a busy thread ran on for milliseconds). Whether all
    stopped in time; never raises."""
    deadline = time.monotonic() + timeout_s
    while True:
        # the whole tree read, then only those not stopped yet polled (a read of the process
        # table per millisecond was most of this wait's CPU), then the whole tree again: True
        # only when one whole read finds every process stopped
        pending = [p for p in process_tree(pgid) if not _stopped(p)]
        if not pending:
            return True
        while pending:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
            pending = [p for p in pending if not _stopped(p)]


def _stopped(p: psutil.Process) -> bool:
    """Stopped, or past stopping (a zombie, or gone: a process that ends is no longer running)."""
    try:
        return p.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE)
    except (psutil.Error, OSError):
        return True


def kill_group(pgid: int, grace_s: float = 2.0) -> None:
    """TERM the group, then KILL what is left after `grace_s`. Never raises."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # Zombies of already-exited members still count for killpg(0); look closer.
    return any(_running(p) for p in group_members(pgid))


def _running(p: psutil.Process) -> bool:
    """Alive and not a zombie; False for a process that ends while it is looked at."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_orphans(pgid: int, marker_env: tuple[str, str]) -> int:
    """After a crash: kill the group `pgid` if its processes carry our marker in their
    environment (so a recycled pid is never touched). Returns how many were found."""
    key, value = marker_env
    found = []
    for p in group_members(pgid):
        try:
            if p.environ().get(key) == value:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    if found:
        kill_group(pgid)
    return len(found)


def end_leftovers(token: str | None, marker: tuple[str, str] | None = None, grace_s: float = 0.5) -> int:
    """After an unconfined step: end every process of this user that carries the step's
    token, or (with `marker`, the run's (variable, value)) the run's marker and no token of
    a step still running (token None: only the latter, e.g. when a session starts or ends).
    Returns how many were ended."""

    def left_behind(env: Mapping[str, str]) -> bool:
        if token is not None and env.get(STEP_ENV) == token:
            return True
        if marker is None or env.get(marker[0]) != marker[1]:
            return False
        with _LIVE_LOCK:
            return env.get(STEP_ENV) not in _LIVE_STEPS

    return kill_marked(left_behind, grace_s=grace_s)


def kill_marked(match: Callable[[Mapping[str, str]], bool], *, grace_s: float = 0.5, rounds: int = 20) -> int:
    """End every process of this user whose environment (/proc/PID/environ, as it was
    exec'd: a process's own changes to its argv or os.environ do not hide it) `match`es,
    this process and its ancestors excepted: TERM, up to `grace_s` to exit, then STOP and
    KILL, again until a look finds none (a process forking as it dies is caught by its
    children's environment). Returns how many were ended. Never raises."""
    spare = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        spare |= {p.pid for p in psutil.Process().parents()}
    found = marked_processes(match, spare)
    if not found:
        return 0
    ended = {p.pid for p in found}
    for p in found:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    with contextlib.suppress(psutil.Error):
        psutil.wait_procs(found, timeout=grace_s)
    for _ in range(rounds):
        left = marked_processes(match, spare)
        if not left:
            break
        for p in left:  # stopped first: none of them starts another meanwhile
            with contextlib.suppress(psutil.Error):
                p.suspend()
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        ended |= {p.pid for p in left}
        with contextlib.suppress(psutil.Error):
            psutil.wait_procs(left, timeout=1.0)
    return len(ended)


def marked_processes(match: Callable[[Mapping[str, str]], bool], spare: set[int] | None = None) -> list[psutil.Process]:
    """This user's live processes (zombies aside) whose environment `match`es."""
    uid = os.getuid()
    out = []
    for p in psutil.process_iter(["pid", "uids"]):
        try:
            if p.pid in (spare or ()) or p.info["uids"] is None or p.info["uids"].real != uid:
                continue
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if match(p.environ()):
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


DEFAULT_MAX_OUTPUT_BYTES = 512 * 1024 * 1024


def open_log(path: Path) -> BinaryIO:
    """A new, empty log file at `path`: whatever has that name is removed first (a link is
    removed, never followed), then the file is created exclusively, without following links."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        import shutil

        shutil.rmtree(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    return os.fdopen(fd, "wb")


def limit_file_size(pid: int, max_bytes: int) -> None:
    """A hard cap on any file the command writes (its logs included): past it the kernel
    stops the writer with SIGXFSZ, however fast it writes. Polling backs it up elsewhere."""
    try:
        import resource

        resource.prlimit(pid, resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    except (ImportError, AttributeError, OSError, ValueError):
        pass


def cut_log(path: Path, max_bytes: int) -> None:
    """Keep a flooded log's head within the limit, marked as cut: the kernel's file-size cap
    can come too late (a writer faster than the cap is set, a sandbox that ignores it), and a
    run left overnight must not fill the disk with one bench's output."""
    if file_size(path) <= max_bytes:
        return
    mark = f"\n[kopt: output cut at {max_bytes} bytes ([target].max_output_mib)]\n".encode()
    try:
        with open(path, "r+b") as f:
            f.truncate(max(0, max_bytes - len(mark)))
            f.seek(0, os.SEEK_END)
            f.write(mark)
    except OSError:
        pass


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def tail_file(path: Path, n: int = 20, max_bytes: int = 64 * 1024) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:])
