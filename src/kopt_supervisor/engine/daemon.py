"""The engine as a process: detach, own the workspace (lock), heartbeat, signals.

`start_detached()` launches `python -m kopt_supervisor.engine.daemon` in a new session with its output in
logs/engine.log, so closing the terminal or losing SSH (SIGHUP) never reaches it.
`run_engine()` is what that process (or `kopt run --foreground`) does: take the workspace
lock (one engine per workspace), start a heartbeat thread, translate SIGTERM/SIGINT into a
clean stop, run the loop, and record a crash with its last error.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kopt_supervisor.engine import BadInput, KoptError
from kopt_supervisor.engine.sandbox import SandboxUnavailable
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace

if TYPE_CHECKING:
    from kopt_supervisor.engine.loop import Engine

HEARTBEAT_S = 1.0


class WorkspaceBusy(BadInput):
    """Another engine owns this workspace."""


LOCK_PATIENCE_S = 1.0
"""How long a starting engine retries the workspace lock: `engine_alive` (every TUI and
`kopt status`) holds it shared for a moment to probe it, which must not read as an engine."""


@contextlib.contextmanager
def workspace_lock(ws: Workspace) -> Iterator[None]:
    """Exclusive ownership of a workspace for this process's lifetime (flock: released by
    the kernel when the process dies, so a crash never leaves a stale lock)."""
    fd = os.open(ws.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + LOCK_PATIENCE_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    raise WorkspaceBusy(
                        f"another engine (pid {pid}) already runs {ws.tag!r}; use `kopt attach {ws.tag}`"
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def engine_alive(ws: Workspace) -> tuple[bool, int | None]:
    """Is an engine holding this workspace now? (pid read from the lock file)."""
    if not ws.lock_path.exists():
        return False, None
    fd = os.open(ws.lock_path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return True, int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False, None
    finally:
        os.close(fd)


class Heartbeat(threading.Thread):
    """Writes meta.heartbeat every second from its own connection."""

    def __init__(self, ws: Workspace) -> None:
        super().__init__(name="kopt-heartbeat", daemon=True)
        self.ws = ws
        self.stopped = threading.Event()

    def run(self) -> None:
        store = Store(self.ws.db_path)
        try:
            while not self.stopped.is_set():
                with contextlib.suppress(Exception):
                    store.set("heartbeat", {"t": time.time(), "pid": os.getpid()})
                self.stopped.wait(HEARTBEAT_S)
        finally:
            store.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


class Echo:
    """The engine's log lines on stdout (`kopt run --foreground`, `kopt demo --headless`). A
    reader that went away (`| head`) ends the echo, never the run: stdout is pointed at
    /dev/null (Python's own advice for SIGPIPE) and the run goes on, logged in its workspace."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.gone = False

    def __call__(self, msg: str) -> None:
        if self.gone:
            return
        try:
            print(f"kopt[{self.tag}] {msg}", flush=True)
        except BrokenPipeError:
            self.gone = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def run_engine(
    ws: Workspace,
    *,
    proposer: str | None = None,
    max_iters: int | None = None,
    log_to_stdout: bool = False,
    no_sandbox: bool = False,
    demo: bool = False,
) -> int:
    """Run the loop in this process. Exit status: 0 stopped for a stated reason, 1 crashed or
    failed (a baseline that fails its bench or correctness, a proposer that cannot go on).
    `demo`: `kopt demo`'s own start (engine/sandbox/__init__.py start_rule)."""
    from kopt_supervisor.engine.loop import Engine

    ws.require()
    with workspace_lock(ws):
        beat = Heartbeat(ws)
        beat.start()
        engine = None
        try:
            engine = Engine(
                ws,
                proposer_kind=proposer,
                max_iters=max_iters,
                no_sandbox=no_sandbox,
                demo=demo,
                log=Echo(ws.tag) if log_to_stdout else None,
            )
            _install_signals(engine)
            engine.run()
            if engine.failed:  # a baseline that failed, a broken proposer: the run failed
                print(f"kopt: the run failed: {engine.failed}{engine.fix}", file=sys.stderr)
                return 1
            return 0
        except SandboxUnavailable:
            raise  # a refusal before the run starts: nothing crashed
        except KoptError as e:
            _record_crash(ws, f"{type(e).__name__}: {e}")
            if isinstance(e, BadInput):
                raise
            print(f"kopt: {e}", file=sys.stderr)
            return 1
        except BaseException as e:  # noqa: BLE001 - record any crash, then re-raise
            _record_crash(ws, f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
            raise
        finally:
            beat.stop()
            if engine is not None:
                engine.ctx.store.close()


def _install_signals(engine: Engine) -> None:
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, _frame: object) -> None:
        engine.request_stop(f"stopped by signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _record_crash(ws: Workspace, error: str) -> None:
    with contextlib.suppress(Exception), Store(ws.db_path) as store:
        store.set_many({"state": "crashed", "last_error": error[-4000:], "engine_pid": None})
        store.event("crash", error.splitlines()[0][:500], level="error")


def start_detached(
    ws: Workspace,
    *,
    proposer: str | None = None,
    max_iters: int | None = None,
    no_sandbox: bool = False,
    demo: bool = False,
) -> int:
    """Start the engine in its own session; returns its pid once it holds the workspace."""
    ws.require()
    alive, pid = engine_alive(ws)
    if alive:
        raise WorkspaceBusy(f"an engine (pid {pid}) already runs {ws.tag!r}; use `kopt attach {ws.tag}`")
    ws.logs.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "kopt_supervisor.engine.daemon", "--root", str(ws.root), ws.tag]
    if proposer:
        argv += ["--proposer", proposer]
    if max_iters is not None:
        argv += ["--max-iters", str(max_iters)]
    if no_sandbox:
        argv += ["--no-sandbox"]
    if demo:
        argv += ["--demo"]
    log = open(ws.engine_log, "ab")
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(ws.dir),
            env=_engine_env(),
        )
    finally:
        log.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        alive, pid = engine_alive(ws)
        if alive and pid not in (None, proc.pid):  # another start took the workspace first: ours refuses
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.poll() is not None:
                raise WorkspaceBusy(f"an engine (pid {pid}) already runs {ws.tag!r}; use `kopt attach {ws.tag}`")
        if alive:
            return pid or proc.pid
        if proc.poll() is not None:
            tail = Path(ws.engine_log).read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise KoptError(f"the engine exited at once ({proc.returncode}): {tail[0]}")
        time.sleep(0.05)
    return proc.pid


def _engine_env() -> dict[str, str]:
    """The engine runs from the installed package: nothing of kopt's is put on PYTHONPATH
    (that would hand the benches it starts top-level names such as `kernels`)."""
    return dict(os.environ)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kopt_supervisor.engine.daemon", description="kopt engine process")
    ap.add_argument("--root", required=True)
    ap.add_argument("--proposer")
    ap.add_argument("--max-iters", type=int)
    ap.add_argument("--no-sandbox", action="store_true")
    ap.add_argument("--demo", action="store_true", help="kopt demo's own start (its workspace, the tune proposer)")
    ap.add_argument("tag")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    ws = Workspace(Path(args.root), args.tag)
    try:
        return run_engine(
            ws,
            proposer=args.proposer,
            max_iters=args.max_iters,
            log_to_stdout=True,
            no_sandbox=args.no_sandbox,
            demo=args.demo,
        )
    except KoptError as e:
        print(f"kopt: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
