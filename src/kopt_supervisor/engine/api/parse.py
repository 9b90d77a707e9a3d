"""The rules by which a client reads a value out of a stored record (pure).

A run's meta and its iteration records are JSON written by whichever kopt ran the run: an
older one may lack a key, hold None, or a string where a number is now. Every typed view of
them (engine.api.run_meta, engine.api.iteration_record, engine.api.status_report) reads
values through these few rules (engine.api.from_mapping applies them to a dataclass's fields
by their types), so a value of the wrong type reads as None, "" or empty, never as an error:

- `number`: a finite real number as a float (bools are not numbers), else None;
- `integer`: an int (not a bool), else None;
- `text`: a string as it is, else "";
- `flag`: a value's truth (true, 1, "yes"; None, false, 0, "" are false);
- `texts`, `integers`: the strings (the ints) of a list or tuple, in order (anything else in
  it is left out);
- `mapping`: a mapping as it is, else an empty one;
- `mappings`: the mappings of a list or tuple, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopt_supervisor.engine import fmt

EMPTY: Mapping[str, Any] = {}


def number(v: object) -> float | None:
    return float(v) if fmt.is_num(v) else None


def integer(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def text(v: object) -> str:
    return v if isinstance(v, str) else ""


def flag(v: object) -> bool:
    return bool(v)


def texts(v: object) -> tuple[str, ...]:
    return tuple(x for x in v if isinstance(x, str)) if isinstance(v, list | tuple) else ()


def integers(v: object) -> tuple[int, ...]:
    return tuple(x for x in v if integer(x) is not None) if isinstance(v, list | tuple) else ()


def mapping(v: object) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else EMPTY


def mappings(v: object) -> tuple[Mapping[str, Any], ...]:
    return tuple(x for x in v if isinstance(x, Mapping)) if isinstance(v, list | tuple) else ()
