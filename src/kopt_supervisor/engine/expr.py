"""Safe column expressions: `err_x == 0`, `2 * rows * hidden * 2`, `dtype == 'bf16' and n > 1`.

kopt.toml holds small expressions over CSV columns (the correctness rule, the production
filter, the roofline's FLOP and byte formulas). They are parsed with `ast` and only a
whitelist of nodes is accepted: numbers, strings, column names, arithmetic, comparisons,
`and`/`or`/`not`, and a few pure functions. Nothing reaches `eval`, attribute access,
subscripts or calls of anything else. Evaluation works on scalars (one row as a dict) and on
pandas Series (a whole DataFrame) alike.

Truth values, per row, as Python means them: `not`, `and`, `or` turn each operand into one
truth value per row (a number is true when it is not 0, a boolean is itself), so
`not err` holds only where err == 0 and `a and b` where both are true. They never become
bitwise operations on integer columns, and they always give a truth value (never an operand,
as Python's `2 and 3` would). A missing value (NaN, an empty cell) is *unknown*, not true:
a comparison with it is unknown, `not` of unknown is unknown, and `and`/`or` follow Kleene's
three-valued logic (`unknown and False` is False, `unknown or True` is True). A rule that ends
unknown for a row fails that row: a NaN in a correctness column can never pass a check,
whichever way the rule is written (`not err`, `err != 1`, `err < 1`). Text is no truth value
(`not dtype` is an error). `isfinite(err)` is the way to test for NaN explicitly.

A correctness or production rule (`parse_rule`, `Expr.eval_rule`) must give one truth value
per row: a comparison, `not`/`and`/`or`, `isfinite(...)` or a boolean column. A rule that
gives numbers (`err`), text, or a constant, or that has an operand reading no column
(`err or 1`, `err == 0 and True`: always true or never), is a BadInput error naming the
expression and the column. Numeric formulas (the roofline's) keep every arithmetic form.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine import BadInput

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _is_vector(x: Any) -> bool:
    return hasattr(x, "to_numpy")


def _apply(fn_scalar: Callable[..., Any], fn_vector: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        if any(_is_vector(a) for a in args):
            return fn_vector(*args)
        return fn_scalar(*args)

    return call


def _vec_min(*args: Any) -> Any:
    import numpy as np

    return _reduce_pairwise(np.minimum, args)


def _vec_max(*args: Any) -> Any:
    import numpy as np

    return _reduce_pairwise(np.maximum, args)


def _reduce_pairwise(fn: Callable[[Any, Any], Any], args: tuple[Any, ...]) -> Any:
    out = args[0]
    for a in args[1:]:
        out = fn(out, a)
    return out


def _np(name: str) -> Callable[[Any], Any]:
    def call(x: Any) -> Any:
        import numpy as np

        return getattr(np, name)(x)

    return call


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": _apply(abs, abs),
    "min": _apply(min, _vec_min),
    "max": _apply(max, _vec_max),
    "log": _apply(math.log, _np("log")),
    "log2": _apply(math.log2, _np("log2")),
    "sqrt": _apply(math.sqrt, _np("sqrt")),
    "ceil": _apply(math.ceil, _np("ceil")),
    "floor": _apply(math.floor, _np("floor")),
    "isfinite": _apply(math.isfinite, _np("isfinite")),
}

# Names that mean constants; a column of the same name wins.
CONSTANTS: dict[str, Any] = {"True": True, "False": False, "true": True, "false": False}


@dataclass(frozen=True)
class Expr:
    """A parsed, validated expression; `names` are the columns it reads."""

    source: str
    tree: ast.Expression
    names: frozenset[str]

    def eval(self, env: Mapping[str, Any]) -> Any:
        """The value for one row (a dict) or for columns (pandas Series). `not`/`and`/`or`
        and comparisons give truth values; None (or pd.NA in a Series) is unknown."""
        return _Evaluator(env, self.source).visit(self.tree.body)

    def eval_frame(self, frame: Any) -> Any:
        """Evaluate over a pandas DataFrame: one value per row (a Series) or a scalar."""
        return self.eval(self._columns(frame))

    def eval_rule(self, frame: Any, *, where: str = "rule") -> Any:
        """A correctness or production rule over a DataFrame: a bool Series, True where the
        row passes. Unknown (a NaN read by the rule) fails the row. BadInput when the rule
        does not give one truth value per row (numbers, text, a constant), naming the
        expression and the column."""
        import pandas as pd

        check_rule(self, where=where)
        try:
            out = self.eval(self._columns(frame))
        except BadInput as exc:
            raise BadInput(f"{where}: {exc}") from None
        except TypeError as exc:  # text compared with a number, say
            raise BadInput(
                f"{where}: cannot evaluate {self.source!r} on columns {', '.join(sorted(self.names))}: {exc}"
            ) from None
        if not _is_vector(out):
            raise BadInput(
                f"{where}: {self.source!r} gives one value ({out!r}) for every row, not a truth value per row"
            )
        if not _is_truth_vector(out):
            kind = _kind_of(out)
            raise BadInput(
                f"{where}: {self.source!r} gives {kind} ({_what(self.tree.body)}), "
                f"not a truth value per row: write a comparison, e.g. {_example(self.tree.body, kind)}"
            )
        return pd.Series(out, index=frame.index).astype("boolean").fillna(False).astype(bool)

    def _columns(self, frame: Any) -> dict[str, Any]:
        missing = sorted(n for n in self.names if n not in frame.columns and n not in CONSTANTS)
        if missing:
            raise BadInput(
                f"expression {self.source!r} names column {missing[0]!r}, which the CSV lacks "
                f"(columns: {', '.join(map(str, frame.columns))})"
            )
        return {n: frame[n] for n in self.names if n in frame.columns}


def parse(source: str, *, where: str = "expression") -> Expr:
    """Parse and validate; raise BadInput naming `where` (e.g. 'kopt.toml [target].correct')."""
    if not isinstance(source, str) or not source.strip():
        raise BadInput(f"{where}: empty expression")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise BadInput(f"{where}: cannot parse {source!r}: {exc.msg}") from None
    names: set[str] = set()
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        _check_node(node, source, where, names)
    names -= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) in callees}
    return Expr(source.strip(), tree, frozenset(names))


def parse_rule(source: str, *, where: str = "rule") -> Expr:
    """Parse a correctness or production rule: `parse`, then `check_rule`."""
    return check_rule(parse(source, where=where), where=where)


_TRUTH_ROOTS = (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Call, ast.Name, ast.BinOp)


def check_rule(e: Expr, *, where: str = "rule") -> Expr:
    """What a rule's shape alone can tell: it reads a column, every operand of
    `not`/`and`/`or` reads one (`err or 1` is always true, `err and 0` never), and it is not
    arithmetic or a constant. Whether a bare column or a bitwise `&`/`|` is a truth value
    depends on the column's type and is checked on the data (`Expr.eval_rule`)."""
    body = e.tree.body
    if not e.names - CONSTANTS.keys():
        raise BadInput(f"{where}: {e.source!r} reads no column: a rule must test the bench's columns")
    if isinstance(body, ast.UnaryOp) and not isinstance(body.op, ast.Not):
        raise BadInput(f"{where}: {e.source!r} gives a number, not a truth value per row")
    if isinstance(body, ast.BinOp) and not isinstance(body.op, ast.BitAnd | ast.BitOr):
        raise BadInput(
            f"{where}: {e.source!r} gives a number, not a truth value per row: "
            f"write a comparison, e.g. {_example(body)}"
        )
    if isinstance(body, ast.Call) and getattr(body.func, "id", "") != "isfinite":
        raise BadInput(f"{where}: {e.source!r} gives a number, not a truth value per row")
    for node in ast.walk(body):
        operands: list[ast.expr] = []
        if isinstance(node, ast.BoolOp):
            operands = list(node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            operands = [node.operand]
        for op in operands:
            if not _reads_column(op):
                raise BadInput(
                    f"{where}: {e.source!r} has the constant operand {ast.unparse(op)!r}, "
                    "which reads no column: the rule would not depend on the row"
                )
    return e


def _reads_column(node: ast.AST) -> bool:
    callees = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return any(isinstance(n, ast.Name) and id(n) not in callees and n.id not in CONSTANTS for n in ast.walk(node))


_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.BinOp,
    ast.Compare,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Call,
    *_BINOPS,
    *_CMPOPS,
)


