"""What each name of a Python file stands for, for the diff scan's rules. Pure.

`FileNames` reads a parsed file once: its imports and simple aliases (`import time as t`,
`from time import perf_counter as pc`, `t = time`, `m = __import__("time")`,
`importlib.import_module("time")`, `sys.modules["time"]`, `getattr(time, "perf_counter")`,
`typing.sys`, `len.__self__`), the names it binds and on which lines, its module-level names,
functions and docstrings, and every node's parent. Beside the aliases, `maybe`: what a loop
variable over a literal (`for m in (time,)`) or a parameter of the file's own function
(`patch(time)`) may hold, and `ambiguous`: alias names the file also binds to something else
(a module-level `_C = {}` and a `_C = torch.float32` in some function: still module state). `resolve` turns a name-like expression into the qualified name it
stands for, so a rule written against `time.perf_counter` sees every spelling of it. The
rules themselves live in engine/diffscan/python.py (and the rooms it calls).

Below `FileNames`, what every state rule asks of a file's names and functions (`Names`, the
part of `FileNames` they read): whether a name is the file's own (`own`), a builtin's name
(`builtin_name`), which functions are cached (`cached_functions`), what runs at import and a
function's own nodes (`import_nodes`, `own_nodes`), whether a function yields, is a static or a class method, and how a finding
names it (`function_name`).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from typing import Protocol

from kopt_supervisor.engine.diffscan.giveaways import CACHE_DECORATORS
from kopt_supervisor.engine.diffscan.qualified import BUILTIN, BUILTIN_NAMES, QUALIFIED, REEXPORTED


class FileNames:
    """The bindings of one parsed file and the resolution of its names."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[int, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent
        self.aliases: dict[str, str] = {}
        self.bind_lines: dict[str, set[int]] = defaultdict(set)
        self.bound: set[str] = set()
        self.module_names: set[str] = set()
        self.defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.docstrings: set[int] = set()
        self.star_modules: list[str] = []
        self.imported_modules: set[str] = set()
        """Names bound by `import x` / `import x as y` (modules for sure)."""
        self.maybe: dict[str, set[str]] = defaultdict(set)
        self.maybe_attrs: dict[str, set[str]] = defaultdict(set)
        self.returns: dict[str, set[str]] = defaultdict(set)
        self.ambiguous: set[str] = set()
        self.assigned: dict[str, list[ast.expr]] = defaultdict(list)
        """Every value the file binds to a name (`n = "x"`, `for n in ("a", "b")`): what a
        name used as a getattr key may be."""
        self._collect()
        self._collect_maybe()

    # -- bindings -----------------------------------------------------------------------------

    def _collect(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    name = a.asname or a.name.split(".")[0]
                    self.aliases[name] = a.name if a.asname else name
                    self.imported_modules.add(name)
                    self._bind(name, node)
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                if any(a.name == "*" for a in node.names) and node.level == 0 and node.module:
                    self.star_modules.append(node.module)
                for a in node.names:
                    name = a.asname or a.name
                    self.aliases[name] = f"{base}.{a.name}" if base and not base.endswith(".") else base + a.name
                    self._bind(name, node)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self._bind(node.name, node)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.defs.setdefault(node.name, node)
                    for arg in [
                        *node.args.posonlyargs,
                        *node.args.args,
                        *node.args.kwonlyargs,
                        *filter(None, [node.args.vararg, node.args.kwarg]),
                    ]:
                        self._bind(arg.arg, node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                self._bind(node.id, node)
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Name):
                        self.assigned[t.id].append(node.value)
            elif (
                isinstance(node, ast.For | ast.AsyncFor | ast.comprehension)
                and isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.Tuple | ast.List | ast.Set)
            ):
                self.assigned[node.target.id] += node.iter.elts
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self._bind(node.name, node)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                body = node.body
                if (
                    body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)
                ):
                    self.docstrings.add(id(body[0].value))
        for stmt in self.tree.body:
            targets = (
                stmt.targets
                if isinstance(stmt, ast.Assign)
                else [stmt.target]
                if isinstance(stmt, ast.AnnAssign | ast.AugAssign)
                else []
            )
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self.module_names.add(n.id)
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.module_names.add(stmt.name)  # f.cache[k] = v, K.calls += 1
        for _ in range(3):  # aliases of aliases: t = time; u = t
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Assign):
                    targets, value = list(node.targets), node.value
                elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                    targets, value = [node.target], node.value
                else:
                    continue
                resolved = self.resolve(value)
                if resolved is None or not resolved[1]:
                    continue
                for t in targets:
                    if isinstance(t, ast.Name) and t.id not in self.aliases:
                        self.aliases[t.id] = resolved[0]
        self._collect_ambiguous()

    def _collect_ambiguous(self) -> None:
        """Alias names also bound to what is no import (a value, a def, a parameter, a loop)."""
        for node in ast.walk(self.tree):
            names: list[str] = []
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
                value = getattr(node, "value", None)
                resolved = self.resolve(value) if value is not None and not isinstance(node, ast.AugAssign) else None
                if resolved is None or not resolved[1]:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension | ast.withitem):
                target = node.optional_vars if isinstance(node, ast.withitem) else node.target
                names = [n.id for n in ast.walk(target) if isinstance(n, ast.Name)] if target is not None else []
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.arg):
                names = [node.arg]
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names = [node.name]
            self.ambiguous |= {n for n in names if n in self.aliases}

    def _collect_maybe(self) -> None:
        """`maybe`: what a name may hold of imported things, until nothing is new: a loop
        variable over a literal of them, a parameter of this file's function (or lambda)
        called with one or defaulting to one, a name bound to the result of this file's
        function that returns one; `maybe_attrs`: an attribute name the file sets to one
        anywhere (`self.m = triton.testing`, `m = ...` in a class body), so `C.m.x = f` is
        a store into it."""
        lambdas = {
            t.id: n.value
            for n in ast.walk(self.tree)
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        fns = [n for n in ast.walk(self.tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)]
        for _ in range(4):
            grew = False
            for node in ast.walk(self.tree):
                for name, value in self._maybe_pairs(node, lambdas):
                    for q in self.possible(value):
                        if q not in self.maybe[name]:
                            self.maybe[name].add(q)
                            grew = True
                for attr, value in self._attr_pairs(node):
                    for q in self.possible(value):
                        if q not in self.maybe_attrs[attr]:
                            self.maybe_attrs[attr].add(q)
                            grew = True
            for fn in fns:
                body = (
                    [fn.body]
                    if isinstance(fn, ast.Lambda)
                    else [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
                )
                got = {q for value in body for q in self.possible(value)}
                fn_name = fn.name if not isinstance(fn, ast.Lambda) else ""
                if fn_name and not got <= self.returns[fn_name]:
                    self.returns[fn_name] |= got
                    grew = True
            if not grew:
                break

    def _maybe_pairs(self, node: ast.AST, lambdas: dict[str, ast.Lambda]) -> list[tuple[str, ast.AST]]:
        """(name, value) pairs where the name takes the value (see `_collect_maybe`)."""
        if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension) and isinstance(
            node.iter, ast.Tuple | ast.List | ast.Set
        ):
            return [(n.id, e) for e in node.iter.elts for n in ast.walk(node.target) if isinstance(n, ast.Name)]
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            return [(t.id, node.value) for t in targets if isinstance(t, ast.Name)]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            pairs: list[tuple[str, ast.AST]] = [
                (p.arg, d) for p, d in zip(reversed(positional), reversed(a.defaults), strict=False)
            ]
            return pairs + [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        if not isinstance(node, ast.Call):
            return []
        fn = node.func
        target: ast.AST | None = (
            fn
            if isinstance(fn, ast.Lambda)
            else self.defs.get(fn.id) or lambdas.get(fn.id)
            if isinstance(fn, ast.Name)
            else None
        )
        if not isinstance(target, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return []
        args: list[ast.AST] = []
        for arg in node.args:  # patch(*[triton.testing]): a literal spread is its elements
            if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.List | ast.Tuple):
                args += arg.value.elts
            else:
                args.append(arg)
        params = [*target.args.posonlyargs, *target.args.args]
        pairs = [(p.arg, v) for p, v in zip(params, args, strict=False) if not isinstance(v, ast.Starred)]
        named = {p.arg for p in [*params, *target.args.kwonlyargs]}
        return pairs + [(k.arg, k.value) for k in node.keywords if k.arg in named]

    @staticmethod
    def _attr_pairs(node: ast.AST) -> list[tuple[str, ast.AST]]:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            return [(t.attr, node.value) for t in targets if isinstance(t, ast.Attribute)]
        if isinstance(node, ast.ClassDef):
            return [
                (t.id, stmt.value)
                for stmt in node.body
                if isinstance(stmt, ast.Assign)
                for t in stmt.targets
                if isinstance(t, ast.Name)
            ]
        return []

    def possible(self, node: ast.AST) -> set[str]:
        """The qualified names of imported things an expression may stand for: what it
        resolves to, or what `maybe` says a name may hold (an attribute of it too, or an
        attribute the file sets to one), or what this file's function it calls returns."""
        resolved = self.resolve(node)
        if resolved and resolved[1]:
            return {resolved[0]}
        if isinstance(node, ast.Name):
            return set(self.maybe.get(node.id, ()))
        if isinstance(node, ast.Attribute):
            return {f"{q}.{node.attr}" for q in self.possible(node.value)} | set(self.maybe_attrs.get(node.attr, ()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and own_function(self, node.func.id):
            return set(self.returns.get(node.func.id, ()))
        return set()

    def _bind(self, name: str, node: ast.AST) -> None:
        self.bound.add(name)
        lo = getattr(node, "lineno", 0)
        self.bind_lines[name].add(lo)

    # -- resolution -----------------------------------------------------------------------------

    def resolve(self, node: ast.AST) -> tuple[str, bool] | None:
        """(qualified name, whether it comes from an import) of a name-like expression."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id], True
            if node.id in BUILTIN_NAMES and node.id not in self.bound:
                return f"{BUILTIN}{node.id}", True
            if self.star_modules and node.id not in self.bound:  # from os import *; _exit(0)
                options = [f"{m}.{node.id}" for m in self.star_modules]
                return next((q for q in options if _rule_of(q)), options[0]), True
            return node.id, False
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if base and base[1] and node.attr in REEXPORTED:  # typing.sys, f.__builtins__
                return ("builtins" if node.attr == "__builtins__" else node.attr), True
            if base and base[1] and node.attr == "__self__" and base[0].startswith(BUILTIN):
                return "builtins", True  # len.__self__ is the builtins module
            return (f"{base[0]}.{node.attr}", base[1]) if base else None
        if isinstance(node, ast.Call):
            fn = self.resolve(node.func)
            first = node.args[0] if node.args else None
            const = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            if fn and fn[0] in (f"{BUILTIN}__import__", "builtins.__import__", "importlib.import_module") and const:
                return const, True
            if fn and _qualified_builtin(fn[0], "getattr") and len(node.args) >= 2:
                name = node.args[1]
                base = self.resolve(node.args[0]) if node.args else None
                if base and isinstance(name, ast.Constant) and isinstance(name.value, str):
                    return f"{base[0]}.{name.value}", base[1]
            if fn and _qualified_builtin(fn[0], "vars") and first is not None:
                base = self.resolve(first)
                return (f"{base[0]}.__dict__", base[1]) if base else None
            return None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value)
            key = node.slice
            if base and isinstance(key, ast.Constant) and isinstance(key.value, str):
                if base[0] == "sys.modules":
                    return key.value, True
                if base[0].endswith(".__dict__"):
                    return f"{base[0][: -len('.__dict__')]}.{key.value}", base[1]
        return None

    def is_bound(self, name: str) -> bool:
        return name in self.bound or name in self.aliases

    def is_builtin(self, node: ast.AST, name: str) -> bool:
        """node is the builtin `name`, directly, through an alias (o = open) or the module."""
        resolved = self.resolve(node)
        return bool(resolved and resolved[1] and _qualified_builtin(resolved[0], name))


def own_function(names: FileNames, name: str) -> bool:
    """A function this file defines, called by its name (not an import of that name)."""
    return name in names.defs and (name not in names.aliases or name in names.ambiguous)


def _rule_of(qualified: str) -> str | None:
    for rule, prefixes in QUALIFIED.items():
        if any(qualified == p or qualified.startswith(p + ".") for p in prefixes):
            return rule
    return None


def _qualified_builtin(qualified: str, name: str) -> bool:
    return qualified in (f"{BUILTIN}{name}", f"builtins.{name}")


# -- what the state rules ask of a file's names and functions ----------------------------------

Fn = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
"""A function or a lambda: what has a scope of its own."""


class Names(Protocol):
    """What the rules beside the Python scanner read of a file's names (FileNames has it)."""

    tree: ast.Module
    parents: dict[int, ast.AST]
    aliases: dict[str, str]
    ambiguous: set[str]
    module_names: set[str]

    def resolve(self, node: ast.AST) -> tuple[str, bool] | None: ...


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


def import_nodes(tree: ast.Module) -> Iterator[ast.AST]:
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


def own_nodes(fn: Fn) -> Iterator[ast.AST]:
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


def builtin_name(qualified: str) -> str:
    """The builtin's name (`getattr`, `dict.update`) of a resolved name, or ""."""
    for prefix in (BUILTIN, "builtins."):
        if qualified.startswith(prefix):
            return qualified[len(prefix) :]
    return ""


def is_static(fn: Fn) -> bool:
    """Decorated @staticmethod: its first parameter is no `self`."""
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(fn, "decorator_list", []))


def is_classmethod(fn: Fn) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in getattr(fn, "decorator_list", []))


def function_name(fn: Fn) -> str:
    """`f()` for a def, "a lambda" for a lambda, as the findings name them."""
    return f"{fn.name}()" if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) else "a lambda"
