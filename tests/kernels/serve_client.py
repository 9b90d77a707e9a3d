"""A client of the harness's per-tree serve protocol for the tests: a materialized bundled
kernel's `bench.py --serve` run as kopt runs it (working directory = the tree, a subprocess
talking over stdin/stdout), on this machine's CPU (the harness switches Triton's interpreter
on by itself)."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from kopt_supervisor.kernels import catalog

ONLY = "cpu-48,cpu-128"
"""Two small shapes, one per class (narrow, non-power-of-two; wide): the interpreter is slow."""
REPLY = re.compile(r"^(prepared|unprepared|done|audited|loaded|fail) ")
REPLY_EXACT = {"loaded"}


def materialize(dest: Path, name: str = "rmsnorm") -> Path:
    dest.mkdir(parents=True)
    catalog.materialize(name, dest, naive=True)
    return dest


def edit(tree: Path, old: str, new: str, name: str = "rmsnorm") -> None:
    """Replace `old` (which must be there) by `new` in the tree's solution."""
    sol = tree / "solution" / f"{name}.py"
    text = sol.read_text()
    assert old in text, old
    sol.write_text(text.replace(old, new))


class Server:
    """`python bench.py --serve --dtypes bfloat16 --only ONLY` in `tree`; ask() sends one
    request and returns the reply line (other stdout lines are kept in `noise`)."""

    def __init__(self, tree: Path, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
        self.tree = tree
        self.err_path = tree.parent / f"{tree.name}.serve.err"
        self._err = self.err_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "bench.py", "--serve", "--dtypes", "bfloat16", "--only", ONLY, *extra],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.noise: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def ask(self, request: str, timeout: float = 240.0) -> str | None:
        """The reply to `request`; None when the process closed its stdout (it left)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(request + "\n")
        self.proc.stdin.flush()
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no reply to {request!r} in {timeout} s; stderr:\n{self.stderr()}") from None
            if line is None or REPLY.match(line) or line in REPLY_EXACT:
                return line
            self.noise.append(line)

    def look(self, n: int, seed: int, out: Path) -> str | None:
        return self.ask(f"look {n} {seed} {out}")

    def audit(self, n: int, seed: int, out: Path) -> dict[str, Any]:
        reply = self.ask(f"audit {n} {seed} {out}")
        assert reply == f"audited {n}", (reply, self.stderr())
        return json.loads(out.read_text())

    def stderr(self) -> str:
        self._err.flush()
        return self.err_path.read_text()[-3000:]

    def close(self, timeout: float = 60.0) -> int:
        """EOF on stdin; the exit status."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._err.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            try:
                self.close(timeout=30.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def look_and_audit(tree: Path, out: Path, look_seed: int, audit_seed: int) -> tuple[str, str]:
    """A fresh server in `tree`: one look and its audit; (the CSV's text, the audit's text)."""
    out.mkdir(parents=True, exist_ok=True)
    with Server(tree) as s:
        assert s.look(1, look_seed, out / "look.csv") == "done 1", s.stderr()
        s.audit(1, audit_seed, out / "audit.json")
        assert s.close() == 0
    return (out / "look.csv").read_text(), (out / "audit.json").read_text()
