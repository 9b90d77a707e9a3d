"""What outlives a kernel call, for the diff scan's `module-state` rule (engine/diffscan/state.py).
Pure.

`Lifetimes` reads a file once and answers, for any expression inside a function, whether it
reaches an object that persists from one call to the next, and which: a module-level name, a
default argument that is no plain value, a closure variable of a factory whose products
escape, a class attribute, the state of a class instance made at import, a local bound to
one of these, or what a cached function returns. It also knows what runs at import (and so
is no per-call state) and each function's own scope. What counts as *changing* such an
object is the rule's, in state.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kopt_supervisor.engine.diffscan.giveaways import (
    CACHE_DECORATORS,
    IMMUTABLE_BASES,
    IMMUTABLE_FACTORIES,
    INIT_METHODS,
    MUTABLE_FACTORIES,
    PERSISTENT_LOOKUPS,
)
from kopt_supervisor.engine.diffscan.qualified import BUILTIN

_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
Fn = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
"""A function or a lambda: what has a scope of its own."""


class Names(Protocol):
    """What the rules beside the Python scanner read of a file's names (bindings.FileNames has it)."""

    tree: ast.Module
    parents: dict[int, ast.AST]
    aliases: dict[str, str]
    ambiguous: set[str]
    module_names: set[str]

    def resolve(self, node: ast.AST) -> tuple[str, bool] | None: ...


@dataclass
class Scope:
    """One function's own names and nodes, and which of its names hold what outlives it."""

    fn: Fn
    params: list[ast.arg]
    local: set[str] = field(default_factory=set)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    nodes: list[ast.AST] = field(default_factory=list)
    """The function's own nodes: its body without nested functions' and classes' bodies."""
    roots: dict[str, str] = field(default_factory=dict)
    """Local names that hold persistent objects -> what they hold ("default argument _memo")."""


