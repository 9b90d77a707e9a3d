"""The rules by which a client reads a value out of a stored record, and `from_mapping`, the
one reader that applies them to a typed view's fields (pure).

A run's meta and its iteration records are JSON written by whichever kopt ran the run: an
older one may lack a key, hold None, or a string where a number is now. Every typed view of
them (api.run_meta, api.iteration_record) reads values through these few rules, so a value of
the wrong type reads as None, "" or empty, never as an error:

- `number`: a finite real number as a float (bools are not numbers), else None;
- `integer`: an int (not a bool), else None;
- `text`: a string as it is, else "";
- `flag`: a value's truth (true, 1, "yes"; None, false, 0, "" are false);
- `texts`, `integers`: the strings (the ints) of a list or tuple, in order (anything else in
  it is left out);
- `mapping`: a mapping as it is, else an empty one;
- `mappings`: the mappings of a list or tuple, in order.

`from_mapping(cls, value)` fills the frozen dataclass `cls` from a mapping, each field by its
annotation under those rules, so a view declares its fields and nothing else:

- `float`, `int`, `str`: `number`, `integer`, a string; `bool`: `flag` (None: not set);
  `Any`: the value as it is;
- `X | None`: X's rule; a nested dataclass only from a non-empty mapping (an empty one: none
  recorded);
- `tuple[X, ...]`: the items of a list or tuple that read as X, in order (a dataclass's from
  the mappings among them);
- a dataclass: `from_mapping` of a mapping; `dict[str, X]` / `Mapping[str, X]`: the str keys
  whose values read as X;
- a key missing, or a value (None included) its rule cannot read: the field's default, else
  its type's empty value (None, "", 0, nan, False, (), {}, or the nested dataclass read from
  nothing).

A field reads its own name, unless its metadata says otherwise (`source`): another key, a
path of keys into nested mappings (() for the record itself), or its own conversion of the
raw value (None when missing), which replaces the type's rule. A value that is not a mapping
reads as an empty one; an annotation no rule covers is a TypeError (a view's mistake, found
on its first reading, not a record's).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

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


T = TypeVar("T")

_KEY = "from_mapping.key"
_READ = "from_mapping.read"
_UNREAD: Any = object()
"""A key the record lacks, or what a rule returns for a value it cannot read: the field's
default takes its place."""

_Rule = Callable[[object], Any]


def source(
    key: str | tuple[str, ...] | None = None, read: Callable[[Any], object] | None = None
) -> Mapping[str, object]:
    """A field's metadata (`dataclasses.field(metadata=source(...))`): the record's key for it
    when it is not the field's name (a tuple: a path into nested mappings; (): the record
    itself), and `read`, the conversion of that raw value where the type's rule is not it."""
    return {_KEY: key, _READ: read}


def from_mapping(cls: type[T], value: object) -> T:
    """`cls` (a dataclass) read from `value` by its fields' annotations; never raises on data."""
    m = mapping(value)
    return cls(**{name: read(m) for name, read in _readers(cls)})


_FieldReader = Callable[[Mapping[str, Any]], object]
_READERS: dict[type, tuple[tuple[str, _FieldReader], ...]] = {}
"""Per dataclass, its fields' readers, built on its first reading."""


def _readers(cls: type) -> tuple[tuple[str, _FieldReader], ...]:
    if (readers := _READERS.get(cls)) is None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"from_mapping reads dataclasses, not {cls!r}")
        hints = typing.get_type_hints(cls)
        readers = tuple((f.name, _field_reader(f, hints[f.name])) for f in dataclasses.fields(cls) if f.init)
        _READERS[cls] = readers
    return readers


def _field_reader(f: dataclasses.Field[Any], tp: object) -> _FieldReader:
    key = f.metadata.get(_KEY)
    path: tuple[str, ...] = (f.name,) if key is None else (key,) if isinstance(key, str) else tuple(key)
    convert: Callable[[Any], object] | None = f.metadata.get(_READ)

    def raw(m: Mapping[str, Any]) -> Any:
        v: Any = m
        for k in path:
            v = mapping(v).get(k, _UNREAD)
        return v

    if convert is not None:
        conv = convert
        return lambda m: conv(None if (v := raw(m)) is _UNREAD else v)
    rule = _rule(tp)
    default = _default(f, tp)
    scalar = _SCALARS.get(_optional(tp) or tp)
    if scalar is not None and len(path) == 1:  # most fields: one key, a scalar (the quick way)
        key1, fixed = path[0], default()  # a scalar's default is immutable: read once

        def read_scalar(m: Mapping[str, Any]) -> object:
            v = m.get(key1)
            return fixed if v is None or (v := scalar(v)) is None else v

        return read_scalar
    get = raw if len(path) != 1 else lambda m, k=path[0]: m.get(k, _UNREAD)

    def read(m: Mapping[str, Any]) -> object:
        v = get(m)
        if v is not _UNREAD:
            v = rule(v)
        return default() if v is _UNREAD else v

    return read


def _default(f: dataclasses.Field[Any], tp: object) -> Callable[[], object]:
    if f.default is not dataclasses.MISSING:
        value = f.default
        return lambda: value
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory
    return _empty(tp)


def _optional(tp: object) -> object | None:
    """X of `X | None` (None when `tp` is not an optional of one type)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return None


def _empty(tp: object) -> Callable[[], object]:
    """What a field without a default holds when its key is missing or damaged."""
    if _optional(tp) is not None or tp is Any:
        return lambda: None
    origin = typing.get_origin(tp) or tp
    empties: dict[object, Callable[[], object]] = {
        str: str,
        int: int,
        float: lambda: math.nan,
        bool: bool,
        tuple: tuple,
        dict: dict,
        Mapping: dict,
    }
    if origin in empties:
        return empties[origin]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        nested = tp
        return lambda: from_mapping(nested, EMPTY)
    raise TypeError(f"from_mapping has no rule for {tp!r}")


def _rule(tp: object) -> _Rule:
    """The reading of one value of type `tp`: the value, or _UNREAD."""
    inner = _optional(tp)
    if inner is not None:
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            nested = inner
            return lambda v: from_mapping(nested, v) if isinstance(v, Mapping) and v else _UNREAD
        return _rule(inner)
    if tp is Any:
        return lambda v: v
    if tp in _SCALARS:
        scalar = _SCALARS[tp]
        return lambda v: _UNREAD if (x := scalar(v)) is None else x
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        nested = tp
        return lambda v: from_mapping(nested, v) if isinstance(v, Mapping) else _UNREAD
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _rule(args[0])
        return lambda v: tuple(x for x in map(item, v) if x is not _UNREAD) if isinstance(v, list | tuple) else _UNREAD
    if origin in (dict, Mapping) and len(args) == 2 and args[0] is str:
        item = _rule(args[1])
        return lambda v: (
            {k: x for k, x in ((k, item(y)) for k, y in v.items() if isinstance(k, str)) if x is not _UNREAD}
            if isinstance(v, Mapping)
            else _UNREAD
        )
    raise TypeError(f"from_mapping has no rule for {tp!r}")


_SCALARS: dict[object, Callable[[object], object]] = {
    float: number,
    int: integer,
    str: lambda v: v if isinstance(v, str) else None,
    bool: lambda v: None if v is None else flag(v),
}
