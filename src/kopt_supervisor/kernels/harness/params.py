"""params.json: the Triton meta-parameters a solution launches with, per config class.

Format: {"*": {param: value, ...}, "<class key>": {param: value, ...}, ...}. "*" holds the
values for every class; an entry keyed by a kopt class key (`col=value[,col=value]`, exactly
as kopt's engine.metrics.key_of writes it from the class_by columns) overrides some of them
for that class. A solution resolves `{**p["*"], **p.get(key, {})}` for each call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def format_value(v: Any) -> str:
    """A CSV value as kopt writes it in a key (a float that is an integer loses its ".0")."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def config_key(columns: Mapping[str, Any]) -> str:
    """`col=value,col=value` in the columns' order: kopt's key_of (engine/metrics.py) over a
    row's config columns (the profiler range's name, the audit's choice) or its class_by
    columns (a params.json class key)."""
    return ",".join(f"{c}={format_value(v)}" for c, v in columns.items())


def class_key(**columns: Any) -> str:
    """`col=value,col=value` in the given order (kopt's key_of over the class_by columns)."""
    return config_key(columns)


def load(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read and check a params file; a bad one raises ValueError naming the file and key."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read params: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("*"), dict):
        raise ValueError(f'{path}: params must be a JSON object with a "*" object of defaults')
    for key, value in data.items():
        if not isinstance(value, dict):
            raise ValueError(f"{path}: params entry {key!r} must be an object, not {value!r}")
    return data


def resolve(params: dict[str, dict[str, Any]], key: str) -> dict[str, Any]:
    """The values for one class: the defaults overridden by the class's own entry."""
    return {**params["*"], **params.get(key, {})}


def next_power_of_2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def launch_meta(
    params: dict[str, dict[str, Any]],
    key: str,
    row_len: int,
    max_block: int = 8192,
    *,
    rows: int = 0,
    min_programs: int = 0,
) -> dict[str, Any]:
    """The Triton launch arguments of a row kernel for one class: BLOCK_D (0 = the next power
    of two >= row_len, capped at max_block; never more than that power of two), ROWS (rows per
    program), SINGLE (a row fits in one chunk), num_warps, num_stages. BLOCK_D and ROWS are
    rounded up to powers of two (tl.arange needs them).

    rows, min_programs: a call of `rows` rows keeps at least `min_programs` programs while
    ROWS_PER_PROG allows (halving ROWS): many rows per program suit the shapes models run,
    but a few hundred rows in a handful of programs leave most SMs idle (on the H100 a
    step of ROWS_PER_PROG 2 -> 4 made 462- and 1665-row calls 13-25% slower while the
    production shapes, 10^5 rows and more, got 39% faster)."""
    p = resolve(params, key)
    full = next_power_of_2(row_len)
    block = min(next_power_of_2(int(p["BLOCK_D"])) if int(p["BLOCK_D"]) else min(full, max_block), full)
    per_program = next_power_of_2(int(p["ROWS_PER_PROG"]))
    while per_program > 1 and -(-rows // per_program) < min_programs:
        per_program //= 2
    return {
        "BLOCK_D": block,
        "ROWS": per_program,
        "SINGLE": block >= row_len,
        "num_warps": int(p["num_warps"]),
        "num_stages": int(p["num_stages"]),
    }


PROGRAMS_PER_SM = 4
"""The fewest programs per multiprocessor a row kernel launches while it can (launch_meta's
min_programs): a small call spreads over the whole GPU instead of a few SMs."""


def min_programs(torch: Any, device: Any) -> int:
    """PROGRAMS_PER_SM x the multiprocessors of a CUDA `device`; 0 elsewhere (Triton's
    interpreter runs programs one after another on the CPU: no SMs to fill)."""
    if getattr(device, "type", "cpu") != "cuda":
        return 0
    return PROGRAMS_PER_SM * _multiprocessors(
        torch, device.index if device.index is not None else torch.cuda.current_device()
    )


_SMS: dict[int, int] = {}


def _multiprocessors(torch: Any, index: int) -> int:
    if index not in _SMS:
        _SMS[index] = int(torch.cuda.get_device_properties(index).multi_processor_count)
    return _SMS[index]
