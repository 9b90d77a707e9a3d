"""How kopt writes numbers as text: the one formatter for performance.md, results.md, commit
messages, the CLI and the TUI (pure: no I/O; `time` is read only to write local times).

A latency, a percent change or an interval prints the same wherever it appears:

- `num`: a metric value to 4 significant digits, trailing zeros dropped: 10.83, 10.8, 149.1,
  12346, 0.01235, 1.235e+07 (scientific below 1e-4 and from 1e6). An int and a float of the
  same value print the same (900 and 900.0 are both 900).
- `value`: anything a record holds (ints exactly, floats as `num`, bools yes/no, text as is).
- `pct`: a signed percent change, +0.52%; `ratio_pct`: a cost ratio (below 1 is better) as a
  percent change; `change`: a cost change with its word, -5.02% faster, +3.10% slower (a
  rate metric's values rise as its cost falls: a bare sign misleads); `interval`: a ratio
  interval as percent changes, [-5.9, -4.1].
- `share`: an unsigned share such as % of peak, 3 significant digits: 41.2%.
- `speedup`: 1.234×. `rate`: a rate with an SI prefix, 2.87 TB/s. `size`: bytes, 12.5 KiB.
- `usd`: dollars, $0.0421, $1.23, $1,234; `count`: a count such as tokens, 950, 12.3k, 1.24M.
- `seconds`, `hours`, `clock` (0:42, 1:02:03), `age` (3s, 12m, 3h05m): durations.
- `when` (HH:MM), `timestamp` (YYYY-MM-DD HH:MM:SS TZ): local times.
- `sha`, `one_line`: short text for narrow places.

Whatever is not a finite number prints as `DASH`.
"""

from __future__ import annotations

import math
import time
from typing import TypeGuard

DASH = "—"


