"""Run a command where unprivileged user namespaces are off, for real: as uid 1000 of a
user namespace whose `user.max_user_namespaces` is 0, so that nothing it starts can make a
user namespace (bwrap fails with ENOSPC, as on a kernel with them disabled). Needs root
outside; inside, uid 1000 is the outer uid 0 for file access, so the command reads and
writes what the caller's files allow, but it holds no capability.

    python userns_off.py CMD [ARG...]     # exit status: the command's; 90/91: setup failed
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000


def run(argv: list[str]) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the command: a new user namespace, then wait until it is set up
        os.close(go_w)
        os.close(ready_r)
        if libc.unshare(CLONE_NEWUSER) != 0:
            os._exit(90)
        os.write(ready_w, b"x")
        os.read(go_r, 1)
        os.execvp(argv[0], argv)
    os.close(go_r)
    os.close(ready_w)
    if os.read(ready_r, 1) != b"x":
        os.waitpid(pid, 0)
        return 90
    for name in ("uid_map", "gid_map"):  # the outer root is uid 1000 inside: no capabilities after exec
        fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY)
        os.write(fd, b"1000 0 1\n")
        os.close(fd)
    helper = os.fork()
    if helper == 0:  # joins the namespace with its capabilities, sets its limit to 0
        try:
            fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
            if libc.setns(fd, CLONE_NEWUSER) != 0:
                os._exit(91)
            with open("/proc/sys/user/max_user_namespaces", "w") as f:
                f.write("0")
        except OSError:
            os._exit(91)
        os._exit(0)
    _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        return 91
    os.write(go_w, b"x")
    os.close(go_w)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
