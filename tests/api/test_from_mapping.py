"""engine.records.from_mapping: the one reader behind the typed views, on dataclasses of its own:
each annotated type's rule, defaults for what is missing or damaged, nested dataclasses,
tuples of them, mappings, None, and the per-field `source` overrides."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine.records import AgentRun, from_mapping, source


@dataclass(frozen=True)
class Leaf:
    n: int
    s: str = "dflt"


@dataclass(frozen=True)
class Scalars:
    f: float | None = None
    i: int | None = None
    s: str | None = None
    b: bool | None = None
    f0: float = 1.5
    i0: int = 7
    s0: str = "seven"
    on: bool = True
    off: bool = False


@dataclass(frozen=True)
class Required:
    """No defaults: what a missing or damaged key reads as is the type's empty value."""

    f: float
    i: int
    s: str
    b: bool
    t: tuple[str, ...]
    d: dict[str, int]
    leaf: Leaf
    opt: Leaf | None
    anything: Any


@dataclass(frozen=True)
class Nested:
    leaf: Leaf = Leaf(-1)
    maybe: Leaf | None = None
    leaves: tuple[Leaf, ...] = ()
    names: tuple[str, ...] = ("x",)
    counts: tuple[int, ...] = ()
    ratios: tuple[float, ...] = ()
    by_name: dict[str, Leaf] = field(default_factory=dict)
    figures: Mapping[str, Any] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=lambda: {"w": 1.0})


@dataclass(frozen=True)
class Anything:
    value: Any = "default"


@dataclass(frozen=True)
class Sourced:
    cls: str = field(default="", metadata=source("class"))
    beat: float | None = field(default=None, metadata=source(("heartbeat", "t")))
    kind: str = field(default="none", metadata=source(("answer", "kind")))
    keys: tuple[str, ...] = field(default=(), metadata=source((), read=lambda m: tuple(sorted(m))))
    seen: Any = field(default="unused", metadata=source("x", read=lambda v: ("got", v)))


@dataclass(frozen=True)
class Unsupported:
    pair: tuple[int, str] = (0, "")


@dataclass(frozen=True)
class UnsupportedUnion:
    either: int | str | None = None


@dataclass(frozen=True)
class UnsupportedRequired:
    cell: set[int]


def test_each_scalar_reads_by_its_rule_else_its_default():
    good = from_mapping(Scalars, {"f": 2, "i": 3, "s": "a", "b": False, "f0": 0.25, "i0": 0, "s0": "", "on": False})
    assert good == Scalars(2.0, 3, "a", False, 0.25, 0, "", False, False)
    assert type(good.f) is float  # an int number reads as a float
    damaged = {
        "f": True,  # a bool is not a number
        "i": 3.0,  # nor an integral float an int
        "s": 5,
        "f0": math.inf,  # not finite
        "i0": "7",
        "s0": None,
        "on": None,  # None does not clear a flag: the default stands
    }
    assert from_mapping(Scalars, damaged) == Scalars()
    assert from_mapping(Scalars, {"f": "1.5", "i": False, "f0": math.nan}) == Scalars()
    flags = from_mapping(Scalars, {"b": "yes", "on": 0, "off": 1})
    assert (flags.b, flags.on, flags.off) == (True, False, True)  # a flag is the value's truth


def test_missing_keys_take_the_defaults_and_a_non_mapping_reads_as_empty():
    for value in ({}, None, "scalars", 3, ["f", 1.0], {"unknown": 1}):
        assert from_mapping(Scalars, value) == Scalars()
    assert from_mapping(Nested, None) == Nested()


def test_without_a_default_a_field_holds_its_types_empty_value():
    for value in ({}, {k: object() for k in ("f", "i", "s", "t", "d", "leaf", "opt")}):
        r = from_mapping(Required, value)
        assert math.isnan(r.f) and (r.i, r.s, r.t, r.d, r.opt) == (0, "", (), {}, None)
        assert r.leaf == Leaf(0, "dflt")  # the nested dataclass read from nothing
    assert from_mapping(Required, {}).b is False and from_mapping(Required, {}).anything is None


def test_any_takes_the_value_as_it_is_none_included():
    assert from_mapping(Anything, {}).value == "default" and from_mapping(Anything, {"value": None}).value is None
    assert from_mapping(Required, {"anything": None}).anything is None
    assert from_mapping(Required, {"anything": [1, "x"]}).anything == [1, "x"]
    assert from_mapping(Nested, {"figures": {"a": None, "b": {"c": 1}}}).figures == {"a": None, "b": {"c": 1}}


