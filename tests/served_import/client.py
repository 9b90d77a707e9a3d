"""The served-by-import process (kernels/harness/imported.py) started as kopt starts it (working
directory = the tree, stdin/stdout), spoken to with the harness tests' client, and the
layer-norm fixture's trees (tests/served_import/upstream/triton_layer_norm)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from tests.kernels.serve_client import Server

FIXTURE = Path(__file__).parent / "upstream" / "triton_layer_norm"
SCRIPT = "05-layer-norm.py"
MODULE = "kopt_supervisor.kernels.harness.imported"
STUBS = Path(__file__).parent / "stubs"
"""A matplotlib test double for the process-level run (Mark.run plots; nothing reads the plot)."""


def layer_norm_tree(dest: Path, edits: tuple[tuple[str, str], ...] = ()) -> Path:
    """A tree holding the fixture's bench, each (old, new) of `edits` applied (old must be there)."""
    dest.mkdir(parents=True)
    text = (FIXTURE / SCRIPT).read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    (dest / SCRIPT).write_text(text)
    return dest


class ImportedServer(Server):
    """`python -m MODULE SCRIPT --line triton --serve` in `tree` (the harness tests' Server,
    another command); `script`: another bench of the tree's."""

    def __init__(self, tree: Path, *extra: str, script: str = SCRIPT) -> None:  # noqa: D107 - Server's, with this command
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
        self.tree = tree
        self.err_path = tree.parent / f"{tree.name}.serve.err"
        self._err = self.err_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, script, "--line", "triton", "--serve", *extra],
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
