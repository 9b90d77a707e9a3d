import math

import pandas as pd
import pytest

from kopt_supervisor.engine import BadInput, expr


def test_row_and_frame_evaluation_agree():
    e = expr.parse("err_x == 0 and us > 1.5 or not ok")
    df = pd.DataFrame({"err_x": [0, 1, 0], "us": [2.0, 3.0, 1.0], "ok": [True, True, False]})
    frame = list(e.eval_frame(df))
    rows = [bool(e.eval(r)) for r in df.to_dict("records")]
    assert frame == rows == [True, False, True]


def test_arithmetic_and_functions():
    e = expr.parse("2 * rows * hidden * 2 + max(rows, 3) + sqrt(16) - abs(-1) + log2(8) + rows // 4 + rows % 3")
    assert e.eval({"rows": 8, "hidden": 10}) == 2 * 8 * 10 * 2 + 8 + 4 - 1 + 3 + 2 + 2
    assert e.names == frozenset({"rows", "hidden"})
    assert expr.parse("isfinite(x)").eval({"x": math.inf}) is False


def test_chained_comparison_and_strings():
    e = expr.parse("1 <= n < 10 and dtype == 'bf16'")
    assert e.eval({"n": 5, "dtype": "bf16"}) is True
    assert e.eval({"n": 10, "dtype": "bf16"}) is False
    df = pd.DataFrame({"n": [0, 5], "dtype": ["bf16", "bf16"]})
    assert list(e.eval_frame(df)) == [False, True]


@pytest.mark.parametrize(
    "src",
    [
        "__import__('os').system('x')",
        "x.__class__",
        "open('f')",
        "[1, 2]",
        "x[0]",
        "lambda: 1",
        "f(x=1)",
        "(y := 1)",
        "None",
        "'a' if x else 'b'",
    ],
)
def test_rejects_anything_but_the_whitelist(src):
    with pytest.raises(BadInput) as info:
        expr.parse(src, where="kopt.toml [target].correct")
    assert "kopt.toml [target].correct" in str(info.value)


def test_syntax_error_and_empty_are_one_line():
    for src in ("err ==", "  "):
        with pytest.raises(BadInput) as info:
            expr.parse(src, where="X")
        assert "\n" not in str(info.value) and str(info.value).startswith("X:")


def test_missing_column_names_it():
    with pytest.raises(BadInput, match="'err_y'"):
        expr.parse("err_y == 0").eval_frame(pd.DataFrame({"err_x": [0]}))


# --- truth values per row (issue 17: `not err` passed rows whose err was 1 or 5) ----------------

import io  # noqa: E402

import numpy as np  # noqa: E402

from kopt_supervisor.engine import metrics  # noqa: E402
from kopt_supervisor.engine.config.toml_io import loads as loads_config  # noqa: E402

CSV = """cfg,err,f,ok,okn,dtype,skip
a,0,0.0,True,True,bf16,0
b,1,0.5,True,,bf16,0
c,5,,False,False,fp8,1
d,-1,2.0,True,True,,0
e,0,,True,True,fp8,1
"""


def frame() -> pd.DataFrame:
    """Real CSV dtypes: int, float with NaN, bool, bool with a blank (object), text with a blank."""
    df = pd.read_csv(io.StringIO(CSV))
    assert str(df["err"].dtype) == "int64" and df["f"].isna().sum() == 2
    assert df["ok"].dtype == bool and df["okn"].dtype == object
    return df


def rule(src: str, df: pd.DataFrame | None = None) -> list[bool]:
    e = expr.parse_rule(src, where="[target].correct")
    return e.eval_rule(frame() if df is None else df, where="[target].correct").tolist()


def test_not_on_an_integer_column_is_per_row_truth_not_bitwise_negation():
    assert rule("not err") == [True, False, False, False, True]  # err 1, 5, -1 fail
    assert [expr.parse("not err").eval({"err": v}) for v in (0, 1, 5, -1)] == [True, False, False, False]


def test_and_or_are_the_truth_of_both_or_either():
    assert rule("err == 0 and ok") == [True, False, False, False, True]
    assert rule("not (err or skip)") == [True, False, False, False, False]
    assert rule("not err or skip") == [True, False, True, False, True]
    assert rule("err and ok") == [False, True, False, True, False]  # err 1 and -1 are true
    # never an operand as in Python's `2 and 3`: a truth value
    assert expr.parse("a and b").eval({"a": 2, "b": 3}) is True
    assert expr.parse("a or b").eval({"a": 0, "b": 0.0}) is False


