"""Reading and writing kopt.toml.

Loading: the TOML tables walked into the section dataclasses, unknown keys rejected with a
"did you mean" hint (a typo must never silently change a run), every value's type checked
against its field's, then `validate`.

Writing a Config as TOML (`dumps`): the frozen copy in a workspace shows every effective
value, defaults included, and loads back to the same Config.

Pure: reads the one file it is given, returns a `Config`; a Config in, text out.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.config.validate import validate
from kopt_supervisor.engine.errors import BadInput


def load(path: str | Path) -> Config:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    return loads(text, source=str(path))


def loads(text: str, *, source: str = "kopt.toml") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: not valid TOML: {exc}") from None
    cfg = _build(Config, data, source, "")
    validate(cfg, source)
    return cfg


RETIRED = {"profile.agree_margin_pct": "the profiler's agreement is judged per class by intervals"}
"""Keys kopt once read and no longer does: accepted (a run's frozen kopt.toml keeps them),
never used."""


def _build(cls: type, data: Any, source: str, where: str) -> Any:
    if not isinstance(data, dict):
        raise BadInput(f"{source}: [{where}] must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{where}.{key}" if where else key
        if dotted in RETIRED:
            continue
        if key not in fields:
            hint = difflib.get_close_matches(key, fields, n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(fields)})"
            raise BadInput(f"{source}: unknown key {_show(dotted)}{more}")
        typ = hints[key]
        if isinstance(typ, type) and dataclasses.is_dataclass(typ):
            kwargs[key] = _build(typ, value, source, dotted)
        else:
            kwargs[key] = _coerce(value, typ, source, dotted)
    return cls(**kwargs)


def _show(dotted: str) -> str:
    section, _, key = dotted.rpartition(".")
    return f"[{section}].{key}" if section else key


def _coerce(value: Any, typ: Any, source: str, dotted: str) -> Any:
    origin = typing.get_origin(typ)
    args = typing.get_args(typ)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], source, dotted)
    bad = BadInput(f"{source}: {_show(dotted)} must be {_type_name(typ)}, not {value!r}")
    if typ is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        return value
    if typ is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            raise bad
        return value
    if origin is list:
        if not isinstance(value, list):
            raise bad
        (item,) = args
        return [_coerce(v, item, source, f"{dotted}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise bad
        _, item = args
        return {str(k): _coerce(v, item, source, f"{dotted}.{k}") for k, v in value.items()}
    if typ is Any:
        return value
    raise bad  # pragma: no cover - a schema type this function does not know


def _type_name(typ: Any) -> str:
    origin = typing.get_origin(typ)
    if origin is list:
        return "a list"
    if origin is dict:
        return "a table"
    if origin in (types.UnionType, typing.Union):
        return _type_name([a for a in typing.get_args(typ) if a is not type(None)][0])
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(typ, str(typ))


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
