"""The diff scan's `module-state` rule: state a kernel keeps between calls. Pure.

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
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kopt_supervisor.engine.diffscan.findings import Raw
from kopt_supervisor.engine.diffscan.names import (
    BUILTIN,
    CACHE_DECORATORS,
    IMMUTABLE_BASES,
    IMMUTABLE_FACTORIES,
    INIT_METHODS,
    MUTABLE_FACTORIES,
    MUTATING_FUNCTIONS,
    MUTATORS,
    PERSISTENT_LOOKUPS,
)

_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_Fn = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
RULE = "module-state"


class Names(Protocol):
    """What the rule reads of the Python scanner (python._Scanner)."""

    tree: ast.Module
    parents: dict[int, ast.AST]
    aliases: dict[str, str]
    module_names: set[str]

    def resolve(self, node: ast.AST) -> tuple[str, bool] | None: ...


@dataclass
class _Scope:
    fn: _Fn
    params: list[ast.arg]
    local: set[str] = field(default_factory=set)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    nodes: list[ast.AST] = field(default_factory=list)
    """The function's own nodes: its body without nested functions' and classes' bodies."""
    roots: dict[str, str] = field(default_factory=dict)
    """Local names that hold persistent objects -> what they hold ("default argument _memo")."""


def persistent_state(sc: Names) -> Iterator[Raw]:
    """The `module-state` findings of one file (see the module docstring)."""
    yield from _State(sc).findings()


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


