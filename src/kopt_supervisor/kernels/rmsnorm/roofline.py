"""RMSNorm (QK-norm): the fewest bytes per call (x read once, y written once, the weight read
once). BYTES is the same formula as a kopt.toml [roofline] expression over the CSV's config
columns."""

from __future__ import annotations

BYTES = "2 * B * N * H * hd * esize + hd * esize"


def bytes_moved(B: int, N: int, H: int, hd: int, esize: int, **_: object) -> int:
    return 2 * B * N * H * hd * esize + hd * esize