def _check_node(node: ast.AST, source: str, where: str, names: set[str]) -> None:
    if not isinstance(node, _ALLOWED):
        raise BadInput(f"{where}: {type(node).__name__} is not allowed in {source!r}")
    if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | str | bool):
        raise BadInput(f"{where}: constant {node.value!r} is not allowed in {source!r}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = getattr(node.func, "id", ast.unparse(node.func))
            raise BadInput(
                f"{where}: function {name!r} is not allowed in {source!r} (allowed: {', '.join(sorted(FUNCTIONS))})"
            )
        if node.keywords:
            raise BadInput(f"{where}: keyword arguments are not allowed in {source!r}")
    elif isinstance(node, ast.Name):
        names.add(node.id)


# --- evaluation ---------------------------------------------------------------------------


def _is_missing_scalar(v: Any) -> bool:
    if v is None or type(v).__name__ == "NAType":
        return True
    if isinstance(v, bool | str):
        return False
    try:
        return math.isnan(v)
    except (TypeError, ValueError):
        return False


def _missing_mask(v: Any) -> Any:
    """Per row: the value is missing (a Series), or one bool for a scalar."""
    return v.isna() if _is_vector(v) else _is_missing_scalar(v)


def _is_truth_vector(v: Any) -> bool:
    import pandas as pd

    dtype = v.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return True
    if pd.api.types.is_object_dtype(dtype):
        return all(isinstance(x, bool) or _is_missing_scalar(x) or type(x).__name__ == "bool_" for x in v)
    return False


def _kind_of(v: Any) -> str:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(v.dtype):
        return "numbers"
    return (
        "text"
        if pd.api.types.is_string_dtype(v.dtype) or pd.api.types.is_object_dtype(v.dtype)
        else f"values of type {v.dtype}"
    )


def _what(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"column {node.id!r}"
    names = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)})
    return f"{ast.unparse(node)!r} of column{'s' if len(names) != 1 else ''} {', '.join(map(repr, names))}"


