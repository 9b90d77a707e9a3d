"""engine/decide/audit.py: the served look's audit rule, the file's reading, and the
comparison of the candidate's audited outputs with best's."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from kopt_supervisor.engine.decide import audit
from kopt_supervisor.engine.decide.audit import ConfigAudit, OutputSummary
from kopt_supervisor.engine.metrics import BenchError

SERVE = Path(__file__).resolve().parents[1] / "fake_target" / "serve.py"
COLUMNS = ("shape", "cls", "n")


def served_audit(tmp_path: Path, kernel: dict, look_seed: int, audit_seed: int) -> str:
    """The fake server's audit of one look (its own implementation of the rule)."""
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "kernel.json").write_text(json.dumps(kernel))
    out = tmp_path / "a.json"
    requests = f"look 0 {look_seed} {tmp_path / 'a.csv'}\naudit 0 {audit_seed} {out}\n"
    subprocess.run(
        [sys.executable, str(SERVE), "--serve"],
        cwd=tree,
        input=requests,
        text=True,
        check=True,
        capture_output=True,
        env={"FAKE_CALLS": "1", "PATH": "/usr/bin:/bin"},
    )
    return out.read_text()


def summary(values: list[float], positions: tuple[int, ...], **kw: float) -> OutputSummary:
    finite = [v for v in values if math.isfinite(v)]
    return OutputSummary(
        numel=len(values),
        nan=sum(math.isnan(v) for v in values),
        inf=sum(math.isinf(v) for v in values),
        sum=kw.get("sum", math.fsum(values) if len(finite) == len(values) else math.nan),
        abs_sum=kw.get("abs_sum", math.fsum(abs(v) for v in values)),
        samples=tuple((i, values[i]) for i in positions),
    )


def config(values: list[float], seed: int = 5, key: str = "n=8", sets: int = 4, **kw: float) -> ConfigAudit:
    chosen, (positions,) = audit.choices(seed, key, sets, [len(values)])
    return ConfigAudit((("n", 8),), sets, chosen, 1e-3, 1e-3, (summary(values, positions, **kw),))


def test_the_fake_server_and_kopt_draw_the_same_set_and_positions(tmp_path):
    text = served_audit(tmp_path, {"speed": {"small": 1.0, "large": 1.0}}, look_seed=11, audit_seed=987654321)
    got = audit.parse(text, COLUMNS, "a.json")
    assert sorted(got) == [
        "shape=s0,cls=small,n=128",
        "shape=s1,cls=small,n=256",
        "shape=s2,cls=large,n=4096",
        "shape=s3,cls=large,n=8192",
    ]
    for key, a in got.items():
        assert audit.rule_problem(a, 987654321, key) is None
        assert audit.rule_problem(a, 987654322, key) is not None  # another seed picks other positions
        assert len(a.outputs[0].samples) == 64
    # the same look seed gives the same outputs in another process: best and candidate agree
    again = audit.parse(
        served_audit(tmp_path, {"speed": {"small": 0.5, "large": 2.0}}, 11, 987654321), COLUMNS, "b.json"
    )
    assert all(audit.compare(got[k], again[k]) is None for k in got)


@pytest.mark.parametrize(
    "knob, words",
    [
        ("wrong", "is "),
        ("nan", "NaN"),
        ("steal_reference", "is "),
        ("half_rows", "is "),
    ],
)
def test_a_hostile_candidates_audit_differs_from_best(tmp_path, knob, words):
    speed = {"speed": {"small": 1.0, "large": 1.0}}
    best = audit.parse(served_audit(tmp_path, speed, 3, 42), COLUMNS, "best.json")
    cand = audit.parse(served_audit(tmp_path, {**speed, knob: True}, 3, 42), COLUMNS, "cand.json")
    for key in best:
        assert audit.rule_problem(cand[key], 42, key) is None  # it follows the rule: its values are wrong
        why = audit.compare(best[key], cand[key])
        assert why is not None and words in why, why


def test_each_sample_within_bests_tolerance_passes_and_beyond_it_fails():
    values = [0.5, -1.0, 2.0, 0.0, 1.5, -0.25, 3.0, 1.0]
    best = config(values)
    tol = [1e-3 + 1e-3 * abs(v) for v in values]
    near = config([v + 0.9 * t for v, t in zip(values, tol, strict=True)])
    assert audit.compare(best, near) is None
    i = best.outputs[0].samples[2][0]
    off = list(values)
    off[i] += 1.5 * tol[i]
    why = audit.compare(best, config(off))
    assert why is not None and f"output 0[{i}] is {off[i]!r}, best's {values[i]!r}" in why


