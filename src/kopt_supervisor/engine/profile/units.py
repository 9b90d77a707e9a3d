"""Numbers and units as profilers print them, turned into base units (ns, bytes, bytes/s).

ncu prints values with thousands separators ("10,196,000") and, depending on
`--print-units`, scaled units ("usecond", "Kbyte/block", "Gbyte/second"); unsupported
metrics come back as "n/a". rocprofv3 prints plain integers in nanoseconds. Everything
here is pure and raises ValueError on text it cannot read; callers turn that into a
KoptFailure naming the file.
"""

from __future__ import annotations

import math

_TIME_NS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "nsec": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "usec": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "msec": 1e6,
    "s": 1e9,
    "second": 1e9,
    "sec": 1e9,
}

_PREFIX = {
    "": 1.0,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 1024.0,
    "Mi": 1024.0**2,
    "Gi": 1024.0**3,
    "Ti": 1024.0**4,
}

_MISSING = {"", "n/a", "na", "nan", "-", "none", "(null)"}


def parse_number(text: str | None) -> float | None:
    """'10,196,000' -> 10196000.0; 'n/a' or '' -> None; anything else unreadable -> ValueError."""
    if text is None:
        return None
    s = str(text).strip().strip('"').strip()
    if s.lower() in _MISSING:
        return None
    s = s.replace(",", "").replace("_", "")
    value = float(s)
    if math.isnan(value):
        return None
    return value


def time_to_ns(value: float, unit: str) -> float:
    """A duration in `unit` ("nsecond", "usecond", "ms", ...) in nanoseconds."""
    u = unit.strip()
    if u not in _TIME_NS:
        raise ValueError(f"unknown time unit {unit!r}")
    return value * _TIME_NS[u]


def _split_prefix(word: str, base: str) -> float | None:
    """'Kbyte' with base 'byte' -> 1e3; None when `word` is not `base` with a known prefix."""
    if not word.endswith(base):
        return None
    prefix = word[: -len(base)]
    return _PREFIX.get(prefix)


def bytes_of(value: float, unit: str) -> float:
    """A size in `unit` ("byte", "Kbyte", "KiB", "byte/block", "Kbyte/block") in bytes."""
    u = unit.strip()
    head = u.split("/", 1)[0].strip()
    for base in ("byte", "B"):
        scale = _split_prefix(head, base)
        if scale is not None:
            return value * scale
    raise ValueError(f"unknown size unit {unit!r}")


def rate_to_bytes_per_s(value: float, unit: str) -> float:
    """A bandwidth in `unit` ("byte/second", "Gbyte/second", "GB/s", "TB/s") in bytes/s."""
    u = unit.strip()
    if "/" not in u:
        raise ValueError(f"unknown bandwidth unit {unit!r}")
    num, den = (p.strip() for p in u.split("/", 1))
    size = bytes_of(1.0, num)
    if den not in _TIME_NS:
        raise ValueError(f"unknown bandwidth unit {unit!r}")
    return value * size / (_TIME_NS[den] * 1e-9)
