"""The engine's lifeline into every sandbox: a sandbox ends when the engine that started it
dies, by a pipe rather than by a parent-death signal alone.

bwrap's `--die-with-parent` arms a parent-death signal in each of its processes after it
is forked; a parent that dies before the child arms it sends nothing, and the sandbox's init
then lives on, reparented to the host's init, for as long as anything inside it does (seen
three times in whole-suite runs on a loaded 2-core machine: a `sleep 60` a bench left and
bwrap's init outlived a `kill -9` of the engine). A pipe has no such window: the kernel
closes every descriptor of a dead process, and a read end whose last writer is gone reads
end-of-file at once, however late anyone looks.

So the engine holds the write end of one pipe for its life (`read_end()` makes it, once per
process, never inherited by anything it starts), and every sandbox runs `watched(argv,
fd)`: in place of bwrap's init (`--as-pid-1`), a small init of kopt's own that starts the
command, reaps what is orphaned inside, exits with the command's status when the command
ends (as bwrap's init does: 128 + the signal that killed it), and exits at once when the
lifeline reads end-of-file. PID 1 leaving ends its PID namespace: the kernel kills every
process in it. The init is not dumpable, so nothing in the sandbox can open its lifeline
through /proc/1/fd (a write end opened there would keep the sandbox alive past the
engine); the command never holds the lifeline at all.

Side effects: `read_end` makes a pipe; `watched` is pure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

INIT_NAME = "kopt-init"  # the init's name in /proc/1/comm inside a sandbox

# Runs as `python -I -S -c INIT <lifeline fd> <argv...>`: the standard library only, no site.
INIT = r"""
import _signal as signal, os, select, sys  # _signal: the C module, without signal.py's enums (5 ms)
life = int(sys.argv[1])
argv = sys.argv[2:]
try:
    os.fstat(life)
except OSError:
    os.write(2, f"kopt-init: the lifeline (descriptor {life}) was not passed on: a launch must pass it (pass_fds)\n".encode())
    os._exit(126)
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/1/fd for the sandbox's processes
    libc.prctl(15, b"kopt-init", 0, 0, 0)  # PR_SET_NAME
except Exception:
    pass
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
child = os.fork()
if child == 0:
    try:
        os.close(life); os.close(wake_r); os.close(wake_w)
        signal.set_wakeup_fd(-1)
        for s in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(s, signal.SIG_DFL)  # as a command started by subprocess finds them
        os.execvp(argv[0], argv)
    except OSError as e:
        os.write(2, f"kopt-init: cannot run {argv[0]}: {e.strerror}\n".encode())
    os._exit(127)
while True:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pid = 0
        if pid == 0:
            break
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
    ready = select.select([life, wake_r], [], [])[0]
    if life in ready and not os.read(life, 1):
        os._exit(137)
    if wake_r in ready:
        os.read(wake_r, 512)
"""

_pipe: tuple[int, int, int] | None = None  # (pid that made it, read end, write end)


def read_end() -> int:
    """The read end of this process's lifeline, made at first use (and anew in a forked child,
    whose parent's write end is not its own life). Both ends are close-on-exec: a command gets
    the read end only where its launch passes it (`pass_fds`), and the write end never."""
    global _pipe
    if _pipe is not None and _pipe[0] != os.getpid():  # a fork's copies: the parent's life
        os.close(_pipe[1])
        os.close(_pipe[2])
        _pipe = None
    if _pipe is None:
        r, w = os.pipe()
        _pipe = (os.getpid(), r, w)
    return _pipe[1]


def watched(argv: Sequence[str], fd: int) -> list[str]:
    """`argv` under kopt's init, which ends it (and all it started) when `fd` reads end-of-file."""
    return [sys.executable, "-I", "-S", "-c", INIT, str(fd), *argv]
