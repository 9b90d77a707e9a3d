"""Markdown pieces the report's sections share (pure): a table cell, inline code, a table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def cell(text: Any, limit: int = 300) -> str:
    """Text for one table cell: pipes escaped, one line, at most `limit` characters."""
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")[:limit]


def code(text: str) -> str:
    """Inline code that survives a backtick inside it."""
    return f"`{text}`" if "`" not in text else f"``{text}``"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align or "---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out
