"""Plans that point at evidence: assess_plan against the pack a plan was written from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kopt_supervisor.engine.profile.ncu import NcuProfiler
from kopt_supervisor.engine.propose.context import build_pack
from kopt_supervisor.engine.propose.context_inputs import PackInputs
from kopt_supervisor.engine.propose.proposer import assess_plan

from .helpers import META, cfg_with, history

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = tmp_path_factory.mktemp("ncu")
    shutil.copy(DATA / "ncu_h100_raw.csv", d / "ncu.csv")
    prof = NcuProfiler().parse(d, "kopt_capture").to_dict()
    return json.loads(build_pack(PackInputs(cfg_with(), META, history(prof), 6)).json)


@pytest.fixture(scope="module")
def bare_pack() -> dict:
    return json.loads(build_pack(PackInputs(cfg_with(), META, history(), 6)).json)


def terms(a) -> set[tuple[str, str]]:  # noqa: ANN001 - a PlanAssessment
    return {(c.kind, c.term) for c in a.citations}


def test_a_plan_citing_a_class_a_kernel_and_a_metric(pack: dict) -> None:
    kernel = next(iter(pack["evidence"]["kernels"]))
    plan = (
        f"Raise occupancy of {kernel.split('(')[0]} for dclass = wide by cutting registers\n"
        "target_class: dclass=wide\n\nEvidence: 30 us best, memory-bound at low % of peak.\n"
    )
    a = assess_plan(plan, pack)
    assert a.ok and not a.flags
    assert {
        ("class", "dclass=wide"),
        ("kernel", kernel),
        ("metric", "occupancy"),
        ("metric", "registers"),
        ("metric", "roofline"),
        ("metric", "us"),
    } <= terms(a)
    ev = {c.term: c.evidence for c in a.citations}
    assert "best 30" in ev["dclass=wide"] and "us/launch" in ev[kernel]
    assert json.loads(json.dumps(a.to_dict()))["citations"]


def test_a_plan_citing_nothing_is_accepted_but_flagged(pack: dict) -> None:
    a = assess_plan("Make the kernel faster for us\nscope: global\n", pack)
    assert a.ok and a.flags == ("uncited",) and "names no config class" in a.reason


@pytest.mark.parametrize(
    "plan",
    [
        "",
        "   \n\n",
        "scope: global\n",
        "target_class: dclass=wide\n",
        "#\n",
        "# \nscope: global\n",
    ],
)
def test_an_empty_plan_is_a_failed_proposal(pack: dict, plan: str) -> None:
    a = assess_plan(plan, pack)
    assert not a.ok and "empty" in a.reason


def test_an_unknown_target_class_fails(pack: dict) -> None:
    a = assess_plan("Tile differently\ntarget_class: dclass=huge\n", pack)
    assert not a.ok and "dclass=huge" in a.reason


@pytest.mark.parametrize(
    "plan",
    [
        "Speed up dclass=huge by tiling\nscope: global\n",  # not a class of this bench
        "Speed up the wide class\nscope: global\n",  # a value alone is not the class key
        "Speed up xdclass=wide2 rows\nscope: global\n",  # substrings do not count
        "Make it faster for us\nscope: global\n",  # `us` the word, not the metric
        "Tune kopt_capture_add_kernel_v2 instead\nscope: global\n",  # a different kernel name
        "Improve something\ntarget_class: dclass=wide\n",  # the target line is not evidence
    ],
)
def test_hostile_near_misses_do_not_count_as_citations(pack: dict, plan: str) -> None:
    a = assess_plan(plan, pack)
    assert a.ok and a.flags == ("uncited",), terms(a)


def test_metrics_count_only_when_the_pack_showed_them(bare_pack: dict) -> None:
    a = assess_plan("Raise occupancy by cutting registers\nscope: global\n", bare_pack)  # no profile in this pack
    assert a.flags == ("uncited",)
    a = assess_plan("The wide class is memory-bound at 1% of peak: widen loads\nscope: global\n", bare_pack)
    assert ("metric", "roofline") in terms(a)


def test_no_pack_or_a_broken_one(pack: dict) -> None:
    for bad in (None, "not json", "[1, 2]", {}):
        a = assess_plan("Tile dclass=wide\nscope: global\n", bad)
        assert a.ok and a.flags == ("uncited",) and "no context pack" in a.reason
    a = assess_plan("Tile dclass=wide\nscope: global\n", json.dumps(pack))  # the JSON text works as well
    assert ("class", "dclass=wide") in terms(a)


def test_a_huge_plan_is_read_up_to_its_limit(pack: dict) -> None:
    a = assess_plan("Tile it\n" + "x" * 100_000 + " dclass=wide\n", pack)
    assert a.flags == ("uncited",)  # the citation lies beyond the 20,000 characters kopt reads
