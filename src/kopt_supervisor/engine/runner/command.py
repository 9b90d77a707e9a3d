"""A command that ends: `run()` starts it in a session of its own (so its whole process tree
shares one group), streams stdout and stderr to log files, calls `poll()` every few tenths
of a second while it waits, and kills the group on timeout, on an exception from `poll()`,
on runaway output and after the command's own exit. `RunResult` says how it ended.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine import sandbox
from kopt_supervisor.engine.runner import logs
from kopt_supervisor.engine.runner.logs import DEFAULT_MAX_OUTPUT_BYTES, tail_file
from kopt_supervisor.engine.runner.processes import end_leftovers, forget_step, kill_group, new_step
from kopt_supervisor.engine.sandbox import Confinement


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
    confined: Confinement | None = None
    """The sandbox it ran in (None: unconfined)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def why(self) -> str:
        """One line: how it ended, and for a confined run that failed, what the sandbox
        refused (bwrap's own error, or the path it keeps read-only and the key that allows it)."""
        if self.ok:
            return self._how()
        return self._how() + sandbox_note(self.confined, tail_file(self.stderr_path, 40))

    def _how(self) -> str:
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


def sandbox_note(confined: Confinement | None, stderr_tail: str) -> str:
    """For a confined command that failed: what the sandbox refused, as a parenthesis to
    append to the one-line reason (bwrap's own error, or the path it keeps read-only and
    the config key that allows it); "" when unconfined or nothing of the kind shows."""
    if confined is None:
        return ""
    setup = sandbox.bwrap_error(stderr_tail)
    if setup:
        return f" (the sandbox: {setup})"
    path = sandbox.denied_write(stderr_tail)
    if path:
        return (
            f" (it tried to write {path}, which the sandbox keeps read-only; "
            f'allow it with {confined.writable_key} = ["{path}"])'
        )
    return ""


def as_argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    return list(command)


def all_at_once(commands: Sequence[Sequence[str]]) -> list[str]:
    """One argv that runs `commands` (argvs, never shell text) at the same time and fails when
    any of them does, naming it on stderr; one command is returned as it is."""
    if len(commands) == 1:
        return list(commands[0])
    lines = [f"{shlex.join(c)} & p{i}=$!" for i, c in enumerate(commands)]
    waits = [
        f'wait "$p{i}" || {{ echo "command {i + 1} of {len(commands)} failed: exit $?" >&2; rc=1; }}'
        for i in range(len(commands))
    ]
    return ["/bin/sh", "-c", "\n".join([*lines, "rc=0", *waits, 'exit "$rc"'])]


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
    confine: Confinement | None = None,
    marker: tuple[str, str] | None = None,
) -> RunResult:
    """Run to completion, timeout or interruption. `poll` may raise to interrupt; the
    process group is then killed and the exception propagates. With `confine`, it runs
    under bubblewrap (`engine.sandbox`). Unconfined, what the step leaves running is ended
    when it ends (`end_leftovers`: its token, and `marker`, the run's (variable, value))."""
    argv = as_argv(command)
    if confine is None:
        return _run(
            argv,
            argv,
            cwd=cwd,
            log_dir=log_dir,
            name=name,
            timeout_s=timeout_s,
            env=env,
            poll=poll,
            poll_interval_s=poll_interval_s,
            on_start=on_start,
            on_end=on_end,
            max_output_bytes=max_output_bytes,
            confined=None,
            marker=marker,
        )
    with sandbox.prepare(confine) as ready:
        return _run(
            argv,
            sandbox.wrap(argv, ready, cwd=cwd),
            cwd=cwd,
            log_dir=log_dir,
            name=name,
            timeout_s=timeout_s,
            env=env,
            poll=poll,
            poll_interval_s=poll_interval_s,
            on_start=on_start,
            on_end=on_end,
            max_output_bytes=max_output_bytes,
            confined=ready,
            marker=marker,
        )


def _run(
    argv: list[str],
    launch: list[str],
    *,
    cwd: str | Path,
    log_dir: str | Path,
    name: str,
    timeout_s: float,
    env: Mapping[str, str] | None,
    poll: Callable[[], None] | None,
    poll_interval_s: float,
    on_start: Callable[[int], None] | None,
    on_end: Callable[[int], None] | None,
    max_output_bytes: int,
    confined: Confinement | None,
    marker: tuple[str, str] | None = None,
) -> RunResult:
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    token = new_step(full_env)
    try:
        return _run_step(
            argv,
            launch,
            cwd=cwd,
            out_path=out_path,
            err_path=err_path,
            timeout_s=timeout_s,
            env=full_env,
            poll=poll,
            poll_interval_s=poll_interval_s,
            on_start=on_start,
            on_end=on_end,
            max_output_bytes=max_output_bytes,
            confined=confined,
        )
    finally:
        forget_step(token)
        if confined is None:
            end_leftovers(token, marker)


def _run_step(
    argv: list[str],
    launch: list[str],
    *,
    cwd: str | Path,
    out_path: Path,
    err_path: Path,
    timeout_s: float,
    env: dict[str, str],
    poll: Callable[[], None] | None,
    poll_interval_s: float,
    on_start: Callable[[int], None] | None,
    on_end: Callable[[int], None] | None,
    max_output_bytes: int,
    confined: Confinement | None,
) -> RunResult:
    start = time.monotonic()
    with logs.open_log(out_path) as out, logs.open_log(err_path) as err:
        try:
            proc = subprocess.Popen(
                launch,
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                pass_fds=() if confined is None else (sandbox.read_end(),),
            )
        except OSError as exc:
            return RunResult(
                argv,
                str(cwd),
                None,
                time.monotonic() - start,
                out_path,
                err_path,
                start_error=f"{exc.strerror or exc}: {exc.filename or launch[0]}",
                confined=confined,
            )
    pgid = proc.pid
    logs.limit_file_size(proc.pid, max_output_bytes)
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
            if logs.file_size(out_path) + logs.file_size(err_path) > max_output_bytes:
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
    if (
        proc.returncode == -signal.SIGXFSZ
        or max(logs.file_size(out_path), logs.file_size(err_path)) >= max_output_bytes
    ):
        overflow = True  # Python ignores SIGXFSZ: its writes fail with EFBIG instead
    if overflow:
        for path in (out_path, err_path):
            logs.cut_log(path, max_output_bytes)
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
        confined=confined,
    )
