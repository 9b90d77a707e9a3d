"""Reading what an agent printed, defensively: numbers only when finite and non-negative
(anything else dropped and noted), session ids only in a shape safe to hand back to a CLI,
JSON objects line by line in bounded memory. The helpers of the per-CLI parsers (`parsers`).
Pure.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any


def _num(value: Any) -> float | None:
    """A finite number >= 0, or None (bools, strings, NaN, negatives are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and v >= 0 else None


def _int(value: Any) -> int | None:
    v = _num(value)
    return None if v is None else int(v)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) and value.strip() else None


SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}")


def valid_session_id(value: Any) -> bool:
    """A session id kopt will hand back to a CLI: letters, digits and `._:@+=-`, not
    starting with `-` (a value like `--dangerously-skip-permissions` would be read as a
    flag by the next iteration's command line), at most 128 characters."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


def _sid(value: Any) -> str | None:
    return value if valid_session_id(value) else None


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else a + b


class _Notes:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> None:
        if text not in self.items and len(self.items) < 10:
            self.items.append(text)

    def checked(self, what: str, raw: Any, value: float | int | None) -> None:
        if raw is not None and value is None:
            self.add(f"ignored {what} = {str(raw)[:40]!r} (not a finite number >= 0)")


def _json_objects(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


WHOLE_MAX_BYTES = 4 * 2**20


class _Scan:
    """One pass over a CLI's output: the JSON object of each line, and (up to
    WHOLE_MAX_BYTES) the whole text, for an output that is one pretty-printed JSON document.
    Nothing else is kept, so a transcript of any size parses in bounded memory."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = lines
        self._raw: list[str] | None = []
        self._size = 0

    def objects(self) -> Iterator[dict[str, Any]]:
        for line in self._lines:
            if self._raw is not None:
                self._size += len(line)
                if self._size > WHOLE_MAX_BYTES:
                    self._raw = None
                else:
                    self._raw.append(line)
            yield from _json_objects([line])

    def whole(self) -> dict[str, Any] | None:
        """The output as one JSON object, if it is one (call after `objects` is consumed)."""
        if self._raw is None:
            return None
        text = "".join(self._raw).strip()
        if not text.startswith("{"):
            return None
        try:
            obj = json.loads(text)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None