def cached_functions(sc: Names) -> set[str]:
    """Names of the file's functions whose results are cached (functools.cache/lru_cache as a
    decorator, or `f = functools.lru_cache(...)(g)`)."""

    def is_cache(node: ast.AST) -> bool:
        resolved = sc.resolve(node.func if isinstance(node, ast.Call) else node)
        return bool(resolved and resolved[1] and resolved[0] in CACHE_DECORATORS)

    out: set[str] = set()
    for node in ast.walk(sc.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(is_cache(d) for d in node.decorator_list):
                out.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and is_cache(node.value.func):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


class Lifetimes:
    """Which objects a file's functions reach that outlive their call (see the module docstring)."""

    def __init__(self, sc: Names) -> None:
        self.sc = sc
        self.classes = {n.name: n for n in sc.tree.body if isinstance(n, ast.ClassDef)}
        self.cached = cached_functions(sc)
        self.at_import = list(_import_nodes(sc.tree))
        """What runs when the module is imported (module level, class bodies, decorators and
        defaults of functions defined there), not inside a function's call, nor a
        `if __name__ == "__main__":` block (run as a script)."""
        self.decorators = [
            d.func if isinstance(d, ast.Call) else d
            for n in self.at_import
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            for d in n.decorator_list
        ]
        self.persistent_classes = self._persistent_classes()
        self.factories = self._factories()
        self.scopes: dict[int, Scope] = {}
        for node in ast.walk(sc.tree):
            if isinstance(node, _FUNCTION):
                self.scopes[id(node)] = self._scope(node)

    # -- what persists -----------------------------------------------------------------------------

    def _persistent_classes(self) -> set[str]:
        """Classes of this file with an instance made (or used as a decorator) at import."""
        made = {n.func.id for n in self.at_import if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        return (made | {d.id for d in self.decorators if isinstance(d, ast.Name)}) & set(self.classes)

    def _factories(self) -> set[int]:
        """Functions whose products outlive a kernel call: called (or decorating) at import, a
        lambda called at import, cached, or called inside a cached function."""
        by_name = {n.name: n for n in self.sc.tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        cached = [by_name[name] for name in self.cached if name in by_name]
        calls = [n for n in self.at_import if isinstance(n, ast.Call)]
        calls += [n for fn in cached for n in ast.walk(fn) if isinstance(n, ast.Call)]
        out = {id(fn) for fn in cached} | {id(n.func) for n in calls if isinstance(n.func, ast.Lambda)}
        names = {n.func.id for n in calls if isinstance(n.func, ast.Name)}
        names |= {d.id for d in self.decorators if isinstance(d, ast.Name)}
        return out | {id(by_name[name]) for name in names if own(self.sc, name) and name in by_name}

    def default_kind(self, default: ast.expr) -> str:
        """ "plain" (a constant, a tuple of them, a lambda, an immutable constructor), "mutable"
        (a container literal, a mutable constructor, an instance of a class of this file that is
        not frozen) or "other" (a reference or a call: persistent if changed)."""
        if isinstance(default, ast.Constant | ast.Lambda | ast.JoinedStr):
            return "plain"
        if isinstance(default, ast.Tuple):
            kinds = {self.default_kind(e) for e in default.elts}
            return "mutable" if "mutable" in kinds else "other" if "other" in kinds else "plain"
        if isinstance(default, ast.UnaryOp):
            return self.default_kind(default.operand)
        if isinstance(default, ast.BinOp):
            kinds = {self.default_kind(default.left), self.default_kind(default.right)}
            return "plain" if kinds == {"plain"} else "other"
        if isinstance(default, ast.Dict | ast.List | ast.Set | ast.ListComp | ast.SetComp | ast.DictComp):
            return "mutable"
        if isinstance(default, ast.Call):
            if isinstance(default.func, ast.Name) and default.func.id in self.classes:
                return "other" if self._immutable(self.classes[default.func.id]) else "mutable"
            resolved = self.sc.resolve(default.func)
            if resolved and resolved[1]:
                if _among(resolved[0], MUTABLE_FACTORIES):
                    return "mutable"
                if _among(resolved[0], IMMUTABLE_FACTORIES):
                    return "plain"
            return "other"
        return "other"

    def _immutable(self, cls: ast.ClassDef) -> bool:
        """A frozen dataclass, a NamedTuple, an Enum or a tuple: its instances cannot change."""
        for dec in cls.decorator_list:
            resolved = self.sc.resolve(dec.func if isinstance(dec, ast.Call) else dec)
            if (
                resolved
                and resolved[0] == "dataclasses.dataclass"
                and isinstance(dec, ast.Call)
                and any(
                    k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in dec.keywords
                )
            ):
                return True
        for base in cls.bases:
            resolved = self.sc.resolve(base)
            if resolved and resolved[0] in IMMUTABLE_BASES:
                return True
        return False

    # -- scopes --------------------------------------------------------------------------------------

    def _scope(self, fn: Fn) -> Scope:
        a = fn.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
        scope = Scope(fn, params, local={p.arg for p in params})
        scope.nodes = list(_own_nodes(fn))
        for n in scope.nodes:
            if isinstance(n, ast.Global):
                scope.globals |= set(n.names)
            elif isinstance(n, ast.Nonlocal):
                scope.nonlocals |= set(n.names)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                scope.local.add(n.id)
            elif isinstance(n, ast.alias):
                scope.local.add(n.asname or n.name.split(".")[0])
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n is not fn:
                scope.local.add(n.name)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                scope.local.add(n.name)
        scope.local -= scope.globals | scope.nonlocals
        defaults = list(zip(reversed([*a.posonlyargs, *a.args]), reversed(a.defaults), strict=False))
        defaults += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        for p, d in defaults:
            if self.default_kind(d) != "plain":
                scope.roots[p.arg] = f"default argument {p.arg}"
        cls = self.method_of(fn)
        if cls is not None and scope.params and not is_static(fn):
            first = scope.params[0].arg
            if _is_classmethod(fn):
                scope.roots[first] = "class attribute"
            elif cls.name in self.persistent_classes and getattr(fn, "name", "") not in INIT_METHODS:
                scope.roots[first] = f"state of the module-level {cls.name} instance"
        return scope

    def method_of(self, fn: Fn) -> ast.ClassDef | None:
        parent = self.sc.parents.get(id(fn))
        return parent if isinstance(parent, ast.ClassDef) and not isinstance(fn, ast.Lambda) else None

    def enclosing(self, fn: Fn) -> list[Fn]:
        """The functions around fn, innermost first (class scopes skipped, as Python does)."""
        out: list[Fn] = []
        p = self.sc.parents.get(id(fn))
        while p is not None:
            if isinstance(p, _FUNCTION):
                out.append(p)
            p = self.sc.parents.get(id(p))
        return out

    def escapes(self, inner: Fn, outer: Fn) -> bool:
        """Whether the function (or the function around it) made inside `outer` outlives the
        call: used as a value (returned, stored, passed on) or decorated, not only called."""
        node: ast.AST = inner
        p = self.sc.parents.get(id(node))
        while p is not None and p is not outer:  # the child of outer that holds inner
            if isinstance(p, _FUNCTION):
                node = p
            p = self.sc.parents.get(id(p))
        name = ""
        if isinstance(node, ast.Lambda):
            parent = self.sc.parents.get(id(node))
            if isinstance(parent, ast.Call) and parent.func is node:
                return False
            if not (
                isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)
            ):
                return True
            name = parent.targets[0].id  # run = lambda: ...; run(): as a def
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.decorator_list:
                return True
            name = node.name
        else:
            return False
        for n in self.scopes[id(outer)].nodes:
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                parent = self.sc.parents.get(id(n))
                if not (isinstance(parent, ast.Call) and parent.func is n):
                    return True
        return False

    def _root(self, name: str, scope: Scope) -> str | None:
        """What a name read in the scope holds that outlives the call (None: nothing)."""
        if name in scope.roots:
            return scope.roots[name]
        if name in scope.local:
            return None
        if name in scope.globals:
            return f"module-level {name}" if name in self.sc.module_names else None
        for outer in self.enclosing(scope.fn):
            if name in self.scopes[id(outer)].local:
                if id(outer) in self.factories and self.escapes(scope.fn, outer):
                    return f"closure variable {name} of {function_name(outer)}"
                return None
        if name in self.sc.module_names and own(self.sc, name):
            return f"module-level {name}"
        return None

    def holds(self, node: ast.AST, scope: Scope) -> str | None:
        """What the expression reaches that outlives the call (X.a[k].b of a root, X.get(k),
        getattr(X, ...), vars(X), type(self), self.__class__, a cached function's result)."""
        while True:
            if isinstance(node, ast.Attribute) and node.attr == "__class__":
                return "class attribute"
            if isinstance(node, ast.Attribute | ast.Subscript):
                node = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in PERSISTENT_LOOKUPS
            ):
                node = node.func.value
            elif isinstance(node, ast.Call):
                fn = self.sc.resolve(node.func)
                if fn and fn[1] and builtin_name(fn[0]) in ("getattr", "vars") and node.args:
                    node = node.args[0]
                elif fn and fn[1] and builtin_name(fn[0]) == "type" and len(node.args) == 1:
                    return "class attribute"
                elif (
                    isinstance(node.func, ast.Name)
                    and node.func.id in self.cached
                    and self._root(node.func.id, scope) is not None
                ):
                    return f"the result of the cached {node.func.id}()"
                else:
                    return None
            elif isinstance(node, ast.Name):
                return self._root(node.id, scope)
            else:
                return None


def _import_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    stack: list[ast.AST] = list(tree.body)
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack += [*getattr(n, "decorator_list", []), *n.args.defaults, *filter(None, n.args.kw_defaults)]
        elif isinstance(n, ast.If) and _main_guard(n.test):
            stack += n.orelse
        else:
            stack += list(ast.iter_child_nodes(n))


def _main_guard(test: ast.expr) -> bool:
    """`__name__ == "__main__"`."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _own_nodes(fn: Fn) -> Iterator[ast.AST]:
    """fn's own nodes: its body, and of nested functions and classes only what runs in fn
    (decorators, defaults, bases), not their bodies. fn's own defaults run outside it."""
    stack: list[ast.AST] = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack += [*getattr(n, "decorator_list", []), *n.args.defaults, *filter(None, n.args.kw_defaults)]
        elif isinstance(n, ast.ClassDef):
            stack += [*n.decorator_list, *n.bases, *n.keywords]
        else:
            stack += list(ast.iter_child_nodes(n))


def yields(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A yield in fn's own body (not in a nested function): fn makes a generator."""
    stack: list[ast.AST] = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Yield | ast.YieldFrom):
            return True
        if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            stack += list(ast.iter_child_nodes(n))
    return False


def own(sc: Names, name: str) -> bool:
    """Whether a name is the file's own, not only an import's alias: never aliased, or also
    bound to something else (`_C = {}` at module level and `_C = torch.float32` in a function
    that never runs: an alias pollution must not hide module state)."""
    return name not in sc.aliases or name in sc.ambiguous


def _among(qualified: str, prefixes: frozenset[str]) -> bool:
    return any(qualified == p or qualified.startswith(p + ".") for p in prefixes)


def builtin_name(qualified: str) -> str:
    """The builtin's name (`getattr`, `dict.update`) of a resolved name, or ""."""
    for prefix in (BUILTIN, "builtins."):
        if qualified.startswith(prefix):
            return qualified[len(prefix) :]
    return ""


def is_static(fn: Fn) -> bool:
    """Decorated @staticmethod: its first parameter is no `self`."""
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(fn, "decorator_list", []))


def _is_classmethod(fn: Fn) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in getattr(fn, "decorator_list", []))


def function_name(fn: Fn) -> str:
    """`f()` for a def, "a lambda" for a lambda, as the findings name them."""
    return f"{fn.name}()" if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) else "a lambda"
