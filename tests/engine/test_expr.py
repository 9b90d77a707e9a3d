import math

import pandas as pd
import pytest

from kopt_supervisor.engine import expr
from kopt_supervisor.engine.errors import BadInput


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


@pytest.mark.parametrize("src", [
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
])
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
