"""Writing a Config as TOML: the frozen copy in a workspace shows every effective value,
defaults included, and loads back to the same Config. Pure: a Config in, text out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kopt_supervisor.engine.config.sections import Config


def dumps(cfg: Config) -> str:
    """TOML text for a Config: every section and key, defaults included."""
    out: list[str] = []
    for f in dataclasses.fields(cfg):
        _dump_table(getattr(cfg, f.name), f.name, out)
    return "\n".join(out).strip() + "\n"


def _dump_table(obj: Any, name: str, out: list[str]) -> None:
    out.append(f"[{name}]")
    nested = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            nested.append((f.name, value))
        elif value is not None:
            out.append(f"{f.name} = {_toml_value(value)}")
    out.append("")
    for key, value in nested:
        _dump_table(value, f"{name}.{key}", out)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def _toml_key(k: str) -> str:
    import re

    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_value(k)