def test_sums_catch_what_the_samples_miss():
    values = [1.0] * 8
    best = config(values, sets=1)
    # the samples agree (every value sampled is 1.0), the sum says the output differs
    why = audit.compare(best, config(values, sets=1, sum=6.0))
    assert why is not None and "sum is 6.0, best's 8.0" in why
    why = audit.compare(best, config(values, sets=1, abs_sum=9.0))
    assert why is not None and "sum of |x|" in why
    assert audit.compare(best, config(values, sets=1, sum=8.0 + 8 * 1e-3)) is None  # n*atol + rtol*abs_sum


def test_nan_inf_and_shapes():
    values = [0.5] * 8
    best = config(values)
    nan = list(values)
    nan[3] = math.nan
    assert "1 NaN value(s), best's 0" in (audit.compare(best, config(nan)) or "")
    inf = list(values)
    inf[3] = math.inf
    assert "1 Inf value(s), best's 0" in (audit.compare(best, config(inf)) or "")
    assert "holds 7 elements, best's 8" in (audit.compare(best, config(values[:7])) or "")
    assert "3 timed buffer sets, best's 4" in (audit.compare(best, config(values, sets=3)) or "")


def test_the_rule_is_checked_set_and_positions():
    values = [float(i) for i in range(8)]
    good = config(values, seed=9)
    assert audit.rule_problem(good, 9, "n=8") is None
    other_set = ConfigAudit(good.config, good.sets, (good.set + 1) % good.sets, 1e-3, 1e-3, good.outputs)
    assert "the seed picks set" in (audit.rule_problem(other_set, 9, "n=8") or "")
    moved = OutputSummary(8, 0, 0, 28.0, 28.0, tuple((min(7, i + 1), v) for i, v in good.outputs[0].samples))
    bad = ConfigAudit(good.config, good.sets, good.set, 1e-3, 1e-3, (moved,))
    assert "sampled position" in (audit.rule_problem(bad, 9, "n=8") or "")
    # the key is part of the rule: another config's name picks another draw
    assert audit.choices(9, "n=8", 1000, [10**6]) != audit.choices(9, "n=16", 1000, [10**6])


@pytest.mark.parametrize(
    "text, words",
    [
        ("not json", "not JSON"),
        ('{"version": 2, "configs": []}', "not an audit of version 1"),
        (
            '{"version": 1, "configs": [{"config": {"shape": "s0", "cls": "a"}, "sets": 1, "set": 0, "atol": 0, "rtol": 0,'
            ' "outputs": [{"numel": 1, "nan": 0, "inf": 0, "sum": 0, "abs_sum": 0, "samples": [[0, 0]]}]}]}',
            "config lacks column 'n'",
        ),
        (
            '{"version": 1, "configs": [{"config": {"shape": "s0", "cls": "a", "n": 1}, "sets": 1, "set": 1, "atol": 0,'
            ' "rtol": 0, "outputs": []}]}',
            "set 1 is not one of its 1 sets",
        ),
        (
            '{"version": 1, "configs": [{"config": {"shape": "s0", "cls": "a", "n": 1}, "sets": 1, "set": 0, "atol": 0,'
            ' "rtol": 0, "outputs": [{"numel": true, "nan": 0, "inf": 0, "sum": 0, "abs_sum": 0, "samples": []}]}]}',
            "'numel' must be an integer",
        ),
        (
            '{"version": 1, "configs": [{"config": {"shape": "s0", "cls": "a", "n": 1}, "sets": 1, "set": 0, "atol": NaN,'
            ' "rtol": 0, "outputs": [{"numel": 1, "nan": 0, "inf": 0, "sum": 0, "abs_sum": 0, "samples": []}]}]}',
            "atol and rtol must be finite",
        ),
    ],
)
def test_a_broken_audit_file_is_a_bench_error_naming_it(text, words):
    with pytest.raises(BenchError, match="cand.json") as e:
        audit.parse(text, COLUMNS, "cand.json")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_config_audited_twice_is_refused():
    entry = {
        "config": {"shape": "s0", "cls": "a", "n": 1},
        "sets": 1,
        "set": 0,
        "atol": 0,
        "rtol": 0,
        "outputs": [{"numel": 1, "nan": 0, "inf": 0, "sum": 0, "abs_sum": 0, "samples": [[0, 0]]}],
    }
    with pytest.raises(BenchError, match="audited twice"):
        audit.parse(json.dumps({"version": 1, "configs": [entry, entry]}), COLUMNS, "x.json")


# -- the look's commitment to every timed set ----------------------------------------------------


