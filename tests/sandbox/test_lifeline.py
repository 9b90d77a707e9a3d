"""kopt's init in every sandbox (the lifeline, `sandbox/confinement.py`): the sandbox ends when its lifeline
closes, whatever bwrap's parent-death signals did; the command's status comes back as
bwrap's init would give it; and nothing inside can keep the sandbox alive past the engine
by reaching the lifeline through /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil

from kopt_supervisor.engine import sandbox
from kopt_supervisor.engine.sandbox import Confinement, wrap
from kopt_supervisor.engine.sandbox.confinement import read_end

from .conftest import NEEDS_BWRAP

pytestmark = NEEDS_BWRAP


def _confinement() -> Confinement:
    return Confinement(bwrap=sandbox.probe().bwrap or sandbox.BWRAP)


def _start(script: str, fd: int, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        wrap(["sh", "-c", script], _confinement(), cwd="/", lifeline_fd=fd),
        pass_fds=(fd,),
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        **kw,  # type: ignore[call-overload]
    )


def _inside(p: subprocess.Popen[bytes]) -> list[psutil.Process]:
    try:
        return psutil.Process(p.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _wait_for(cond, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_a_closed_lifeline_ends_the_sandbox_and_all_it_started():
    """The engine's death, as the sandbox sees it: the last write end closes. bwrap's own
    parent (this test) is alive throughout, so no parent-death signal plays any part."""
    r, w = os.pipe()
    try:
        p = _start("setsid sleep 60 & sleep 60 & exec sleep 61", r)
        _wait_for(lambda: sum("sleep" in c.name() for c in _inside(p)) == 3)
        held = _inside(p)
        time.sleep(0.5)
        assert p.poll() is None, "the sandbox ended on its own"
        os.close(w)
        w = -1
        assert p.wait(timeout=10) == 137
        gone, alive = psutil.wait_procs(held, timeout=5)
        assert not alive, f"left inside: {[(q.pid, q.name()) for q in alive]}"
    finally:
        os.close(r)
        if w != -1:
            os.close(w)


def test_the_command_s_status_comes_back_as_bwrap_s_init_gave_it(tmp_path):
    r, w = os.pipe()
    try:
        assert _start("exit 3", r).wait(timeout=20) == 3
        assert _start("kill -SEGV $$", r).wait(timeout=20) == 128 + signal.SIGSEGV
        err = tmp_path / "err"
        with open(err, "wb") as f:
            p = subprocess.Popen(
                wrap(["/nonexistent/bench"], _confinement(), cwd="/", lifeline_fd=r),
                pass_fds=(r,),
                stderr=f,
            )
            assert p.wait(timeout=20) == 127
        assert (
            sandbox.bwrap_error(err.read_text())
            == "kopt-init: cannot run /nonexistent/bench: No such file or directory"
        )
        # lingering children do not hold the sandbox once the command is done
        t0 = time.monotonic()
        assert _start("sleep 60 & exit 0", r).wait(timeout=20) == 0
        assert time.monotonic() - t0 < 10
    finally:
        os.close(r)
        os.close(w)


def test_the_command_finds_no_signal_ignored_and_no_lifeline(tmp_path):
    """Python's own start ignores SIGPIPE and SIGXFSZ; the command must find them at their
    defaults (a bench writing into a closed pipe dies as anywhere else), and it never holds
    the lifeline's descriptor."""
    r, w = os.pipe()
    try:
        out = tmp_path / "out"
        with open(out, "wb") as f:
            _start(
                f"grep SigIgn /proc/self/status; ls /proc/self/fd; test -e /proc/self/fd/{r} && echo HELD", r, stdout=f
            ).wait(timeout=20)
        text = out.read_text()
        ign = int(text.split()[1], 16)
        assert not ign & (1 << (signal.SIGPIPE - 1)) and not ign & (1 << (signal.SIGXFSZ - 1)), text
        assert "HELD" not in text, text
    finally:
        os.close(r)
        os.close(w)


def test_nothing_inside_can_take_hold_of_the_lifeline_or_stop_its_init(tmp_path):
    """A hostile bench that would outlive the engine: it opens PID 1's lifeline for writing
    through /proc (a write end it held would keep EOF from ever coming), or signals PID 1.
    Both are refused, and the sandbox still ends when the lifeline closes."""
    r, w = os.pipe()
    out = tmp_path / "out"
    script = f"""
import os, signal, time
for mode in (os.O_WRONLY, os.O_RDONLY):
    try:
        os.open("/proc/1/fd/{r}", mode)
        print("OPENED", mode, flush=True)
    except OSError as e:
        print("refused", e.strerror, flush=True)
for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
    try:
        os.kill(1, s)
    except OSError as e:
        print("kill refused", e.strerror, flush=True)
print("ready", open("/proc/1/comm").read().strip(), flush=True)
time.sleep(60)
"""
    try:
        with open(out, "wb") as f:
            p = subprocess.Popen(
                wrap(
                    [os.path.realpath(__import__("sys").executable), "-c", script],
                    _confinement(),
                    cwd="/",
                    lifeline_fd=r,
                ),
                pass_fds=(r,),
                stdout=f,
                start_new_session=True,
            )
            _wait_for(lambda: "ready" in out.read_text())
        text = out.read_text()
        assert "OPENED" not in text, text
        assert f"ready {sandbox.INIT_NAME}" in text, text
        time.sleep(0.3)
        assert p.poll() is None, "a signal from inside ended PID 1"
        held = _inside(p)
        os.close(w)
        w = -1
        assert p.wait(timeout=10) == 137
        assert not psutil.wait_procs(held, timeout=5)[1]
    finally:
        os.close(r)
        if w != -1:
            os.close(w)


def test_a_forked_child_makes_its_own_lifeline_and_holds_nothing_of_its_parent_s():
    """A write end a forked child kept would keep its parent's sandboxes alive after the
    parent's death: the child's first `read_end()` closes its copies of the parent's pipe."""
    parent_pipe = f"pipe:[{os.fstat(read_end()).st_ino}]"
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child answers through the pipe
        try:
            own = f"pipe:[{os.fstat(read_end()).st_ino}]"
            held = []
            for n in os.listdir("/proc/self/fd"):
                try:
                    held.append(os.readlink(f"/proc/self/fd/{n}"))
                except OSError:  # the listing's own descriptor, closed by now
                    pass
            os.write(wr, f"{own} {held.count(parent_pipe)}".encode())
        finally:
            os._exit(0)
    os.close(wr)
    os.waitpid(pid, 0)
    own, parents_held = os.read(rd, 200).decode().split()
    os.close(rd)
    assert own != parent_pipe and parents_held == "0"
    assert f"pipe:[{os.fstat(read_end()).st_ino}]" == parent_pipe  # the parent's own is untouched


def test_a_launch_that_does_not_pass_the_lifeline_is_refused_with_its_cause(tmp_path):
    err = tmp_path / "err"
    with open(err, "wb") as f:
        p = subprocess.Popen(wrap(["true"], _confinement(), cwd="/"), stderr=f)  # no pass_fds
        assert p.wait(timeout=20) == 126
    assert "was not passed on" in (sandbox.bwrap_error(err.read_text()) or "")
