"""Reading a stored record back into its dataclass (pure).

Records go to run.db and JSON files as dicts (`dataclasses.asdict`). Read back, a dict may
hold keys a newer or older kopt wrote that the dataclass no longer (or not yet) has: they are
dropped, one rule for every record that loads this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any


def known_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The items of `data` whose keys are fields of the dataclass `cls`."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
