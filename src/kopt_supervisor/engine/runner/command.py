"""The commands kopt runs: each in its own process group, with a timeout, logs to files,
interruptible.

`run()` starts a command that ends in a new session (so its whole process tree shares one
group), streams stdout and stderr to files, and while it waits calls `poll()` every few tenths
of a second: the engine's way to act on a stop or pause within a second, even during a long
benchmark. On timeout, on an exception from `poll()`, on runaway output, and after the
command's own exit, the whole group is killed (TERM, then KILL), so nothing is left behind.
`RunResult` says how it ended.

`Server` (server.py) is the same for a command that stays up and answers requests line by
line.

Commands are argv lists or shell strings. Shell strings come only from the user's own
kopt.toml (the bench, the proposer, the format command); nothing from a plan, a hypothesis
or a CSV value is ever put into one.

With `confine=` (an `engine.sandbox.Confinement`) the command runs under bubblewrap: the
argv is wrapped, and everything above still holds. The process kopt starts is bwrap, the
leader of the group; the command and what it starts live in a PID namespace whose init is
kopt's (the lifeline of `sandbox.confinement`: it leaves when the command ends or kopt's lifeline pipe closes),
so killing the group (or kopt's own death) ends every process inside, a `setsid` one
included. They stay visible from outside (`runner.process_tree`), with their environment
(the KOPT_WORKSPACE marker) readable for `runner.kill_orphans`.

Unconfined (no `confine=`), nothing holds a `setsid` process to its step: every step is
given a token of its own in its environment (`runner.STEP_ENV`), and after the step,
besides its group, every process of this user that carries the token is ended
(`runner.kill_marked`: TERM, a short grace, then STOP and KILL until none is left); with
`marker=` (the run's KOPT_WORKSPACE), so is every process carrying the run's marker whose
token is not that of a step still running (another lane's). The limit: a process that
re-executes itself with an environment of its own (neither token nor marker) is not
recognised; that is what running without the sandbox gives up.

Log files are opened fresh (`runner.open_log`: a name left in their folder is removed
first, and never followed): a sandboxed process that can write in a log folder cannot turn
kopt's next log into a write through a link or a block on a FIFO. The log helpers are read
through the `runner` module (`runner.limit_file_size`, ...), so a test that replaces
one patches it there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import runner, sandbox
from kopt_supervisor.engine.runner import (
    DEFAULT_MAX_OUTPUT_BYTES,
    end_leftovers,
    forget_step,
    kill_group,
    new_step,
    tail_file,
)
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
        if self.returncode > 128 and (self.argv[:2] == ["/bin/sh", "-c"] or self.confined is not None):
            try:  # a shell, and bubblewrap, report their child's death by signal N as 128 + N
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


PLAIN_WORD = r"[A-Za-z0-9_\-./:,+@%=]+"
"""A word the shell would pass on unchanged: no quote, expansion, glob, redirection or operator."""
PLAIN_COMMAND = re.compile(rf"[ \t]*{PLAIN_WORD}(?:[ \t]+{PLAIN_WORD})*[ \t]*")
"""PLAIN_WORDs on one line, separated as the shell separates them (spaces and tabs: a newline
ends a command, and a character Python's str.split takes for a space, a no-break space or a
carriage return, is part of a word to the shell)."""
SHELL_WORDS = frozenset(
    "! { } [[ ]] case do done elif else esac fi for function if in select then time until while "
    ". : alias bg break cd command continue eval exec exit export fc fg getopts hash jobs local "
    "read readonly return set shift source times trap type ulimit umask unalias unset wait".split()
)
"""A first word the shell itself gives a meaning (its keywords and builtins no program on PATH
stands in for, `exec` first of them): such a command keeps its shell."""


def as_argv(command: str | Sequence[str]) -> list[str]:
    """The argv a command runs as. A string is shell text for `/bin/sh -c`, unless it is one
    plain command (one line of PLAIN_WORDs separated by spaces or tabs, the first no assignment
    and none of SHELL_WORDS): then its words are the argv, and no shell stays between kopt and
    the program. Under ncu (which follows every
    process of the run) a shell left as the bench's parent cost ~80 ms of every profiled
    kernel: a keep's profile phase 10.3 s against 6.3-6.5 s run directly or through `exec`
    (H200, 2026-12-01, docs/h100-wave3/part19-the-shell-under-ncu-h200.md)."""
    if isinstance(command, str):
        line = command.strip("\n")
        words = line.split()
        if PLAIN_COMMAND.fullmatch(line) and "=" not in words[0] and words[0] not in SHELL_WORDS:
            return words
        return ["/bin/sh", "-c", command]
    return list(command)


def popen(launch: list[str], **kw: Any) -> subprocess.Popen[bytes]:
    """subprocess.Popen, and where the program is a script with no `#!` line (ENOEXEC) the
    shell running it, as execvp and a shell do: a plain command runs with no shell (as_argv),
    and a shebang-less script kopt ran through `/bin/sh -c` before keeps running."""
    try:
        return subprocess.Popen(launch, **kw)
    except OSError as exc:
        if exc.errno != errno.ENOEXEC:
            raise
        return subprocess.Popen(["/bin/sh", *launch], **kw)


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
    with sandbox.prepare(confine) if confine is not None else contextlib.nullcontext() as ready:
        return _run(
            argv,
            argv if ready is None else sandbox.wrap(argv, ready, cwd=cwd),
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
    with runner.open_log(out_path) as out, runner.open_log(err_path) as err:
        try:
            proc = popen(
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
    runner.limit_file_size(proc.pid, max_output_bytes)
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
            if runner.file_size(out_path) + runner.file_size(err_path) > max_output_bytes:
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
        or max(runner.file_size(out_path), runner.file_size(err_path)) >= max_output_bytes
    ):
        overflow = True  # Python ignores SIGXFSZ: its writes fail with EFBIG instead
    if overflow:
        for path in (out_path, err_path):
            runner.cut_log(path, max_output_bytes)
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
