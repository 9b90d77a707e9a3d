"""Host-wide GPU claims: kopt runs on one host never time on the same GPU.

A claim is an exclusive `flock` on `<dir>/<gpu key>.lock` (default dir
/tmp/kopt-gpu-claims, world-writable with the sticky bit, or $KOPT_GPU_CLAIMS_DIR), held by
the engine for as long as it uses that GPU. The kernel drops the lock when the process dies,
so a crashed run never leaves a stale claim. The holder writes who it is into the file (pid,
host, owner); others read it to explain "claimed by kopt run X". `probe()` asks whether
another process holds a claim without taking it (a shared, non-blocking lock that is dropped
at once); a claim attempt that collides with a probe simply fails for that instant, and the
gate retries. Locks are per open file, so within one process the registry itself remembers
what is held (and by which owner token), and probes never touch a file this process holds.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

DEFAULT_DIR = "/tmp/kopt-gpu-claims"

_LOCK = threading.Lock()
_HELD: dict[str, tuple[int, str, dict[str, Any]]] = {}
"""path → (fd, token, holder info) for the claims this process holds."""


def claims_dir() -> Path:
    return Path(os.environ.get("KOPT_GPU_CLAIMS_DIR") or DEFAULT_DIR)


def claim_key(namespace: str, uuid: Any, index: int) -> str:
    raw = f"{namespace}-{uuid}" if namespace else str(uuid if uuid else f"index-{index}")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)[:200]


class ClaimRegistry:
    """Claims made by one owner (one Gate) in one directory."""

    def __init__(self, directory: str | Path | None = None, owner: str = "") -> None:
        self.dir = Path(directory) if directory else claims_dir()
        self.owner = owner or f"pid {os.getpid()}"
        self.token = f"{os.getpid()}-{id(self)}"
        self.mine: set[str] = set()

    def _path(self, key: str) -> Path:
        return self.dir / f"{key}.lock"

    def _ensure_dir(self) -> bool:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            st = self.dir.stat()
            if st.st_uid == os.getuid() and (st.st_mode & 0o7777) != 0o1777:
                os.chmod(self.dir, 0o1777)  # shared by every user's kopt runs, like /tmp
        except OSError:
            return self.dir.is_dir()
        return True

    def claim(self, key: str) -> bool:
        """Take the claim on `key`; True when held (already or now)."""
        path = str(self._path(key))
        with _LOCK:
            held = _HELD.get(path)
            if held is not None:
                return held[1] == self.token
            if not self._ensure_dir():
                return True  # no shared directory: claims cannot work, do not block the run
            fd = _open(path)
            if fd is None:
                return True
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return False
                return True  # a filesystem without flock: no host-wide claims
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "owner": self.owner,
                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(info).encode(), 0)
            except OSError:
                pass  # opened read-only (another user's file): the lock still counts
            _HELD[path] = (fd, self.token, info)
            self.mine.add(key)
            return True

    def release(self, key: str) -> None:
        path = str(self._path(key))
        with _LOCK:
            held = _HELD.get(path)
            if held is None or held[1] != self.token:
                return
            fd = held[0]
            del _HELD[path]
            self.mine.discard(key)
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing drops the flock

    def release_all(self) -> None:
        for key in list(self.mine):
            self.release(key)

    def probe(self, key: str) -> dict[str, Any] | None:
        """Who else holds `key` ({pid, host, owner, since}, possibly partial), or None."""
        path = str(self._path(key))
        with _LOCK:
            held = _HELD.get(path)
            if held is not None:
                return None if held[1] == self.token else dict(held[2])
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None  # no file: nobody ever claimed it
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return None
                return _holder(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)


def _open(path: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        try:
            return os.open(path, os.O_RDONLY)
        except OSError:
            return None
    except OSError:
        return None
    try:
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IWGRP | stat.S_IROTH | stat.S_IWOTH)
    except OSError:
        pass
    return fd


def _holder(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode() or "{}")
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}
