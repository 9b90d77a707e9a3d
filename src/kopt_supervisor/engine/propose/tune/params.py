"""The tune proposer's params file: `{"*": {param: value}, "<class key>": {param: value}}`
read and checked, written back with minimal diffs, a class's point read from it and a move
written into it. Pure: text in, text out.
"""

from __future__ import annotations

import json
from typing import Any

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.propose.tune.points import Point, same

ALL = "*"
"""The params file's entry that holds every class's values."""


def load_params(text: str, name: str) -> dict[str, dict[str, Any]]:
    """Parse and check a params file's text; BadInput names the file and the key at fault."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{name}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get(ALL), dict):
        raise BadInput(
            f'{name}: must be a JSON object with a "*" entry holding every class\'s params '
            '(e.g. {"*": {"num_warps": 4}})'
        )
    for key, entry in data.items():
        if not isinstance(entry, dict):
            raise BadInput(f"{name}: entry {key!r} must be an object of param values, not {type(entry).__name__}")
        for param, value in entry.items():
            if isinstance(value, (dict, list)) or value is None:
                raise BadInput(f"{name}: {key!r}.{param} must be a number, string or bool, not {json.dumps(value)}")
    return data


def dump_params(params: dict[str, dict[str, Any]]) -> str:
    """The params file's text: sorted keys, indent 2, a trailing newline (minimal diffs)."""
    return json.dumps(params, indent=2, sort_keys=True) + "\n"


def point_of(params: dict[str, dict[str, Any]], cls: str | None, space: dict[str, list[Any]], name: str) -> Point:
    """The values of the space's params that `cls` (None: "*") runs with."""
    values = {**params[ALL], **(params.get(cls, {}) if cls else {})}
    missing = [p for p in space if p not in values]
    if missing:
        where = f'"*" or {cls!r}' if cls else '"*"'
        raise BadInput(f"{name}: {where} has no value for {', '.join(missing)} (named in [propose.tune].space)")
    return {p: values[p] for p in space}


def apply_point(
    params: dict[str, dict[str, Any]], cls: str | None, changed: dict[str, tuple[Any, Any]]
) -> dict[str, dict[str, Any]]:
    """A copy of the params with the changes made to "*" (cls None) or to cls's entry; an
    override equal to the "*" value is dropped (the kernel runs the same either way)."""
    out = {k: dict(v) for k, v in params.items()}
    if cls is None:
        for p, (_, new) in changed.items():
            out[ALL][p] = new
        return out
    entry = out.setdefault(cls, {})
    for p, (_, new) in changed.items():
        if p in out[ALL] and same(out[ALL][p], new):
            entry.pop(p, None)
        else:
            entry[p] = new
    if not entry:
        del out[cls]
    return out
