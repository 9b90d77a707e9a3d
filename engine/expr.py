"""Safe column expressions: `err_x == 0`, `2 * rows * hidden * 2`, `dtype == 'bf16' and n > 1`.

kopt.toml holds small expressions over CSV columns (the correctness rule, the production
filter, the roofline's FLOP and byte formulas). They are parsed with `ast` and only a
whitelist of nodes is accepted: numbers, strings, column names, arithmetic, comparisons,
`and`/`or`/`not`, and a few pure functions. Nothing reaches `eval`, attribute access,
subscripts or calls of anything else. Evaluation works on scalars (one row as a dict) and on
pandas Series (a whole DataFrame) alike.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine.errors import BadInput

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
        return _Evaluator(env, self.source).visit(self.tree.body)

    def eval_frame(self, frame: Any) -> Any:
        """Evaluate over a pandas DataFrame: one value per row (a Series) or a scalar."""
        missing = sorted(n for n in self.names if n not in frame.columns and n not in CONSTANTS)
        if missing:
            raise BadInput(
                f"expression {self.source!r} names column {missing[0]!r}, which the CSV lacks "
                f"(columns: {', '.join(map(str, frame.columns))})"
            )
        env = {n: frame[n] for n in self.names if n in frame.columns}
        return self.eval(env)


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
                f"{where}: function {name!r} is not allowed in {source!r} "
                f"(allowed: {', '.join(sorted(FUNCTIONS))})"
            )
        if node.keywords:
            raise BadInput(f"{where}: keyword arguments are not allowed in {source!r}")
    elif isinstance(node, ast.Name):
        names.add(node.id)


class _Evaluator:
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
                v = self.visit(x)
                return ~v if _is_vector(v) else not v
            case ast.UnaryOp(op=ast.USub(), operand=x):
                return -self.visit(x)
            case ast.UnaryOp(op=ast.UAdd(), operand=x):
                return +self.visit(x)
            case ast.BinOp(left=a, op=op, right=b):
                return _BINOPS[type(op)](self.visit(a), self.visit(b))
            case ast.BoolOp(op=op, values=values):
                return self._boolop(isinstance(op, ast.And), [self.visit(v) for v in values])
            case ast.Compare(left=left, ops=ops, comparators=rest):
                return self._compare(left, ops, rest)
            case ast.Call(func=ast.Name(id=fn), args=args):
                return FUNCTIONS[fn](*(self.visit(a) for a in args))
        raise BadInput(f"expression {self.source!r}: unsupported element {ast.dump(node)}")

    @staticmethod
    def _boolop(is_and: bool, values: list[Any]) -> Any:
        out = values[0]
        for v in values[1:]:
            if _is_vector(out) or _is_vector(v):
                out = (out & v) if is_and else (out | v)
            else:
                out = (out and v) if is_and else (out or v)
        return out

    def _compare(self, left: ast.AST, ops: list[ast.cmpop], rest: list[ast.AST]) -> Any:
        result: Any = None
        a = self.visit(left)
        for op, node in zip(ops, rest, strict=True):
            b = self.visit(node)
            part = _CMPOPS[type(op)](a, b)
            result = part if result is None else self._boolop(True, [result, part])
            a = b
        return result
