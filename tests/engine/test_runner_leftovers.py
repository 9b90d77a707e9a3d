"""engine/runner/ without the sandbox: what an unconfined step leaves running is ended when
the step ends, found by its environment (the step's KOPT_STEP token, the run's marker), not
by its process group or its command line.

Hostile cases: a `setsid` child, one that renames itself (exec -a) and ignores SIGTERM, one
that keeps starting new detached children, a served command's escapee; beside them what
must survive: another lane's step still running (its token is live), another run's
processes (another marker value). The limit is tested too: a process that re-executes
itself with an environment of its own is not recognised (what --no-sandbox gives up)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil

from kopt_supervisor.engine.runner import end_leftovers, kill_group, wait_stopped
from kopt_supervisor.engine.runner.command import RunResult
from kopt_supervisor.engine.runner.command import run as run_command
from kopt_supervisor.engine.runner.server import Server

MARKER = "KOPT_WORKSPACE"


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def pids_of(tag: str) -> list[int]:
    """Live processes whose command line holds `tag` (a unique number given to sleep)."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(tag in a for a in p.info["cmdline"] or ()) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


def unique_sleep() -> str:
    """A sleep argument no other process on the machine has (found by it afterwards)."""
    return f"{100 + int(uuid.uuid4().int % 10**6) / 10**6 + 0.5:.6f}"


def wait_pidfile(path: Path, timeout: float = 5.0) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = path.read_text().strip() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def run(tmp_path: Path, script: str, marker: tuple[str, str] | None = None) -> RunResult:
    return run_command(
        ["bash", "-c", script],
        cwd=tmp_path,
        log_dir=tmp_path / "logs",
        name="step",
        timeout_s=20,
        env={MARKER: marker[1]} if marker else None,
        marker=marker,
    )


