"""A benchmark shape: its name, the model it comes from, its dimensions and its kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PRODUCTION, REGRESSION, SMALL = "production", "regression", "small"


@dataclass(frozen=True)
class Shape:
    name: str
    model: str
    """Where the shape comes from (a model and resolution), or why it is in the grid."""
    dims: dict[str, Any] = field(default_factory=dict)
    kind: str = PRODUCTION
    """production (GPU bench, counts for the roofline bar), regression (GPU bench, odd
    sizes), small (the CPU interpreter's shapes)."""
