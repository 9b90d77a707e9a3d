"""A command's log files and its output limit: logs opened fresh (a name left in their
folder is removed first, and never followed: a sandboxed process that can write in a log
folder cannot turn kopt's next log into a write through a link or a block on a FIFO), the
kernel's file-size cap, a flooded log cut to the limit, the tail of a log.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

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