def test_nested_dataclasses():
    n = from_mapping(Nested, {"leaf": {"n": 4, "s": 9}, "maybe": {"n": 5, "s": "m"}})
    assert n.leaf == Leaf(4) and n.maybe == Leaf(5, "m")
    assert from_mapping(Nested, {"leaf": {}}).leaf == Leaf(0)  # a mapping, even empty: read
    assert from_mapping(Nested, {"leaf": "4"}).leaf == Leaf(-1)  # not a mapping: the default
    for nothing in ({}, None, "x", [{"n": 1}], 5):  # an optional: only a non-empty mapping
        assert from_mapping(Nested, {"maybe": nothing}).maybe is None
    assert from_mapping(Nested, {"maybe": {"junk": 1}}).maybe == Leaf(0)


def test_tuples_keep_the_items_that_read_in_order():
    n = from_mapping(
        Nested,
        {
            "leaves": [{"n": 1}, None, "x", {}, {"n": True, "s": "t"}, [{"n": 9}]],
            "names": ("a", 1, None, "b"),
            "counts": [1, True, 2.0, "3", 4],
            "ratios": [1, 0.5, math.nan, False, "0.1"],
        },
    )
    assert n.leaves == (Leaf(1), Leaf(0), Leaf(0, "t"))  # the mappings, each read by its rules
    assert (n.names, n.counts, n.ratios) == (("a", "b"), (1, 4), (1.0, 0.5))
    for damaged in ("ab", {"a": 1}, 3, None):  # not a list or tuple: the default
        assert from_mapping(Nested, {"names": damaged, "leaves": damaged}) == Nested()
    assert from_mapping(Nested, {"names": []}).names == ()  # an empty list is a value


def test_mappings_of_str_keep_the_entries_that_read():
    n = from_mapping(Nested, {"by_name": {"a": {"n": 1}, "b": "x", 3: {"n": 2}, "c": {}}})
    assert n.by_name == {"a": Leaf(1), "c": Leaf(0)}
    assert from_mapping(Nested, {"by_name": [("a", {"n": 1})]}).by_name == {}
    a, b = from_mapping(Nested, {}), from_mapping(Nested, {})
    assert a.by_name == {} and a.by_name is not b.by_name  # a default_factory's, fresh each time
    assert a.weights == {"w": 1.0} and from_mapping(Nested, {"weights": "heavy"}).weights == {"w": 1.0}
    assert from_mapping(Nested, {"weights": {"w": 2, "v": "x"}}).weights == {"w": 2.0}


def test_source_renames_walks_paths_and_converts():
    s = from_mapping(
        Sourced,
        {"cls": "ignored", "class": "cls=a", "heartbeat": {"t": 5}, "answer": {"kind": "accept"}, "x": 0},
    )
    assert (s.cls, s.beat, s.kind, s.seen) == ("cls=a", 5.0, "accept", ("got", 0))
    assert s.keys == ("answer", "class", "cls", "heartbeat", "x")  # (): the record itself
    d = from_mapping(Sourced, {"class": 3, "heartbeat": "now", "answer": "accept"})
    assert (d.cls, d.beat, d.kind) == ("", None, "none")  # a path through a non-mapping: the default
    assert from_mapping(Sourced, {}).seen == ("got", None)  # a conversion sees None for a missing key
    assert from_mapping(Sourced, {"x": None}).seen == ("got", None)  # and its result stands as it is


def test_what_no_rule_covers_is_a_type_error_not_a_reading():
    with pytest.raises(TypeError, match="no rule"):
        from_mapping(Unsupported, {"pair": [1, "a"]})
    with pytest.raises(TypeError, match="no rule"):
        from_mapping(UnsupportedUnion, {"either": 1})
    with pytest.raises(TypeError, match="no rule"):
        from_mapping(UnsupportedRequired, {})
    with pytest.raises(TypeError, match="dataclasses"):
        from_mapping(dict, {})


# ---------------------------------------------------------------------------------------
# The views' choices that the reader's rules make


def test_an_empty_mapping_records_no_nested_part():
    assert api.run_meta({"live_classes": {}}).live_classes is None and api.live_step({}) is None
    assert api.lane_state({"gpu": {}}).gpu is None and api.lane_state({"gpu": {"index": 1}}).gpu == api.GpuRef(1)
    assert api.status_report({"timings": {"last": {}}}).timings.last is None
    assert api.status_report({"decision_cost": {}}).decision_cost is None


def test_an_agent_run_reads_every_field_of_its_record():
    run = AgentRun("codex", 0.1, 7, 3, session_started=2, turns=4, is_error=False, model="m")
    (labelled,) = api.agent_runs({"proposal": {"agent": run.to_dict()}})
    assert labelled.run == run
    odd = api.agent_runs({"proposal": {"agent": {"turns": 4.0, "transcript_bytes": 10.7, "transcript_cut": 1}}})
    assert (odd[0].run.turns, odd[0].run.transcript_bytes, odd[0].run.transcript_cut) == (None, 10, False)
