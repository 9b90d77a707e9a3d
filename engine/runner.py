"""Subprocesses: each in its own process group, with a timeout, logs to files, interruptible.

`run()` starts a command in a new session (so its whole process tree shares one group),
streams stdout and stderr to files, and while it waits calls `poll()` every few tenths of a
second: the engine's way to act on a stop or pause within a second, even during a long
benchmark. On timeout, on an exception from `poll()`, on runaway output, and after the
command's own exit, the whole group is killed (TERM, then KILL), so nothing is left behind.

Commands are argv lists or shell strings. Shell strings come only from the user's own
kopt.toml (the bench, the proposer, the format command); nothing from a plan, a hypothesis
or a CSV value is ever put into one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

DEFAULT_MAX_OUTPUT_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class RunResult:
    argv: list[str]
    cwd: str
    returncode: int | None
    """None when the command was killed by kopt (timeout, output limit, interruption)."""
    duration_s: float
    stdout_path: Path
    stderr_path: Path
    timed_out: bool = False
    output_overflow: bool = False
    start_error: str = ""
    """Why the command could not start (its folder vanished, no such program)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def why(self) -> str:
        if self.start_error:
            return f"could not start: {self.start_error}"
        if self.timed_out:
            return f"timed out after {self.duration_s:.0f} s"
        if self.output_overflow:
            return "wrote more output than the limit ([target].max_output_mib); killed"
        if self.returncode is None:
            return "killed"
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = str(-self.returncode)
            return f"killed by {name}"
        if self.returncode > 128 and self.argv[:2] == ["/bin/sh", "-c"]:
            try:  # a shell reports its child's death by signal N as 128 + N
                return f"exit code {self.returncode} ({signal.Signals(self.returncode - 128).name})"
            except ValueError:
                pass
        return f"exit code {self.returncode}"

    def tail(self, n: int = 20, stream: str = "stderr") -> str:
        path = self.stderr_path if stream == "stderr" else self.stdout_path
        return tail_file(path, n)


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


def as_argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    return list(command)


def run(
    command: str | Sequence[str],
    *,
    cwd: str | Path,
    log_dir: str | Path,
    name: str,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    poll: Callable[[], None] | None = None,
    poll_interval_s: float = 0.2,
    on_start: Callable[[int], None] | None = None,
    on_end: Callable[[int], None] | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> RunResult:
    """Run to completion, timeout or interruption. `poll` may raise to interrupt; the
    process group is then killed and the exception propagates."""
    argv = as_argv(command)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=str(cwd),
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            return RunResult(argv, str(cwd), None, time.monotonic() - start, out_path, err_path,
                             start_error=f"{exc.strerror or exc}: {exc.filename or argv[0]}")
    pgid = proc.pid
    _limit_file_size(proc.pid, max_output_bytes)
    if on_start:
        on_start(pgid)
    timed_out = overflow = False
    try:
        while True:
            try:
                proc.wait(timeout=poll_interval_s)
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() - start > timeout_s:
                timed_out = True
                break
            if _size(out_path) + _size(err_path) > max_output_bytes:
                overflow = True
                break
            if poll:
                poll()
    finally:
        kill_group(pgid)
        if proc.poll() is None:
            proc.wait()
        if on_end:
            on_end(pgid)
    if proc.returncode == -signal.SIGXFSZ or max(_size(out_path), _size(err_path)) >= max_output_bytes:
        overflow = True  # Python ignores SIGXFSZ: its writes fail with EFBIG instead
    if overflow:
        for path in (out_path, err_path):
            _cut_log(path, max_output_bytes)
    killed = timed_out or overflow
    return RunResult(
        argv=argv,
        cwd=str(cwd),
        returncode=None if killed else proc.returncode,
        duration_s=time.monotonic() - start,
        stdout_path=out_path,
        stderr_path=err_path,
        timed_out=timed_out,
        output_overflow=overflow,
    )


def _limit_file_size(pid: int, max_bytes: int) -> None:
    """A hard cap on any file the command writes (its logs included): past it the kernel
    stops the writer with SIGXFSZ, however fast it writes. Polling backs it up elsewhere."""
    try:
        import resource

        resource.prlimit(pid, resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    except (ImportError, AttributeError, OSError, ValueError):
        pass


def _cut_log(path: Path, max_bytes: int) -> None:
    """Keep a flooded log's head within the limit, marked as cut: the kernel's file-size cap
    can come too late (a writer faster than the cap is set, a sandbox that ignores it), and a
    run left overnight must not fill the disk with one bench's output."""
    if _size(path) <= max_bytes:
        return
    mark = f"\n[kopt: output cut at {max_bytes} bytes ([target].max_output_mib)]\n".encode()
    try:
        with open(path, "r+b") as f:
            f.truncate(max(0, max_bytes - len(mark)))
            f.seek(0, os.SEEK_END)
            f.write(mark)
    except OSError:
        pass


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def group_members(pgid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


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
    return any(p.status() != psutil.STATUS_ZOMBIE for p in group_members(pgid) if _safe_alive(p))


def _safe_alive(p: psutil.Process) -> bool:
    try:
        return p.is_running()
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
