"""kopt range names: parsing, and which config a range stands for (none, one, or several)."""

from __future__ import annotations

import pytest

from kopt_supervisor.engine.profile.classes import ConfigRef, RangeMatcher, config_refs, parse_range, range_name

COLS = ["dclass", "n", "dtype", "name"]
REFS = [
    ConfigRef("dclass=narrow,n=1024,dtype=bf16", "dclass=narrow", {"dclass": "narrow", "n": 1024, "dtype": "bf16"}),
    ConfigRef("dclass=narrow,n=2048,dtype=bf16", "dclass=narrow", {"dclass": "narrow", "n": 2048.0, "dtype": "bf16"}),
    ConfigRef("dclass=wide,n=4096,dtype=bf16", "dclass=wide", {"dclass": "wide", "n": 4096, "dtype": "bf16"}),
]


def test_parse_range_reads_pairs_and_values_with_commas():
    assert parse_range("kopt:dclass=narrow,n=1024", COLS) == [("dclass", "narrow"), ("n", "1024")]
    # a value holding a comma (and even "=") continues until the next known column
    assert parse_range("kopt:name=a,b=c,n=3", COLS) == [("name", "a,b=c"), ("n", "3")]


@pytest.mark.parametrize(
    "name, message",
    [
        ("dclass=narrow", "no 'kopt:' prefix"),
        ("KOPT:dclass=narrow", "no 'kopt:' prefix"),
        ("kopt:", "names no col=value pair"),
        ("kopt:::launch", "names no col=value pair"),
        ("kopt:batch=3", "names column 'batch', which no config has"),
        ("kopt:n=1,n=2", "names column 'n' twice"),
    ],
)
def test_parse_range_rejects_what_is_not_a_kopt_range_name(name, message):
    with pytest.raises(ValueError, match=message):
        parse_range(name, COLS)


def test_range_name_writes_values_as_the_metrics_module_does():
    # 2048.0 is written "2048", as metrics.format_value writes it in config keys
    assert range_name(REFS[1].row, ["dclass", "n"]) == "kopt:dclass=narrow,n=2048"
    assert range_name({"x": 0.5, "s": "a b"}, ["x", "s"]) == "kopt:x=0.5,s=a b"


def test_matcher_finds_the_single_config_whose_columns_match_every_pair():
    m = RangeMatcher(REFS)
    assert m.match("kopt:dclass=narrow,n=2048,dtype=bf16") == (REFS[1], "")
    # a bench may name only the columns that identify a config, in any order
    assert m.match("kopt:n=2048") == (REFS[1], "")
    assert m.match("kopt:n=4096,dclass=wide")[0] is REFS[2]


@pytest.mark.parametrize(
    "name, why",
    [
        ("kopt:dclass=narrow", "matches 2 configs (dclass=narrow,n=1024,dtype=bf16; dclass=narrow,n=2048"),
        ("kopt:dclass=narrow,n=4096", "matches no config"),
        ("kopt:n=2048.0", "matches no config"),  # values must be written as format_value writes them
        ("kopt:n=1024,batch=3", "matches no config"),  # "batch=3" is read as part of n's value
        ("kopt:batch=3", "names column 'batch', which no config has"),
        ("dclass=narrow,n=1024", "not a kopt range name"),
    ],
)
def test_matcher_says_why_a_range_stands_for_no_single_config(name, why):
    ref, reason = RangeMatcher(REFS).match(name)
    assert ref is None and why in reason and name in reason


def test_config_refs_reads_the_iteration_record():
    record = {"dclass=wide,n=4096": {"cls": "dclass=wide", "production": True, "row": {"dclass": "wide", "n": 4096}}}
    (ref,) = config_refs(record)
    assert ref == ConfigRef("dclass=wide,n=4096", "dclass=wide", {"dclass": "wide", "n": 4096})
    # the decision's voting classes (the guard class of non-production configs) win
    (guarded,) = config_refs(record, class_of={"dclass=wide,n=4096": "guard (non-production)"})
    assert guarded.cls == "guard (non-production)" and guarded.row == ref.row
