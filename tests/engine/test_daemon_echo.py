"""The engine's log echoed on stdout (`kopt demo --headless`, `kopt run --foreground`): a reader
that leaves (`| head -1`) ends the echo, never the run (a new user's `kopt demo --headless |
head -6` crashed the run with BrokenPipeError)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from kopt_supervisor.engine.daemon import Echo
echo = Echo("t")
for i in range(200000):
    echo(f"line {i}")
print(f"went on to the end: gone={echo.gone}", file=sys.stderr)
"""


def test_a_reader_that_leaves_ends_the_echo_not_the_run() -> None:
    py = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert py.stdout is not None and py.stderr is not None
    first = py.stdout.readline()
    py.stdout.close()  # the reader leaves, as `head -1` does
    err = py.stderr.read().decode()
    assert py.wait(timeout=60) == 0, err
    assert first == b"kopt[t] line 0\n"
    assert "went on to the end: gone=True" in err and "Traceback" not in err and "BrokenPipe" not in err, err
