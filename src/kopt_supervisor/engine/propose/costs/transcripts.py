"""An agent's transcript on disk: read line by line with over-long lines skipped, and cut to
its head and tail when over [propose].transcript_max_kib. The package's one edge (files).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

MAX_LINE_BYTES = 4 * 2**20
"""Longer lines (a tool's huge output echoed in a JSON event) are skipped, not parsed."""


def read_lines(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The file's lines, decoded; lines longer than `max_line_bytes` are skipped."""
    try:
        f = open(path, "rb")
    except OSError:
        return
    with f:
        skipping = False
        while True:
            chunk = f.readline(max_line_bytes + 1)
            if not chunk:
                return
            complete = chunk.endswith(b"\n")
            if skipping or len(chunk) > max_line_bytes:
                skipping = not complete
                continue
            yield chunk.decode("utf-8", "replace")


def cap_file(path: Path, max_bytes: int) -> tuple[int, bool]:
    """Keep the head and the tail of a file that is over `max_bytes` with a marker line
    between them. Returns (the size it had, whether it was cut)."""
    try:
        size = path.stat().st_size
    except OSError:
        return 0, False
    if size <= max_bytes:
        return size, False
    keep = max(max_bytes // 2, 1)
    with open(path, "rb") as f:
        head = f.read(keep)
        f.seek(size - keep)
        tail = f.read(keep)
    marker = f"\n[... kopt cut {size - 2 * keep} bytes of this transcript ([propose].transcript_max_kib) ...]\n"
    tmp = path.with_name(path.name + ".cut")
    tmp.write_bytes(head + marker.encode() + tail)
    tmp.replace(path)
    return size, True
