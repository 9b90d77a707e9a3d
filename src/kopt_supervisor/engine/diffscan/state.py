"""The diff scan's rules on what a kernel keeps or defers: `module-state` (state kept between
calls) and `lazy-result` (results that do their work when read, not when timed), with the
names only the lazy-result rule knows (`LAZY_DUNDERS`, `LAZY_BASES`, `LAZY_RETURNS`). Pure.

`module-state`: state a kernel keeps between calls.

A kernel that remembers something from one call to the next can hand back a stored result, or
be correct only on the call the bench checks. Wherever the state lives, the rule looks for a
function (or lambda) that changes an object outliving its call:

- module-level names: a `global` stored, a module-level container or attribute changed
  (`_cache[k] = v`, `kernel.calls += 1`, `State.hits.append(x)`);
- default arguments (and what `functools.partial` binds), made once and shared by every
  call: a mutable one (`_memo={}`, `_calls=[0]`, `collections.Counter()`, an instance of a
  class of this file that is not frozen) is a finding where it stands, changed or not; any
  other that is no plain value (`buf=torch.empty(4)`, `m=_MEMO`) when it is changed;
- closures: a variable of a function whose products outlive a call (a factory or decorator
  run at import, a cached function) changed by a nested function that escapes it (returned,
  stored, passed on), a `nonlocal` stored there;
- classes: class attributes changed through `cls`, `type(self)`, `self.__class__`, or through
  `self` where the attribute is a container of the class body (or of a base's); any `self`
  state of a class with an instance made at import (or used as a decorator);
- iterators made at import (`_N = itertools.count()`, `_G = gen()`, `iter(...)`, a generator
  expression, `map(...)`): any read of one inside a function advances shared state
  (`next(_N)`, `for v in _G: break`, `zip(_N, xs)`);
- what these reach: a local bound to one of them (`memo = _CACHE`, `for e in STATE`,
  `d = getattr(kernel, "cache")`), and what a `functools.cache`/`lru_cache`d function of this
  file returns (the cached opener of a store).

Changed means an item or attribute stored or deleted (`+=` included), a mutating method
(`append`, `update`, `setdefault`..., a torch in-place `x.add_()`), written through `out=`, a
mutating function with the object first (`heapq.heappush`, `bisect.insort`,
`operator.setitem`, `dict.update(d, ...)`, `next(it)`), `setattr`/`delattr` on it (function
attributes), or handing it to a function of this file that changes that parameter
(`_remember(_MEMO, key, out)`). Code at import (module level, class bodies, defaults) runs
once and is not per-call state; nor is a `if __name__ == "__main__":` block.

`lazy-result`: results that do their work when read, not when timed.

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

from kopt_supervisor.engine.diffscan.bindings import Names, builtin_name, function_name, is_static, own, yields
from kopt_supervisor.engine.diffscan.findings import Raw
from kopt_supervisor.engine.diffscan.giveaways import MUTATING_FUNCTIONS, MUTATORS, PERSISTENT_LOOKUPS
from kopt_supervisor.engine.diffscan.lifetimes import Lifetimes, Scope
from kopt_supervisor.engine.diffscan.qualified import BUILTIN

__all__ = ["LAZY_RULE", "STATE_RULE", "in_place", "lazy_results", "persistent_state"]

LAZY_DUNDERS = frozenset(
    {
        # container and iteration: list(out), len(out), out[i], x in out
        "__iter__",
        "__next__",
        "__aiter__",
        "__anext__",
        "__len__",
        "__length_hint__",
        "__getitem__",
        "__contains__",
        "__reversed__",
        "__missing__",
        # conversion: float(out), numpy/torch/dlpack views, formatting, truth
        "__array__",
        "__array_interface__",
        "__array_struct__",
        "__array_ufunc__",
        "__array_function__",
        "__array_priority__",
        "__cuda_array_interface__",
        "__dlpack__",
        "__dlpack_device__",
        "__buffer__",
        "__float__",
        "__int__",
        "__index__",
        "__complex__",
        "__bool__",
        "__round__",
        "__trunc__",
        "__floor__",
        "__ceil__",
        "__format__",
        "__bytes__",
        "__fspath__",
        # comparison and arithmetic: out == ref, out - ref, abs(out - ref)
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__add__",
        "__radd__",
        "__sub__",
        "__rsub__",
        "__mul__",
        "__rmul__",
        "__matmul__",
        "__rmatmul__",
        "__truediv__",
        "__rtruediv__",
        "__floordiv__",
        "__rfloordiv__",
        "__mod__",
        "__rmod__",
        "__pow__",
        "__rpow__",
        "__neg__",
        "__pos__",
        "__abs__",
        "__invert__",
        "__and__",
        "__rand__",
        "__or__",
        "__ror__",
        "__xor__",
        "__rxor__",
        # every attribute read: out.shape, out.cpu(), out.tolist()
        "__getattr__",
        "__getattribute__",
    }
)
"""Hooks a result object runs when the bench reads it (after the timer stopped): a class with
any of them can do its work there, or answer a comparison falsely."""
LAZY_BASES = frozenset(
    {
        "collections.UserList",
        "collections.UserDict",
        "collections.UserString",
        "collections.abc",
        "typing.Sequence",
        "typing.MutableSequence",
        "typing.Mapping",
        "typing.Iterable",
        "typing.Iterator",
        "typing.Collection",
        "numpy.lib.mixins",
    }
)
"""Bases whose hooks read what a subclass computes (UserList's data as a property): a result of
such a class can compute when read, without a hook of its own."""
LAZY_RETURNS = frozenset({"map", "filter", "zip", "iter", "reversed", "enumerate", "aiter"})
"""Builtins that return a lazy iterator: returned from a kernel, the work runs when iterated."""


STATE_RULE = "module-state"
ITERATOR_FACTORIES = LAZY_RETURNS | {"open"}
"""Builtins whose result is an iterator (advanced by every read)."""


def persistent_state(sc: Names) -> Iterator[Raw]:
    """The `module-state` findings of one file (see the module docstring)."""
    yield from _State(sc).findings()


class _State(Lifetimes):
    """The rule: what a function changes of what outlives its call."""

    def __init__(self, sc: Names) -> None:
        super().__init__(sc)
        self.helpers: dict[str, tuple[list[str], set[str]]] = {}
        self._find_mutating_helpers()

    # -- the findings ------------------------------------------------------------------------------

    def findings(self) -> Iterator[Raw]:
        for scope in self.scopes.values():
            yield from self._defaults(scope)
        yield from self._partials()
        yield from self._iterators()
        for scope in self.scopes.values():
            self._taint(scope)
            yield from self._changes(scope)

    def _partials(self) -> Iterator[Raw]:
        """functools.partial(f, {}) binds a mutable made once to every call, as a default does."""
        for n in ast.walk(self.sc.tree):
            if not isinstance(n, ast.Call):
                continue
            resolved = self.sc.resolve(n.func)
            if resolved and resolved[1] and resolved[0] in ("functools.partial", "functools.partialmethod"):
                for arg in [*n.args[1:], *(k.value for k in n.keywords)]:
                    if self.default_kind(arg) == "mutable":
                        yield Raw(STATE_RULE, arg, "  # bound by functools.partial: made once, shared by every call")

    def _iterators(self) -> Iterator[Raw]:
        """A module-level iterator read inside a function: each read may advance it."""
        generators = {n.name for n in self.sc.tree.body if isinstance(n, ast.FunctionDef) and yields(n)}
        made: set[str] = set()
        for stmt in self.sc.tree.body:
            if (
                isinstance(stmt, ast.Assign | ast.AnnAssign)
                and stmt.value is not None
                and self._makes_iterator(stmt.value, generators)
            ):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                made |= {t.id for t in targets if isinstance(t, ast.Name)}
        for scope in self.scopes.values():
            for n in scope.nodes:
                if (
                    isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Load)
                    and n.id in made
                    and n.id not in scope.local
                    and n.id not in scope.roots
                ):
                    yield Raw(STATE_RULE, n, f"  # module-level iterator {n.id}: advanced per call")

    def _makes_iterator(self, value: ast.expr, generators: set[str]) -> bool:
        if isinstance(value, ast.GeneratorExp):
            return True
        if not isinstance(value, ast.Call):
            return False
        if isinstance(value.func, ast.Name) and value.func.id in generators and own(self.sc, value.func.id):
            return True
        if isinstance(value.func, ast.Attribute) and value.func.attr == "__iter__":
            return True
        resolved = self.sc.resolve(value.func)
        q = resolved[0] if resolved and resolved[1] else ""
        return builtin_name(q) in ITERATOR_FACTORIES or q == "itertools" or q.startswith("itertools.")

    def _defaults(self, scope: Scope) -> Iterator[Raw]:
        a = scope.fn.args
        defaults = list(zip(reversed([*a.posonlyargs, *a.args]), reversed(a.defaults), strict=False))
        defaults += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        for p, d in defaults:
            if self.default_kind(d) == "mutable":
                yield Raw(STATE_RULE, d, f"  # default argument {p.arg}: made once, shared by every call")

    def _taint(self, scope: Scope) -> None:
        """Locals bound to what outlives the call become roots themselves (until none is new)."""
        pairs: list[tuple[ast.AST, ast.AST]] = []
        for n in scope.nodes:
            if isinstance(n, ast.Assign):
                pairs += [(t, n.value) for t in n.targets]
            elif isinstance(n, ast.AnnAssign | ast.NamedExpr) and n.value is not None:
                pairs.append((n.target, n.value))
            elif isinstance(n, ast.For | ast.AsyncFor | ast.comprehension):
                pairs.append((n.target, n.iter))
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                pairs.append((n.optional_vars, n.context_expr))
        grew = True
        while grew:
            grew = False
            for target, value in pairs:
                names = [t.id for t in _bound_names(target) if t.id not in scope.roots and t.id not in scope.globals]
                held = self.holds(value, scope) if names else None
                if held is None:
                    continue
                for name in names:
                    scope.roots[name] = f"{held.split(' (via ')[0]} (via {name})"
                    grew = True

    def _changes(self, scope: Scope) -> Iterator[Raw]:
        escaping = [o for o in self.enclosing(scope.fn) if id(o) in self.factories and self.escapes(scope.fn, o)]
        for n in scope.nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                if n.id in scope.globals:
                    yield Raw(STATE_RULE, n, f"  # global {n.id}")
                elif n.id in scope.nonlocals and escaping:
                    yield Raw(STATE_RULE, n, f"  # nonlocal {n.id} of {function_name(escaping[0])}")
                continue
            for target in self._changed(n, scope):
                held = self.holds(target, scope) or self._class_container(target, scope)
                if held is not None:
                    yield Raw(STATE_RULE, n, f"  # {held} changed per call")
                    break

    def _changed(self, n: ast.AST, scope: Scope) -> list[ast.AST]:
        """The objects a node changes: X of X[k] = v, X.a = v, X += [v] (a list default), X.append(v),
        X.add_(v), heapq.heappush(X, v), setattr(X, ...), dict.update(X, ...), or an argument a
        function of this file changes (`_remember(X, k, v)`)."""
        if isinstance(n, ast.Subscript | ast.Attribute) and isinstance(n.ctx, ast.Store | ast.Del):
            return [n.value]
        if (
            isinstance(n, ast.AugAssign)
            and isinstance(n.target, ast.Name)
            and n.target.id not in scope.globals | scope.nonlocals
        ):
            return [n.target]
        if not isinstance(n, ast.Call):
            return []
        into = [k.value for k in n.keywords if k.arg == "out"]  # torch.mul(x, 2, out=_BUF)
        return into + self._changed_by_call(n)

    def _changed_by_call(self, n: ast.Call) -> list[ast.AST]:
        fn = n.func
        resolved = self.sc.resolve(fn)
        q = resolved[0] if resolved and resolved[1] else ""  # a module's or a builtin's function
        b = builtin_name(q)
        if n.args and (
            q in MUTATING_FUNCTIONS
            or b in ("setattr", "delattr", "next")
            or (b.split(".")[0] in ("dict", "list", "set", "bytearray") and b.split(".")[-1] in MUTATORS)
        ):
            return [n.args[0]]
        if isinstance(fn, ast.Attribute) and (fn.attr in MUTATORS or in_place(fn.attr)) and not q:
            return [fn.value]
        helper = self.helpers.get(fn.id) if isinstance(fn, ast.Name) and own(self.sc, fn.id) else None
        if helper is None:
            return []
        params, changed = helper
        out: list[ast.AST] = [a for a, p in zip(n.args, params, strict=False) if p in changed]
        return out + [k.value for k in n.keywords if k.arg in changed]

    def _find_mutating_helpers(self) -> None:
        """self.helpers: module-level functions of the file that change a parameter's object,
        name -> (positional parameter names, the changed ones); helpers of helpers too."""
        fns = [n for n in self.sc.tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        grew = True
        while grew:
            grew = False
            for fn in fns:
                scope = self.scopes[id(fn)]
                params = {p.arg for p in scope.params}
                changed = {
                    name
                    for n in scope.nodes
                    for t in self._changed(n, scope)
                    if (name := _root_name(t)) is not None and name in params
                }
                if changed and changed != self.helpers.get(fn.name, ([], set()))[1]:
                    self.helpers[fn.name] = ([p.arg for p in [*fn.args.posonlyargs, *fn.args.args]], changed)
                    grew = True

    def _class_container(self, target: ast.AST, scope: Scope) -> str | None:
        """`self.A[k] = v`, `self.A.append(x)` where A is bound in the class body: the class's
        own container, shared by every instance."""
        cls = self.method_of(scope.fn)
        if cls is None or not scope.params or is_static(scope.fn):
            return None
        node = target
        while isinstance(node, ast.Subscript) or (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
        ):
            node = node.value
        if not (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == scope.params[0].arg
        ):
            return None
        seen: set[str] = set()
        todo = [cls]
        while todo:  # the class and its bases of this file
            c = todo.pop()
            seen.add(c.name)
            todo += [
                self.classes[b.id]
                for b in c.bases
                if isinstance(b, ast.Name) and b.id in self.classes and b.id not in seen
            ]
            for stmt in c.body:
                names = (
                    stmt.targets
                    if isinstance(stmt, ast.Assign)
                    else [stmt.target]
                    if isinstance(stmt, ast.AnnAssign)
                    else []
                )
                value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
                if (
                    value is not None
                    and any(isinstance(t, ast.Name) and t.id == node.attr for t in names)
                    and self.default_kind(value) == "mutable"
                ):  # not field(default_factory=...)
                    return f"class attribute {c.name}.{node.attr}"
        return None


def _root_name(node: ast.AST) -> str | None:
    """x of x, x.a[k].b, x.get(k)."""
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PERSISTENT_LOOKUPS
        ):
            node = node.func.value
        else:
            return node.id if isinstance(node, ast.Name) else None


def _bound_names(target: ast.AST) -> Iterator[ast.Name]:
    """The names an assignment target binds (x, (a, b), [*rest]), not x of x.a or x[k]."""
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, ast.Tuple | ast.List):
        for e in target.elts:
            yield from _bound_names(e)
    elif isinstance(target, ast.Starred):
        yield from _bound_names(target.value)


def in_place(attr: str) -> bool:
    """A torch in-place method: add_, copy_, index_put_ (not _private_, not __dunder__)."""
    return len(attr) > 1 and attr.endswith("_") and not attr.startswith("_")


LAZY_RULE = "lazy-result"
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
            yield Raw(LAZY_RULE, node, f"  # {', '.join(classes[node.name][:4])}: a result that computes when read")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in classes
            and own(sc, node.func.id)
        ):
            yield Raw(LAZY_RULE, node, f"  # a {node.func.id}: computes on {', '.join(classes[node.func.id][:3])}")
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name in generators
            and (node in sc.tree.body or node.name == "__call__")
        ):
            yield Raw(LAZY_RULE, node, "  # a generator: its work runs when iterated, not when called")
        elif isinstance(node, ast.Return | ast.Lambda):
            value = node.value if isinstance(node, ast.Return) else node.body
            if value is not None and _lazy_value(value, sc, generators):
                yield Raw(LAZY_RULE, value, "  # returns a lazy iterator: its work runs when iterated")


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
