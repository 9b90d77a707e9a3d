"""Short, stable text for numbers, ages and durations on a narrow terminal (pure)."""

from __future__ import annotations

import math
import time

DASH = "—"


def is_num(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def num(v: object, digits: int = 4) -> str:
    """A metric value with `digits` significant digits: 10.83, 149.1, 0.01234, 1.2e+07."""
    if not is_num(v):
        return DASH
    x = float(v)  # type: ignore[arg-type]
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if mag >= 6 or mag < -4:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


def pct(v: object, digits: int = 2) -> str:
    """A signed percentage: +0.52%, -5.02%."""
    return f"{float(v):+.{digits}f}%" if is_num(v) else DASH  # type: ignore[arg-type]


def ratio_pct(r: object, digits: int = 2) -> str:
    """A cost ratio (below 1 is better) as a signed percent change."""
    return pct((float(r) - 1.0) * 100.0, digits) if is_num(r) else DASH  # type: ignore[arg-type]


def interval(lo: object, hi: object) -> str:
    """A ratio interval as percent changes: [-5.9, -4.1]."""
    if not (is_num(lo) and is_num(hi)):
        return DASH
    return f"[{(float(lo) - 1) * 100:+.1f}, {(float(hi) - 1) * 100:+.1f}]"  # type: ignore[arg-type]


def age(seconds: float | None) -> str:
    """How long ago, coarser as it grows (so a stale age re-renders rarely): 3s, 45s, 12m, 3h05m, 2d4h."""
    if seconds is None or not is_num(seconds):
        return DASH
    s = max(0.0, seconds)
    if s < 120:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s // 60:.0f}m"
    if s < 86400:
        return f"{s // 3600:.0f}h{(s % 3600) // 60:02.0f}m"
    return f"{s // 86400:.0f}d{(s % 86400) // 3600:.0f}h"


def clock(seconds: float | None) -> str:
    """An elapsed or remaining duration: 0:42, 12:03, 1:02:03."""
    if seconds is None or not is_num(seconds):
        return DASH
    s = int(max(0.0, seconds) + 0.5)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def when(t: float | None, now: float | None = None) -> str:
    """A local wall-clock time: HH:MM today, MM-DD HH:MM on another day."""
    if t is None or not is_num(t):
        return DASH
    lt = time.localtime(t)
    if now is not None and time.localtime(now)[:3] != lt[:3]:
        return time.strftime("%m-%d %H:%M", lt)
    return time.strftime("%H:%M", lt)


def sha(commit: str | None, n: int = 10) -> str:
    return commit[:n] if commit else DASH


def one_line(text: object, limit: int = 300) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