def committed(*sets: list[float]) -> tuple[tuple[OutputSummary, ...], ...]:
    return tuple((summary(values, ()),) for values in sets)


def test_the_fake_servers_commitment_holds_each_set_and_the_audited_one_matches(tmp_path):
    text = served_audit(tmp_path, {"speed": {"small": 1.0, "large": 1.0}}, look_seed=11, audit_seed=77)
    promise = audit.parse_commitment((tmp_path / "a.csv.sets.json").read_text(), COLUMNS, "a.csv.sets.json")
    got = audit.parse(text, COLUMNS, "a.json")
    assert sorted(promise) == sorted(got)
    for key, a in got.items():
        assert len(promise[key]) == a.sets and audit.commitment_problem(a, promise[key]) is None
        assert all(o.samples == () for outs in promise[key] for o in outs)
    # the same seed in another process: the same promise; a wrong kernel's differs from best's
    (tmp_path / "b").mkdir()
    served_audit(tmp_path / "b", {"speed": {"small": 1.0, "large": 1.0}, "wrong": True}, 11, 77)
    wrong = audit.parse_commitment((tmp_path / "b" / "a.csv.sets.json").read_text(), COLUMNS, "b")
    key = next(iter(promise))
    why = audit.compare_sets(promise[key], wrong[key], 1e-6, 1e-6)
    assert why is not None and why.startswith("timed set 0 (committed with the look): output 0's sum is ")


def test_an_audited_set_other_than_its_promise_fails_and_tiny_rounding_does_not():
    values = [0.5, -1.25, 3.0, 2.0, 0.125, -0.5, 1.0, 4.0]
    a = config(values, sets=3)
    promise = committed(*([values] * 3))
    assert audit.commitment_problem(a, promise) is None
    # another reduction order: sums a few ulps off
    ulps = tuple(
        (OutputSummary(8, 0, 0, math.fsum(values) * (1 + 4e-16), math.fsum(map(abs, values)), ()),) for _ in range(3)
    )
    assert audit.commitment_problem(a, ulps) is None
    zeros = committed(*([[0.0] * 8] * 3))  # promised before the seed, computed after it
    why = audit.commitment_problem(a, zeros)
    assert why is not None and "the look committed 0.0 (outputs changed after the look)" in why
    assert "committed 2" in (audit.commitment_problem(a, committed(values, values)) or "")
    nan = committed(*([[math.nan] + values[1:]] * 3))
    assert "the audit shows 8 elements, 0 NaN, 0 Inf; the look committed 8, 1, 0" in (
        audit.commitment_problem(a, nan) or ""
    )


def test_sets_compared_one_by_one_with_bests_tolerance():
    base = [1.0] * 8
    best = committed(base, base, base)
    assert audit.compare_sets(best, committed(base, base, [1.0 + 1e-5] * 8), 1e-3, 1e-3) is None
    far = audit.compare_sets(best, committed(base, base, [1.5] * 8), 1e-3, 1e-3)
    assert far is not None and far.startswith("timed set 2 (committed with the look): output 0's sum")
    assert "holds 1 NaN value(s), best's 0" in (
        audit.compare_sets(best, committed(base, [math.nan] + base[1:], base), 1e-3, 1e-3) or ""
    )
    assert "lists 2 timed buffer sets, best's 3" in (audit.compare_sets(best, committed(base, base), 1e-3, 1e-3) or "")


@pytest.mark.parametrize(
    "text,words",
    [
        ("nope", "not JSON"),
        ('{"version": 2, "configs": []}', "not a commitment of version 1"),
        (
            '{"version": 1, "configs": [{"config": {"shape": "s0", "cls": "small"}, "sets": [[{"numel": 1, "nan": 0, '
            '"inf": 0, "sum": 0, "abs_sum": 0}]]}]}',
            "lacks column 'n'",
        ),
        (
            '{"version": 1, "configs": [{"config": {"shape": "s0", "cls": "small", "n": 1}, "sets": []}]}',
            "'sets' must list each timed set's output summaries",
        ),
        (
            '{"version": 1, "configs": [{"config": {"shape": "s0", "cls": "small", "n": 1}, "sets": [[{"numel": 1}]]}]}',
            "sets[0][0]: 'nan' must be an integer",
        ),
    ],
)
def test_a_broken_commitment_is_a_bench_error_naming_it(text, words):
    with pytest.raises(BenchError) as e:
        audit.parse_commitment(text, COLUMNS, "c.sets.json")
    assert str(e.value).startswith("c.sets.json") and words in str(e.value) and "\n" not in str(e.value)
