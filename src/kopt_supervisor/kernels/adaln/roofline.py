"""adaLN modulation: the fewest bytes per call (x read once, y written once, scale and shift
read once per batch). BYTES is the same formula as a kopt.toml [roofline] expression over
the CSV's config columns."""

from __future__ import annotations

BYTES = "2 * B * N * D * esize + 2 * B * D * esize"


def bytes_moved(B: int, N: int, D: int, esize: int, **_: object) -> int:
    return 2 * B * N * D * esize + 2 * B * D * esize