def is_num(v: object) -> TypeGuard[int | float]:
    """A finite real number that fits a float (bools are not numbers here)."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond a float's range
        return False


def num(v: object, digits: int = 4) -> str:
    """A metric value to `digits` significant digits (never fewer than its integer digits
    below 1e6), trailing zeros dropped: 10.83, 10.8, 149.1, 12346, 0.01235, 1.235e+07, 0."""
    if not is_num(v):
        return DASH
    digits = max(1, digits)
    x = float(v)
    rounded = float(f"{x:.{digits - 1}e}")  # its magnitude after rounding: 9.99996 is 10.00, not 10.000
    if rounded == 0:
        return "0"
    mag = math.floor(math.log10(abs(rounded)))
    fixed = f"{x:.{max(0, digits - 1 - mag)}f}"
    if mag < -4 or abs(float(fixed)) >= 1e6:
        mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
        return f"{_drop_zeros(mantissa)}e{exponent}"
    return _drop_zeros(fixed)


def _drop_zeros(decimal: str) -> str:
    return decimal.rstrip("0").rstrip(".") if "." in decimal else decimal


def value(v: object) -> str:
    """A value a record holds, whatever its type: ints exactly, floats as `num`, bools
    yes/no, None and NaN as a dash, anything else as its text."""
    if v is None:
        return DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return num(v)
    return str(v)


def pct(v: object, digits: int = 2) -> str:
    """A signed percent change: +0.52%, -5.02%."""
    return f"{float(v):+.{digits}f}%" if is_num(v) else DASH


def change(v: object, digits: int = 2) -> str:
    """A change of cost (time, or the inverse of a rate) in percent, with its word: -5.02%
    faster, +3.10% slower; no word for a change that rounds to zero."""
    if not is_num(v):
        return DASH
    shown = round(float(v), digits)
    word = " faster" if shown < 0 else " slower" if shown > 0 else ""
    return f"{pct(v, digits)}{word}"


def ratio_pct(r: object, digits: int = 2) -> str:
    """A ratio (candidate / best) as a signed percent change: 0.95 -> -5.00%."""
    return pct((float(r) - 1.0) * 100.0, digits) if is_num(r) else DASH


def interval(lo: object, hi: object, digits: int = 1) -> str:
    """A ratio interval as percent changes: (0.941, 0.959) -> [-5.9, -4.1] (one decimal:
    the bounds of an interval are less certain than the change they bracket)."""
    if not (is_num(lo) and is_num(hi)):
        return DASH
    return f"[{(float(lo) - 1) * 100:+.{digits}f}, {(float(hi) - 1) * 100:+.{digits}f}]"


def share(v: object, digits: int = 3) -> str:
    """An unsigned percentage of a whole (e.g. % of the roofline): 41.2%, 100%, 7.12%."""
    return f"{num(v, digits)}%" if is_num(v) else DASH


def speedup(v: object, digits: int = 3) -> str:
    """A speedup factor (above 1 is better): 1.234×."""
    return f"{float(v):.{digits}f}×" if is_num(v) else DASH


SI_PREFIXES = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def rate(v: object, unit: str) -> str:
    """A rate with the SI prefix that keeps it readable: 0.3 GB/s, 2.87 TB/s."""
    if not is_num(v):
        return DASH
    x = float(v)
    for prefix, scale in SI_PREFIXES:
        if abs(x) >= scale:
            return f"{num(x / scale)} {prefix}{unit}"
    return f"{num(x)} {unit}"


def usd(v: object) -> str:
    """Dollars: under a dollar 3 significant digits and at least cents ($0.50, $0.0421,
    $0.000512), cents under $100 ($12.34), whole dollars with thousands separators from
    $100 ($1,234)."""
    if not is_num(v):
        return DASH
    x = float(v)
    if x != 0 and abs(x) < 0.995:
        whole, _, decimals = num(x, 3).partition(".")
        return f"${whole}.{decimals.ljust(2, '0')}"
    return f"${x:,.0f}" if abs(round(x, 2)) >= 100 else f"${x:.2f}"


def count(n: object) -> str:
    """A count for narrow places (tokens): 950, 12.3k, 1.24M, 3.1G (3 significant digits)."""
    if not is_num(n):
        return DASH
    x = float(n)
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale * 0.9995:
            return f"{num(x / scale, 3)}{prefix}"
    return f"{x:.0f}"


def size(n: object) -> str:
    """A size in bytes with a binary prefix: 512 B, 12.5 KiB, 3.2 MiB, 1.1 GiB."""
    if not is_num(n):
        return DASH
    x = float(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(x) >= scale:
            return f"{x / scale:.1f} {unit}"
    return f"{x:.0f} B"


def seconds(v: object, digits: int = 1) -> str:
    """A duration in seconds: 12.3 s."""
    return f"{float(v):.{digits}f} s" if is_num(v) else DASH


def hours(v: object) -> str:
    """A duration given in seconds, written in hours: 1.25 h."""
    return f"{float(v) / 3600:.2f} h" if is_num(v) else DASH


def age(v: object) -> str:
    """How long ago, coarser as it grows (so a stale age re-renders rarely): 3s, 45s, 12m,
    3h05m, 2d4h."""
    if not is_num(v):
        return DASH
    s = max(0.0, float(v))
    if s < 120:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s // 60:.0f}m"
    if s < 86400:
        return f"{s // 3600:.0f}h{(s % 3600) // 60:02.0f}m"
    return f"{s // 86400:.0f}d{(s % 86400) // 3600:.0f}h"


def clock(v: object) -> str:
    """An elapsed or remaining duration: 0:42, 12:03, 1:02:03."""
    if not is_num(v):
        return DASH
    s = int(max(0.0, float(v)) + 0.5)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def when(t: object, now: object = None) -> str:
    """A local wall-clock time: HH:MM on the day of `now` (or when no `now` is given),
    MM-DD HH:MM on another day."""
    if not is_num(t):
        return DASH
    lt = time.localtime(float(t))
    if is_num(now) and time.localtime(float(now))[:3] != lt[:3]:
        return time.strftime("%m-%d %H:%M", lt)
    return time.strftime("%H:%M", lt)


def timestamp(t: object) -> str:
    """A local date and time with its zone: 2025-01-31 14:05:09 CET."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(float(t))) if is_num(t) and t else DASH


def sha(commit: str | None, n: int = 10) -> str:
    """A commit shortened to `n` characters."""
    return commit[:n] if commit else DASH


def one_line(text: object, limit: int = 300) -> str:
    """Text on one line (runs of whitespace become one space), cut at `limit` with an ellipsis."""
    s = " ".join(str(text if text is not None else "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