class _State:
    def __init__(self, sc: Names) -> None:
        self.sc = sc
        self.classes = {n.name: n for n in sc.tree.body if isinstance(n, ast.ClassDef)}
        self.cached = cached_functions(sc)
        self.at_import = list(_import_nodes(sc.tree))
        """What runs when the module is imported (module level, class bodies, decorators and
        defaults of functions defined there), not inside a function's call, nor a
        `if __name__ == "__main__":` block (run as a script)."""
        self.decorators = [d.func if isinstance(d, ast.Call) else d for n in self.at_import
                           if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                           for d in n.decorator_list]
        self.persistent_classes = self._persistent_classes()
        self.factories = self._factories()
        self.scopes: dict[int, _Scope] = {}
        for node in ast.walk(sc.tree):
            if isinstance(node, _FUNCTION):
                self.scopes[id(node)] = self._scope(node)
        self.helpers: dict[str, tuple[list[str], set[str]]] = {}
        self._find_mutating_helpers()

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
        return out | {id(by_name[name]) for name in names - set(self.sc.aliases) if name in by_name}

    def _default_kind(self, default: ast.expr) -> str:
        """"plain" (a constant, a tuple of them, a lambda, an immutable constructor), "mutable"
        (a container literal, a mutable constructor, an instance of a class of this file that is
        not frozen) or "other" (a reference or a call: persistent if changed)."""
        if isinstance(default, ast.Constant | ast.Lambda | ast.JoinedStr):
            return "plain"
        if isinstance(default, ast.Tuple):
            kinds = {self._default_kind(e) for e in default.elts}
            return "mutable" if "mutable" in kinds else "other" if "other" in kinds else "plain"
        if isinstance(default, ast.UnaryOp):
            return self._default_kind(default.operand)
        if isinstance(default, ast.BinOp):
            kinds = {self._default_kind(default.left), self._default_kind(default.right)}
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
            if resolved and resolved[0] == "dataclasses.dataclass" and isinstance(dec, ast.Call) and any(
                    k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in dec.keywords):
                return True
        for base in cls.bases:
            resolved = self.sc.resolve(base)
            if resolved and resolved[0] in IMMUTABLE_BASES:
                return True
        return False

    # -- scopes --------------------------------------------------------------------------------------

    def _scope(self, fn: _Fn) -> _Scope:
        a = fn.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
        scope = _Scope(fn, params, local={p.arg for p in params})
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
            if self._default_kind(d) != "plain":
                scope.roots[p.arg] = f"default argument {p.arg}"
        cls = self._method_of(fn)
        if cls is not None and scope.params and not _is_static(fn):
            first = scope.params[0].arg
            if _is_classmethod(fn):
                scope.roots[first] = "class attribute"
            elif cls.name in self.persistent_classes and getattr(fn, "name", "") not in INIT_METHODS:
                scope.roots[first] = f"state of the module-level {cls.name} instance"
        return scope

    def _method_of(self, fn: _Fn) -> ast.ClassDef | None:
        parent = self.sc.parents.get(id(fn))
        return parent if isinstance(parent, ast.ClassDef) and not isinstance(fn, ast.Lambda) else None

    def _enclosing(self, fn: _Fn) -> list[_Fn]:
        """The functions around fn, innermost first (class scopes skipped, as Python does)."""
        out: list[_Fn] = []
        p = self.sc.parents.get(id(fn))
        while p is not None:
            if isinstance(p, _FUNCTION):
                out.append(p)
            p = self.sc.parents.get(id(p))
        return out

    def _escapes(self, inner: _Fn, outer: _Fn) -> bool:
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
            if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1
                    and isinstance(parent.targets[0], ast.Name)):
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

    def _root(self, name: str, scope: _Scope) -> str | None:
        """What a name read in the scope holds that outlives the call (None: nothing)."""
        if name in scope.roots:
            return scope.roots[name]
        if name in scope.local:
            return None
        if name in scope.globals:
            return f"module-level {name}" if name in self.sc.module_names else None
        for outer in self._enclosing(scope.fn):
            if name in self.scopes[id(outer)].local:
                if id(outer) in self.factories and self._escapes(scope.fn, outer):
                    return f"closure variable {name} of {_name(outer)}"
                return None
        if name in self.sc.module_names and name not in self.sc.aliases:
            return f"module-level {name}"
        return None

    def _holds(self, node: ast.AST, scope: _Scope) -> str | None:
        """What the expression reaches that outlives the call (X.a[k].b of a root, X.get(k),
        getattr(X, ...), vars(X), type(self), self.__class__, a cached function's result)."""
        while True:
            if isinstance(node, ast.Attribute) and node.attr == "__class__":
                return "class attribute"
            if isinstance(node, ast.Attribute | ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in PERSISTENT_LOOKUPS:
                node = node.func.value
            elif isinstance(node, ast.Call):
                fn = self.sc.resolve(node.func)
                if fn and fn[1] and _builtin(fn[0]) in ("getattr", "vars") and node.args:
                    node = node.args[0]
                elif fn and fn[1] and _builtin(fn[0]) == "type" and len(node.args) == 1:
                    return "class attribute"
                elif isinstance(node.func, ast.Name) and node.func.id in self.cached \
                        and self._root(node.func.id, scope) is not None:
                    return f"the result of the cached {node.func.id}()"
                else:
                    return None
            elif isinstance(node, ast.Name):
                return self._root(node.id, scope)
            else:
                return None

    # -- the findings ------------------------------------------------------------------------------

    def findings(self) -> Iterator[Raw]:
        for scope in self.scopes.values():
            yield from self._defaults(scope)
        yield from self._partials()
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
                    if self._default_kind(arg) == "mutable":
                        yield Raw(RULE, arg, "  # bound by functools.partial: made once, shared by every call")

    def _defaults(self, scope: _Scope) -> Iterator[Raw]:
        a = scope.fn.args
        defaults = list(zip(reversed([*a.posonlyargs, *a.args]), reversed(a.defaults), strict=False))
        defaults += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        for p, d in defaults:
            if self._default_kind(d) == "mutable":
                yield Raw(RULE, d, f"  # default argument {p.arg}: made once, shared by every call")

    def _taint(self, scope: _Scope) -> None:
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
                held = self._holds(value, scope) if names else None
                if held is None:
                    continue
                for name in names:
                    scope.roots[name] = f"{held.split(' (via ')[0]} (via {name})"
                    grew = True

    def _changes(self, scope: _Scope) -> Iterator[Raw]:
        escaping = [o for o in self._enclosing(scope.fn) if id(o) in self.factories and self._escapes(scope.fn, o)]
        for n in scope.nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                if n.id in scope.globals:
                    yield Raw(RULE, n, f"  # global {n.id}")
                elif n.id in scope.nonlocals and escaping:
                    yield Raw(RULE, n, f"  # nonlocal {n.id} of {_name(escaping[0])}")
                continue
            for target in self._changed(n, scope):
                held = self._holds(target, scope) or self._class_container(target, scope)
                if held is not None:
                    yield Raw(RULE, n, f"  # {held} changed per call")
                    break

    def _changed(self, n: ast.AST, scope: _Scope) -> list[ast.AST]:
        """The objects a node changes: X of X[k] = v, X.a = v, X += [v] (a list default), X.append(v),
        X.add_(v), heapq.heappush(X, v), setattr(X, ...), dict.update(X, ...), or an argument a
        function of this file changes (`_remember(X, k, v)`)."""
        if isinstance(n, ast.Subscript | ast.Attribute) and isinstance(n.ctx, ast.Store | ast.Del):
            return [n.value]
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) \
                and n.target.id not in scope.globals | scope.nonlocals:
            return [n.target]
        if not isinstance(n, ast.Call):
            return []
        into = [k.value for k in n.keywords if k.arg == "out"]  # torch.mul(x, 2, out=_BUF)
        return into + self._changed_by_call(n)

    def _changed_by_call(self, n: ast.Call) -> list[ast.AST]:
        fn = n.func
        resolved = self.sc.resolve(fn)
        q = resolved[0] if resolved and resolved[1] else ""  # a module's or a builtin's function
        b = _builtin(q)
        if n.args and (q in MUTATING_FUNCTIONS or b in ("setattr", "delattr", "next")
                       or (b.split(".")[0] in ("dict", "list", "set", "bytearray") and b.split(".")[-1] in MUTATORS)):
            return [n.args[0]]
        if isinstance(fn, ast.Attribute) and (fn.attr in MUTATORS or _in_place(fn.attr)) and not q:
            return [fn.value]
        helper = self.helpers.get(fn.id) if isinstance(fn, ast.Name) and fn.id not in self.sc.aliases else None
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
                changed = {name for n in scope.nodes for t in self._changed(n, scope)
                           if (name := _root_name(t)) is not None and name in params}
                if changed and changed != self.helpers.get(fn.name, ([], set()))[1]:
                    self.helpers[fn.name] = ([p.arg for p in [*fn.args.posonlyargs, *fn.args.args]], changed)
                    grew = True

    def _class_container(self, target: ast.AST, scope: _Scope) -> str | None:
        """`self.A[k] = v`, `self.A.append(x)` where A is bound in the class body: the class's
        own container, shared by every instance."""
        cls = self._method_of(scope.fn)
        if cls is None or not scope.params or _is_static(scope.fn):
            return None
        node = target
        while isinstance(node, ast.Subscript) or (isinstance(node, ast.Attribute) and isinstance(node.value,
                                                                                                 ast.Attribute)):
            node = node.value
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == scope.params[0].arg):
            return None
        seen: set[str] = set()
        todo = [cls]
        while todo:  # the class and its bases of this file
            c = todo.pop()
            seen.add(c.name)
            todo += [self.classes[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in self.classes
                     and b.id not in seen]
            for stmt in c.body:
                names = stmt.targets if isinstance(stmt, ast.Assign) else \
                    [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
                if value is not None and any(isinstance(t, ast.Name) and t.id == node.attr for t in names) \
                        and self._default_kind(value) == "mutable":  # not field(default_factory=...)
                    return f"class attribute {c.name}.{node.attr}"
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
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__" \
        and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant) \
        and test.comparators[0].value == "__main__"


def _root_name(node: ast.AST) -> str | None:
    """x of x, x.a[k].b, x.get(k)."""
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PERSISTENT_LOOKUPS:
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


def _own_nodes(fn: _Fn) -> Iterator[ast.AST]:
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


def _among(qualified: str, prefixes: frozenset[str]) -> bool:
    return any(qualified == p or qualified.startswith(p + ".") for p in prefixes)


def _builtin(qualified: str) -> str:
    """The builtin's name (`getattr`, `dict.update`) of a resolved name, or ""."""
    for prefix in (BUILTIN, "builtins."):
        if qualified.startswith(prefix):
            return qualified[len(prefix):]
    return ""


def _in_place(attr: str) -> bool:
    """A torch in-place method: add_, copy_, index_put_ (not _private_, not __dunder__)."""
    return len(attr) > 1 and attr.endswith("_") and not attr.startswith("_")


def _is_static(fn: _Fn) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(fn, "decorator_list", []))


def _is_classmethod(fn: _Fn) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in getattr(fn, "decorator_list", []))


def _name(fn: _Fn) -> str:
    return f"{fn.name}()" if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) else "a lambda"
