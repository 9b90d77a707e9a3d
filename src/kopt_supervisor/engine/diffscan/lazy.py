"""The diff scan's `lazy-result` rule: results that do their work when read, not when timed. Pure.

A bench times the kernel's call and checks (converts, iterates, compares) its result after the
timer stopped; a kernel that returns an object computing on that check does the work outside
the timed region, and one whose `__eq__` answers True fakes correctness. An honest kernel
file returns tensors, arrays or plain containers; it never needs:

- a class with conversion, container, comparison or arithmetic hooks (`__iter__`, `__len__`,
  `__getitem__`, `__array__`, `__float__`, `__bool__`, `__eq__`, `__sub__`, `__getattr__`,
  `__dlpack__`...), or built on a base whose hooks read what it computes (`UserList` with
  `data` a property, `collections.abc.Sequence`), defined or changed by the candidate (the
  class line is quoted, with its hooks), nor the places that make one (a subclass of one is
  one);
- a generator as a module-level function or a `__call__` (contextlib's context managers
  excepted), nor a generator, `map`/`filter`/`zip`/`iter`/`reversed`/`enumerate`/
  `itertools.*` returned from a function or a lambda.

Dataclasses and NamedTuples generate their `__eq__`/`__iter__` at run time and define none in
the source: they raise nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from kopt_supervisor.engine.diffscan.findings import Raw
from kopt_supervisor.engine.diffscan.lifetimes import own, yields
from kopt_supervisor.engine.diffscan.qualified import BUILTIN
from kopt_supervisor.engine.diffscan.state import Names
from kopt_supervisor.engine.diffscan.state_names import LAZY_BASES, LAZY_DUNDERS, LAZY_RETURNS

RULE = "lazy-result"
_CONTEXT_MANAGERS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager", "pytest.fixture"})


def lazy_results(sc: Names) -> Iterator[Raw]:
    """The `lazy-result` findings of one file (see the module docstring)."""
    classes = _lazy_classes(sc)
    generators = {
        n.name
        for n in ast.walk(sc.tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and yields(n) and not _context_manager(n, sc)
    }
    for node in ast.walk(sc.tree):
        if isinstance(node, ast.ClassDef) and node.name in classes:
            yield Raw(RULE, node, f"  # {', '.join(classes[node.name][:4])}: a result that computes when read")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in classes
            and own(sc, node.func.id)
        ):
            yield Raw(RULE, node, f"  # a {node.func.id}: computes on {', '.join(classes[node.func.id][:3])}")
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name in generators
            and (node in sc.tree.body or node.name == "__call__")
        ):
            yield Raw(RULE, node, "  # a generator: its work runs when iterated, not when called")
        elif isinstance(node, ast.Return | ast.Lambda):
            value = node.value if isinstance(node, ast.Return) else node.body
            if value is not None and _lazy_value(value, sc, generators):
                yield Raw(RULE, value, "  # returns a lazy iterator: its work runs when iterated")


def _lazy_classes(sc: Names) -> dict[str, list[str]]:
    """Classes of the file with lazy hooks (their names), subclasses of those, and classes
    built on a base whose hooks read what the subclass computes (UserList, collections.abc)."""
    out: dict[str, list[str]] = {}
    defs = [n for n in ast.walk(sc.tree) if isinstance(n, ast.ClassDef)]
    for cls in defs:
        hooks: list[str] = []
        for base in cls.bases:
            resolved = sc.resolve(base)
            if (
                resolved
                and resolved[1]
                and any(resolved[0] == b or resolved[0].startswith(b + ".") for b in LAZY_BASES)
            ):
                hooks.append(f"a {resolved[0].rsplit('.', 1)[-1]}'s hooks")
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name in LAZY_DUNDERS:
                hooks.append(stmt.name)
            targets = (
                stmt.targets
                if isinstance(stmt, ast.Assign)
                else [stmt.target]
                if isinstance(stmt, ast.AnnAssign)
                else []
            )
            hooks += [t.id for t in targets if isinstance(t, ast.Name) and t.id in LAZY_DUNDERS]
        if hooks:
            out[cls.name] = hooks
    for _ in range(3):
        for cls in defs:
            for base in cls.bases:
                if isinstance(base, ast.Name) and base.id in out and cls.name not in out:
                    out[cls.name] = out[base.id]
    return out


def _context_manager(fn: ast.FunctionDef | ast.AsyncFunctionDef, sc: Names) -> bool:
    for dec in fn.decorator_list:
        resolved = sc.resolve(dec.func if isinstance(dec, ast.Call) else dec)
        if resolved and resolved[1] and resolved[0] in _CONTEXT_MANAGERS:
            return True
    return False


def _lazy_value(value: ast.AST, sc: Names, generators: set[str]) -> bool:
    """A generator expression, a call of a generator function of this file, or of a builtin
    or itertools function that returns a lazy iterator."""
    if isinstance(value, ast.GeneratorExp):
        return True
    if not isinstance(value, ast.Call):
        return False
    if isinstance(value.func, ast.Name) and value.func.id in generators and own(sc, value.func.id):
        return True
    resolved = sc.resolve(value.func)
    if not (resolved and resolved[1]):
        return False
    q = resolved[0]
    name = q[len(BUILTIN) :] if q.startswith(BUILTIN) else q[len("builtins.") :] if q.startswith("builtins.") else ""
    return name in LAZY_RETURNS or q == "itertools" or q.startswith("itertools.")
