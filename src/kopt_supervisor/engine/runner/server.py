"""A command kept up and talked to line by line: `Server`, as command.py's `run()` is for one
that ends.

For the serve protocols of docs/files.md: `ask()` writes a request to its stdin and waits,
with `run()`'s timeout, polling and output limit, for the reply line on its stdout; `pause()`
and `resume()` stop and continue its whole process tree; `close()` ends it and kills its group.
Confinement, process groups and the leftovers of a step are as command.py's docstring says."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kopt_supervisor.engine import runner, sandbox
from kopt_supervisor.engine.runner import (
    DEFAULT_MAX_OUTPUT_BYTES,
    cpu_seconds,
    end_leftovers,
    forget_step,
    kill_group,
    new_step,
    signal_tree,
    tail_file,
    wait_stopped,
)
from kopt_supervisor.engine.runner.command import as_argv, popen, sandbox_note
from kopt_supervisor.engine.sandbox import Confinement


class ServerError(Exception):
    """A served command failed a request: it timed out, died, or flooded its output. The
    message says which (one line, with the last line of its stderr where there is one)."""


class ServerEnded(ServerError):
    """The served command's process ended before it answered (it exited or was killed)."""


class Server:
    """A command kept running in its own process group and talked to line by line.

    Requests go to its stdin; replies come on its stdout, one per line, and every line it
    writes there is logged to `<name>.out` (its stderr goes to `<name>.err`). A reply is the
    first line `is_reply` accepts; other lines are only logged.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | Path,
        log_dir: str | Path,
        name: str,
        env: Mapping[str, str] | None = None,
        on_start: Callable[[int], None] | None = None,
        on_end: Callable[[int], None] | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        confine: Confinement | None = None,
        marker: tuple[str, str] | None = None,
    ) -> None:
        self.argv = as_argv(command)
        self.marker = marker
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.out_path, self.err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
        self.max_output_bytes = max_output_bytes
        self.on_end = on_end
        self.env = dict(env or {})
        self.confined = confine
        self._buffer = b""
        self._eof = False
        self._sandbox = contextlib.ExitStack()
        launch = self.argv
        if confine is not None:  # the sandbox's scratch lives until close()
            self.confined = self._sandbox.enter_context(sandbox.prepare(confine))
            launch = sandbox.wrap(self.argv, self.confined, cwd=cwd)
        self._out = runner.open_log(self.out_path)
        full_env = {**os.environ, **self.env}
        self.token = new_step(full_env)
        try:
            with runner.open_log(self.err_path) as err:
                self.proc = popen(
                    launch,
                    cwd=str(cwd),
                    env=full_env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,
                    pass_fds=() if self.confined is None else (sandbox.read_end(),),
                )
        except OSError as exc:
            forget_step(self.token)
            self._out.close()
            self._sandbox.close()
            raise ServerError(f"could not start: {exc.strerror or exc}: {exc.filename or launch[0]}") from None
        os.set_blocking(self.proc.stdout.fileno(), False)  # type: ignore[union-attr]
        self.pgid = self.proc.pid
        self.closed = False
        self.paused = False
        """Stopped by `pause()` and not resumed since."""
        runner.limit_file_size(self.proc.pid, max_output_bytes)
        if on_start:
            on_start(self.pgid)

    @property
    def alive(self) -> bool:
        return not self.closed and self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU seconds its process tree has spent so far (`runner.cpu_seconds`;
        unconfined, processes carrying its step token count too: nothing else holds them)."""
        return cpu_seconds(self.pgid, None if self.confined is not None else self.token)

    def pause(self) -> None:
        """Stop its whole process tree (SIGSTOP) until `resume()`: while another process is
        measured, nothing this one runs (a thread left busy, a child) takes a CPU from it."""
        if self.alive:
            self.paused = True
            signal_tree(self.pgid, signal.SIGSTOP, None if self.confined is not None else self.token)
            wait_stopped(self.pgid, timeout_s=0.5)  # kill() returns before a busy process has stopped

    def resume(self) -> None:
        """Continue what `pause()` stopped (SIGCONT); nothing when it is not paused (a pass over
        the process table saved: a look resumes every server several times)."""
        if not self.closed and self.paused:
            signal_tree(self.pgid, signal.SIGCONT, None if self.confined is not None else self.token)
            self.paused = False

    def ask(
        self,
        request: str,
        *,
        is_reply: Callable[[str], bool],
        timeout_s: float,
        poll: Callable[[], None] | None = None,
        poll_interval_s: float = 0.2,
    ) -> str:
        """Send one request line and return the reply line. Raises ServerError (the process
        is then closed) on a timeout, an exit, or runaway output; an exception from `poll`
        closes it too and propagates."""
        start = self.send(request)
        return self.reply(
            request, start, is_reply=is_reply, timeout_s=timeout_s, poll=poll, poll_interval_s=poll_interval_s
        )

    def send(self, request: str) -> float:
        """Write one request line (its reply is `reply`'s); when it was sent (time.monotonic).
        Raises ServerEnded (the process is then closed) when it cannot take it."""
        try:
            self.proc.stdin.write(request.encode() + b"\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            self.close(grace_s=0.0)
            raise ServerEnded(f"{self._ended()} before the request {request!r}") from None
        return time.monotonic()

    def reply(
        self,
        request: str,
        start: float,
        *,
        is_reply: Callable[[str], bool],
        timeout_s: float,
        poll: Callable[[], None] | None = None,
        poll_interval_s: float = 0.2,
    ) -> str:
        """The reply line to `request`, sent at `start` (`send`): as `ask`, so that several
        processes can be asked at once and their replies waited for in turn."""
        try:
            while True:
                exited = self.proc.poll() is not None  # before reading: what it wrote is in the pipe
                for line in self._read_lines(0.0 if exited else poll_interval_s):
                    if is_reply(line):
                        return line
                if exited or self._eof:  # it left, or closed its stdout: no reply can come
                    try:
                        self.proc.wait(timeout=2.0)
                    except subprocess.TimeoutExpired:
                        pass
                    raise ServerEnded(f"{self._ended()} without answering {request!r}")
                self._within(start, timeout_s, poll, f" on {request!r}")
        except BaseException:
            self.close(grace_s=0.0)
            raise

    def finish(self, *, timeout_s: float, poll: Callable[[], None] | None = None, poll_interval_s: float = 0.2) -> int:
        """Wait for the process to end on its own (its output logged as it comes); its exit
        code. Raises ServerError on a timeout or runaway output; the process is closed either
        way, and an exception from `poll` closes it too and propagates."""
        start = time.monotonic()
        try:
            while self.proc.poll() is None:
                self._read_lines(poll_interval_s)
                self._within(start, timeout_s, poll)
            return int(self.proc.returncode)
        finally:
            self.close(grace_s=0.0)

    def _within(self, start: float, timeout_s: float, poll: Callable[[], None] | None, what: str = "") -> None:
        """One tick of a wait: ServerError past `timeout_s` since `start` or past the output
        limit; then `poll`."""
        if time.monotonic() - start > timeout_s:
            raise ServerError(f"timed out after {timeout_s:.0f} s{what}")
        if runner.file_size(self.out_path) + runner.file_size(self.err_path) > self.max_output_bytes:
            raise ServerError("wrote more output than the limit ([target].max_output_mib); killed")
        if poll:
            poll()

    def hurry(self) -> None:
        """Tell the process to end now, without waiting for it: its stdin closed and SIGTERM to
        its group. `close()` (which must follow) then finds it gone, or kills what is left: a
        served torch process took 0.4-1.2 s to leave on the H200, which kopt spends starting
        its successor instead of waiting (engine/loop/served_trees.py)."""
        if self.closed:
            return
        self.resume()
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            os.killpg(self.pgid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self, grace_s: float = 5.0) -> None:
        """End the process: its stdin closed (a served command leaves at EOF), up to
        `grace_s` to exit, then its whole group killed. Idempotent."""
        if self.closed:
            return
        self.resume()  # a paused process would never see its stdin close
        self.closed = True
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        kill_group(self.pgid)
        if self.proc.poll() is None:
            self.proc.wait()
        forget_step(self.token)
        if self.confined is None:
            end_leftovers(self.token, self.marker)
        try:
            self._drain()
        finally:
            self.proc.stdout.close()  # type: ignore[union-attr]
            self._out.close()
            self._sandbox.close()
            for path in (self.out_path, self.err_path):
                runner.cut_log(path, self.max_output_bytes)
            if self.on_end:
                self.on_end(self.pgid)

    def _read_lines(self, wait_s: float) -> list[str]:
        """Lines completed within `wait_s` (logged as they come)."""
        import select

        stdout = self.proc.stdout
        assert stdout is not None  # started with stdout=PIPE
        ready, _, _ = select.select([stdout], [], [], wait_s)
        if ready:
            self._drain()
        *lines, self._buffer = self._buffer.split(b"\n")
        return [ln.decode("utf-8", "replace").rstrip("\r") for ln in lines]

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                self._eof = True
                return
            self._buffer += chunk
            if self._out.tell() < self.max_output_bytes:
                self._out.write(chunk)
                self._out.flush()

    def _ended(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "closed its stdout"
        how = (
            f"killed by {signal.Signals(-code).name}"
            if code < 0 and -code in signal.valid_signals()
            else f"exit code {code}"
        )
        err = tail_file(self.err_path, 40)
        last = [ln for ln in err.splitlines()[-5:] if ln.strip()]
        return f"ended ({how})" + (f": {last[-1][:300]}" if last else "") + sandbox_note(self.confined, err)