def _example(node: ast.AST, kind: str = "numbers") -> str:
    if kind != "numbers":
        return f"{ast.unparse(node)} == 'value'"
    return f"'{ast.unparse(node)} == 0'" if not isinstance(node, ast.Name) else f"'{node.id} == 0' or 'not {node.id}'"


class _Evaluator:
    """Walks a validated tree. Truth values: a bool for a row, a pandas "boolean" Series
    (nullable, Kleene logic) for columns; None / pd.NA is unknown."""

    def __init__(self, env: Mapping[str, Any], source: str) -> None:
        self.env = env
        self.source = source

    def visit(self, node: ast.AST) -> Any:
        match node:
            case ast.Constant(value=v):
                return v
            case ast.Name(id=name):
                if name in self.env:
                    return self.env[name]
                if name in CONSTANTS:
                    return CONSTANTS[name]
                raise BadInput(f"expression {self.source!r} names {name!r}, which is not a column")
            case ast.UnaryOp(op=ast.Not(), operand=x):
                t = self.truth(self.visit(x), x)
                if _is_vector(t):
                    return ~t
                return None if t is None else not t
            case ast.UnaryOp(op=ast.USub(), operand=x):
                return -self.visit(x)
            case ast.UnaryOp(op=ast.UAdd(), operand=x):
                return +self.visit(x)
            case ast.BinOp(left=a, op=op, right=b):
                return _BINOPS[type(op)](self.visit(a), self.visit(b))
            case ast.BoolOp(op=op, values=values):
                return _kleene(isinstance(op, ast.And), [self.truth(self.visit(v), v) for v in values])
            case ast.Compare(left=left, ops=ops, comparators=rest):
                return self._compare(left, ops, rest)
            case ast.Call(func=ast.Name(id=fn), args=args):
                return FUNCTIONS[fn](*(self.visit(a) for a in args))
        raise BadInput(f"expression {self.source!r}: unsupported element {ast.dump(node)}")

    def truth(self, v: Any, node: ast.AST) -> Any:
        """One truth value per row, as Python's bool() would give, with missing = unknown."""
        if _is_vector(v):
            import pandas as pd

            if pd.api.types.is_bool_dtype(v.dtype):
                return v.astype("boolean")
            if pd.api.types.is_numeric_dtype(v.dtype):
                out = (v != 0).astype("boolean")
                out[v.isna()] = pd.NA
                return out
            if _is_truth_vector(v):
                return pd.Series(
                    [None if _is_missing_scalar(x) else bool(x) for x in v], index=v.index, dtype="boolean"
                )
            raise BadInput(
                f"expression {self.source!r}: {_what(node)} holds {_kind_of(v)}, "
                "which is no truth value (compare it: e.g. dtype == 'bf16')"
            )
        if _is_missing_scalar(v):
            return None
        if isinstance(v, str):
            raise BadInput(
                f"expression {self.source!r}: {_what(node)} is text ({v!r}), "
                "which is no truth value (compare it: e.g. dtype == 'bf16')"
            )
        return bool(v)

    def _compare(self, left: ast.AST, ops: list[ast.cmpop], rest: list[ast.expr]) -> Any:
        parts: list[Any] = []
        a = self.visit(left)
        for op, node in zip(ops, rest, strict=True):
            b = self.visit(node)
            parts.append(_compare_one(_CMPOPS[type(op)], a, b))
            a = b
        return parts[0] if len(parts) == 1 else _kleene(True, parts)


def _compare_one(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """a <op> b, unknown where either side is missing (IEEE would say NaN != 0 is True)."""
    if not (_is_vector(a) or _is_vector(b)):
        return None if _is_missing_scalar(a) or _is_missing_scalar(b) else bool(fn(a, b))
    import pandas as pd

    index = a.index if _is_vector(a) else b.index
    out = pd.Series(fn(a, b), index=index).astype("boolean")
    missing = _missing_mask(a) | _missing_mask(b)
    if _is_vector(missing):
        out[missing.to_numpy(dtype=bool)] = pd.NA
    elif missing:
        out[:] = pd.NA
    return out


def _kleene(is_and: bool, values: list[Any]) -> Any:
    """and/or over truth values (bools, None for unknown, or "boolean" Series): Kleene's
    three-valued logic, which pandas' nullable booleans implement for Series."""
    if any(_is_vector(v) for v in values):
        import pandas as pd

        out: Any = None
        for v in values:
            v = pd.NA if v is None else v
            out = v if out is None else ((out & v) if is_and else (out | v))
        return out
    if is_and:
        return False if any(v is False for v in values) else (None if any(v is None for v in values) else True)
    return True if any(v is True for v in values) else (None if any(v is None for v in values) else False)