def test_a_missing_value_never_passes_whichever_way_the_rule_is_written():
    # f is NaN in rows c and e: IEEE says NaN != 1 is True and `not NaN` is False; both fail here
    for src in ("not f", "f != 1", "f < 1", "not (f != 0)", "f == f", "not (f > 1)", "0 <= f < 1"):
        got = rule(src)
        assert got[2] is False and got[4] is False, src
    assert rule("f < 1") == [True, True, False, False, False]
    # a blank in a boolean column (object dtype) is unknown too
    assert rule("okn") == [True, False, False, True, True]
    assert rule("not okn") == [False, False, True, False, False]
    # Kleene: an explicit alternative still decides; isfinite tests for NaN explicitly
    assert rule("f < 1 or skip == 1") == [True, True, True, False, True]
    assert rule("f < 1 and skip == 1") == [False, False, False, False, False]
    assert rule("not isfinite(f)") == [False, False, True, False, True]
    row = {"f": math.nan, "skip": 0}
    assert expr.parse("not f").eval(row) is None and expr.parse("f != 1").eval(row) is None
    assert expr.parse("f != 1 or skip == 0").eval(row) is True


def test_chained_comparisons_and_text_columns():
    assert rule("-1 <= err < 1") == [True, False, False, True, True]
    assert rule("0 <= err <= 1 and dtype == 'bf16'") == [True, True, False, False, False]
    assert rule("dtype != 'fp8'") == [True, True, False, False, False]  # a blank dtype is unknown: fails
    assert rule("(err == 0) & (dtype == 'fp8') | (skip == 1)") == [False, False, True, False, True]


def test_row_and_frame_give_the_same_truth():
    df = frame()
    for src in ("not err", "err == 0 and ok", "not (err or skip)", "-1 <= err < 1", "f < 1 or skip == 1"):
        rows = [expr.parse(src).eval(r) is True for r in df.to_dict("records")]
        assert rows == rule(src, df), src


@pytest.mark.parametrize(
    "src,needles",
    [
        ("err", ["'err'", "numbers", "not a truth value per row", "err == 0"]),
        ("f", ["'f'", "numbers"]),
        ("dtype", ["'dtype'", "text"]),
        ("err - 1", ["'err - 1'", "number"]),
        ("min(err, 1)", ["'min(err, 1)'", "number"]),
        ("-err", ["'-err'", "number"]),
        ("err & skip", ["'err & skip'", "numbers", "'err'", "'skip'"]),
        ("1", ["'1'", "reads no column"]),
        ("True", ["reads no column"]),
        ("err or 1", ["constant operand '1'", "'err or 1'"]),
        ("err == 0 or True", ["constant operand 'True'"]),
        ("err == 0 and 2 > 1", ["constant operand '2 > 1'"]),
        ("not 0", ["reads no column"]),
        ("err == 0 or not 0", ["constant operand"]),
        ("not dtype", ["'dtype'", "text"]),
        ("dtype < 1", ["'dtype < 1'", "dtype"]),
    ],
)
def test_a_rule_that_is_not_one_truth_value_per_row_is_an_error_naming_it(src, needles):
    with pytest.raises(BadInput) as info:
        rule(src)
    msg = str(info.value)
    assert msg.startswith("[target].correct:") and "\n" not in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_the_hostile_always_true_rule_is_refused_at_init():
    base = '[target]\nbench = "b"\nmetric = "us"\n'
    for src in ("err or 1", "1 == 1", "err == 0 or True", "not 0 or err == 0", "err + 0"):
        with pytest.raises(BadInput, match=r"\[target\]\.correct"):
            loads_config(base + f'correct = "{src}"\n', source="kopt.toml")
        with pytest.raises(BadInput, match=r"\[target\]\.production"):
            loads_config(base + f'production = "{src}"\n', source="kopt.toml")
    # the roofline's formulas are numbers and stay so
    cfg = loads_config(base + '[roofline]\nflops = "2 * n * d"\nbytes = "n * d * 2 + d * 4"\n')
    assert expr.parse(cfg.roofline.bytes).eval({"n": 3, "d": 4}) == 40


def test_measure_fails_the_rows_that_not_err_fails():
    cfg = loads_config('[target]\nbench = "b"\nmetric = "us"\ncorrect = "not err"\nconfig = ["cfg"]\n').target
    df = pd.DataFrame({"cfg": ["a", "b", "c", "d"], "err": [0, 1, 5, np.nan], "us": [1.0, 1.0, 1.0, 1.0]})
    m = metrics.measure(df, cfg)
    assert [m.configs[f"cfg={k}"].ok for k in "abcd"] == [True, False, False, False]
    assert "fails 'not err'" in m.configs["cfg=b"].reasons
    bad = loads_config('[target]\nbench = "b"\nmetric = "us"\ncorrect = "ok"\nconfig = ["cfg"]\n').target
    with pytest.raises(metrics.BenchError, match="'ok'.*not a truth value per row"):
        metrics.measure(df.assign(ok=[1, 0, 1, 1]), bad)


def test_a_mixed_column_is_no_truth_value():
    mixed = pd.read_csv(io.StringIO("err\n0\nx\n1\n"))  # a number column with a stray word: text
    with pytest.raises(BadInput, match="'err'.*text"):
        expr.parse_rule("not err").eval_rule(mixed)
    assert expr.parse_rule("err == '0'").eval_rule(mixed).tolist() == [True, False, False]
    objects = pd.DataFrame({"ok": pd.Series([True, 1, None], dtype=object)})
    with pytest.raises(BadInput, match="'ok'"):
        expr.parse_rule("ok").eval_rule(objects)