def test_a_setsid_child_is_ended_with_its_step(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    res = run(tmp_path, f"setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}; sleep 0.3")
    assert res.ok
    pid = wait_pidfile(pidfile)
    assert not alive(pid), "the setsid child outlived its step"


def test_a_child_that_renames_itself_and_ignores_term_is_killed(tmp_path: Path) -> None:
    """`exec -a` gives it another command line; SIGTERM is ignored (inherited across exec):
    its environment still carries the step's token, and the grace ends in SIGKILL."""
    pidfile = tmp_path / "pid"
    arg = unique_sleep()
    res = run(
        tmp_path,
        f"setsid bash -c 'trap \"\" TERM; echo $$ > {pidfile}; exec -a innocent sleep {arg}' "
        "</dev/null >/dev/null 2>&1 &\n"
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done; sleep 0.2",
    )
    assert res.ok
    pid = wait_pidfile(pidfile)
    assert not alive(pid) and not pids_of(arg), "a renamed, TERM-ignoring child outlived its step"


def test_a_child_that_keeps_starting_detached_children_is_ended_with_all_of_them(tmp_path: Path) -> None:
    arg = unique_sleep()
    res = run(
        tmp_path,
        f"setsid bash -c 'for i in $(seq 1 400); do (setsid sleep {arg} &); sleep 0.005; done' "
        "</dev/null >/dev/null 2>&1 &\nsleep 0.3",
    )
    assert res.ok
    time.sleep(0.2)  # a child started while the last ones were killed would show now
    left = pids_of(arg)
    for pid in left:
        psutil.Process(pid).kill()
    assert not left, f"{len(left)} detached children outlived their step"


def test_the_runs_marker_ends_strays_and_spares_a_step_still_running(tmp_path: Path) -> None:
    """Several lanes run steps at once: a sweep by the run's marker (after one lane's step)
    ends a marked process no live step owns, spares the processes of the step still running
    in another thread, and never touches another run's processes."""
    marker = (MARKER, str(tmp_path / "ws"))
    live_arg, stray_arg, other_arg = unique_sleep(), unique_sleep(), unique_sleep()
    started = threading.Event()
    pgid: list[int] = []

    def other_lane() -> None:
        run_command(
            ["sleep", live_arg],
            cwd=tmp_path,
            log_dir=tmp_path / "logs",
            name="lane1",
            timeout_s=20,
            env={MARKER: marker[1]},
            marker=marker,
            on_start=lambda g: (pgid.append(g), started.set()),
        )

    t = threading.Thread(target=other_lane)
    t.start()
    assert started.wait(5)
    stray = subprocess.Popen(["sleep", stray_arg], env={**os.environ, MARKER: marker[1]}, start_new_session=True)
    other = subprocess.Popen(
        ["sleep", other_arg], env={**os.environ, MARKER: str(tmp_path / "another-run")}, start_new_session=True
    )
    try:
        n = end_leftovers(None, marker)
        stray.wait(5)
        assert n == 1 and stray.returncode is not None
        assert pids_of(live_arg), "the live step of another lane was killed"
        assert other.poll() is None, "another run's process was killed"
    finally:
        kill_group(pgid[0])
        t.join(10)
        other.kill()
        other.wait()


def test_a_served_commands_escapee_is_ended_when_it_closes(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    server = Server(
        [
            "bash",
            "-c",
            f"setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}\n"
            'while read -r line; do echo "done $line"; done',
        ],
        cwd=tmp_path,
        log_dir=tmp_path / "logs",
        name="serve",
    )
    assert server.ask("1", is_reply=lambda s: s.startswith("done"), timeout_s=10) == "done 1"
    pid = wait_pidfile(pidfile)
    assert alive(pid)  # it lives while the served command does
    server.close(grace_s=1.0)
    assert not alive(pid)


def test_the_limit_a_process_that_re_executes_with_its_own_environment_is_not_recognised(tmp_path: Path) -> None:
    """What running without the sandbox gives up (docs/security.md): `env -i` leaves neither
    the step's token nor the run's marker; nothing else tells it from any process of the user."""
    pidfile = tmp_path / "pid"
    marker = (MARKER, str(tmp_path / "ws"))
    res = run(
        tmp_path,
        f'setsid env -i {sys.executable} -c \'import os, time; open("{pidfile}", "w").write('
        "str(os.getpid())); time.sleep(60)' </dev/null >/dev/null 2>&1 &\n"
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done",
        marker=marker,
    )
    assert res.ok
    pid = wait_pidfile(pidfile)
    try:
        assert alive(pid)
        assert end_leftovers(None, marker) == 0
    finally:
        if alive(pid):
            psutil.Process(pid).kill()


def test_a_member_that_ends_while_the_group_is_looked_at_counts_as_gone() -> None:
    """kill_group never raises: a process that exits between psutil's two reads (alive, then
    its status) is gone, not an error (seen in a clean clone's suite: NoSuchProcess)."""
    import psutil

    from kopt_supervisor.engine import runner

    class Vanishing:
        pid = 999_999

        def is_running(self) -> bool:
            return True

        def status(self) -> str:
            raise psutil.NoSuchProcess(self.pid)

    assert runner._running(Vanishing()) is False  # type: ignore[arg-type]


def test_wait_stopped_is_true_only_once_the_whole_tree_is_stopped() -> None:
    """runner.wait_stopped: a group whose busy shell and its background child are still
    running is not stopped (False at its timeout); once SIGSTOP reached every process of the
    tree, True; a process that ended meanwhile does not hold it up."""
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 30 & while :; do :; done"], start_new_session=True, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not psutil.Process(proc.pid).children():
            time.sleep(0.01)
        assert not wait_stopped(proc.pid, timeout_s=0.05)  # running, nobody stopped it
        os.killpg(proc.pid, signal.SIGSTOP)
        assert wait_stopped(proc.pid, timeout_s=5.0)
        tree = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
        assert len(tree) >= 2
        assert all(psutil.Process(pid).status() == psutil.STATUS_STOPPED for pid in tree)
        os.killpg(proc.pid, signal.SIGCONT)
        assert not wait_stopped(proc.pid, timeout_s=0.05)  # running again
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
