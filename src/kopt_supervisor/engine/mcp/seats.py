"""Which lane each MCP session holds, on a run of several lanes: a lane of its own, that no
other live session holds (docs/agents.md, "kopt as an MCP judge").

A lane is held with an exclusive `flock` on `<workspace>/mcp-lanes/lane-<i>.lock`, one open
file per session. So two `kopt mcp` processes on one run (two stdio clients) never hand out
the same lane, nor do two sessions of one HTTP server (a flock belongs to the open file, not to
the process), and a server that dies frees its lanes with it (the kernel drops its locks).
A session takes the first free lane; `release` (its end) frees it.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Hashable
from pathlib import Path

from kopt_supervisor.engine.mcp import rules
from kopt_supervisor.engine.mcp.errors import Refused

FOLDER = "mcp-lanes"


class Seats:
    def __init__(self, workspace: Path, tag: str, lanes: int) -> None:
        self.dir = workspace / FOLDER
        self.tag = tag
        self.lanes = lanes
        self._held: dict[Hashable, tuple[int, int]] = {}
        """session -> (its lane, the open lock file that holds it)."""
        self._lock = threading.Lock()

    def lane(self, session: Hashable) -> int | None:
        """The lane `session` holds (None: none yet)."""
        with self._lock:
            held = self._held.get(session)
        return held[0] if held else None

    def take(self, session: Hashable) -> int:
        """The lane `session` holds, or the first lane no live session holds (Refused: none is free)."""
        with self._lock:
            if session in self._held:
                return self._held[session][0]
            self.dir.mkdir(mode=0o700, exist_ok=True)
            for lane in range(self.lanes):
                fd = os.open(
                    self.dir / f"lane-{lane}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held[session] = (lane, fd)
                return lane
        raise Refused(rules.lanes_taken(self.tag, self.lanes))

    def release(self, session: Hashable) -> None:
        """The session ended: its lane is free for the next one."""
        with self._lock:
            held = self._held.pop(session, None)
        if held is not None:
            os.close(held[1])  # closing the file drops its lock

    def release_all(self) -> None:
        with self._lock:
            sessions = list(self._held)
        for session in sessions:
            self.release(session)
