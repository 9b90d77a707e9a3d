"""What outlives a kernel call, for the diff scan's state rules: `Lifetimes`, which the
`module-state` rule reads (engine/diffscan/state.py), and the `input-cache` rule, results kept
between calls keyed on the caller's input (at the end, below). Pure.

`Lifetimes` reads a file once and answers, for any expression inside a function, whether it
reaches an object that persists from one call to the next, and which: a module-level name, a
default argument that is no plain value, a closure variable of a factory whose products
escape, a class attribute, the state of a class instance made at import, a local bound to
one of these, or what a cached function returns. It also knows what runs at import (and so
is no per-call state) and each function's own scope. What counts as *changing* such an
object is the rule's, in state.py.

`input-cache`. The bench hands the same tensors to every timed call; a kernel that remembers its output per
input object (or per pointer, or per hashable copy of the data) returns it again without
computing. The rule looks for:

- a cache decorator (`functools.cache`, `lru_cache`...) on a function that takes tensors
  (annotated as one, or read through an attribute only a tensor has: `x.shape`,
  `x.data_ptr()`), or such a function wrapped by one;
- dictionary keys, lookups and membership tests built from `data_ptr()`, `id()`, `hash()`,
  storage pointers or `ctypes.addressof` (and the locals bound to them);
- a cached function of the file called with its caller's data made hashable
  (`_cached(tuple(xs))`, `_cached(x.tobytes())`);
- an attribute stored on a parameter's object after probing whether it is there, by a
  function that is not a method (`if hasattr(x, "_out"): return x._out ... x._out = y`);
- a container the caller hands in, changed (`cfg.setdefault("_memo", y)`, `out.append(y)`,
  `cfg["_memo"] = y`, `kw["memo"][k] = y`), or an attribute set on what it hands in
  (`x._out = y`, read back next call through `dir(x)` or `x.__dict__`): the bench's own
  objects, passed to every timed call, keep it. Not `**kwargs` itself (a fresh dict per call),
  nor a helper of the file that is only ever handed its caller's locals.

Weak containers keyed on objects (`weakref.WeakKeyDictionary`) are found by name
(engine/diffscan/qualified.py); state on module-level names by engine/diffscan/state.py.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from kopt_supervisor.engine.diffscan.bindings import (
    FileNames,
    Fn,
    Names,
    builtin_name,
    cached_functions,
    function_name,
    import_nodes,
    is_classmethod,
    is_static,
    own,
    own_nodes,
)
from kopt_supervisor.engine.diffscan.findings import Raw
from kopt_supervisor.engine.diffscan.giveaways import (
    CACHE_DECORATORS,
    CONTAINER_MUTATORS,
    IMMUTABLE_BASES,
    IMMUTABLE_FACTORIES,
    INIT_METHODS,
    LOOKUPS,
    MUTABLE_FACTORIES,
    MUTATING_FUNCTIONS,
    PERSISTENT_LOOKUPS,
    POINTER_METHODS,
    TENSOR_ATTRS,
    TENSOR_TYPES,
)

_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


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


class Lifetimes:
    """Which objects a file's functions reach that outlive their call (see the module docstring)."""

    def __init__(self, sc: Names) -> None:
        self.sc = sc
        self.classes = {n.name: n for n in sc.tree.body if isinstance(n, ast.ClassDef)}
        self.cached = cached_functions(sc)
        self.at_import = list(import_nodes(sc.tree))
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
        scope.nodes = list(own_nodes(fn))
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
            if is_classmethod(fn):
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


def _among(qualified: str, prefixes: frozenset[str]) -> bool:
    return any(qualified == p or qualified.startswith(p + ".") for p in prefixes)


# -- the input-cache rule: results kept between calls keyed on the caller's input ---------------


def cached_on_tensors(sc: FileNames, node: ast.AST) -> Iterator[Raw]:
    """A cache decorator (functools.cache, lru_cache...) on a function of this file that takes
    tensors, or such a function wrapped by one (`f = functools.cache(g)`): the cache is keyed
    on the tensor objects the bench hands in."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            resolved = sc.resolve(target)
            if resolved and resolved[1] and resolved[0] in CACHE_DECORATORS and _takes_tensors(sc, node):
                yield Raw("input-cache", dec, f"  # caches {node.name}(), which takes tensors")
    if isinstance(node, ast.Call):
        fn = node.func.func if isinstance(node.func, ast.Call) else node.func
        resolved = sc.resolve(fn)
        wrapped = node.args[0] if node.args and isinstance(node.func, ast.Call | ast.Attribute | ast.Name) else None
        if resolved and resolved[1] and resolved[0] in CACHE_DECORATORS and isinstance(wrapped, ast.Name):
            cached = sc.defs.get(wrapped.id)
            if cached is not None and _takes_tensors(sc, cached):
                yield Raw("input-cache", node, f"  # caches {cached.name}(), which takes tensors")


def input_caches(sc: FileNames) -> Iterator[Raw]:
    """The file-wide `input-cache` findings: pointer keys, cached functions called with the
    caller's data, attributes kept on the caller's objects."""
    yield from _pointer_keys(sc)
    yield from _data_keys(sc)
    yield from _input_attributes(sc)
    yield from _argument_containers(sc)


def _takes_tensors(sc: FileNames, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A parameter annotated as a tensor or array, or read through an attribute only a
    tensor has (x.shape, x.data_ptr(), x.dtype): the cache is keyed on the object."""
    params = [a for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs] if a.arg not in ("self", "cls")]
    names = {a.arg for a in params}
    for a in params:
        if a.annotation is None:
            continue
        text = ast.unparse(a.annotation)
        resolved = sc.resolve(a.annotation)
        if (resolved and resolved[0] in TENSOR_TYPES) or re.search(r"\b(Tensor|ndarray)\b", text):
            return True
    return any(
        isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id in names
        and n.attr in TENSOR_ATTRS
        for n in ast.walk(fn)
    )


def _pointer_keys(sc: FileNames) -> Iterator[Raw]:
    """Dictionary keys, lookups and membership tests built from data_ptr()/id()/storage."""
    for fn in [sc.tree, *(n for n in ast.walk(sc.tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]:
        tainted: set[str] = set()
        for _ in range(2):
            for n in ast.walk(fn):
                if (
                    isinstance(n, ast.Assign | ast.AnnAssign | ast.NamedExpr)
                    and n.value is not None
                    and _pointerish(sc, n.value, tainted)
                ):
                    for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                        tainted |= {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
        for n in ast.walk(fn):
            keys: list[ast.AST] = []
            if isinstance(n, ast.Subscript):
                keys = [n.slice]
            elif isinstance(n, ast.Dict):
                keys = [k for k in n.keys if k is not None]
            elif isinstance(n, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in n.ops):
                keys = [n.left]
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LOOKUPS and n.args:
                keys = [n.args[0]]
            if any(_pointerish(sc, k, tainted) for k in keys):
                yield Raw("input-cache", n, "  # keyed on a pointer or object identity")


def _data_keys(sc: FileNames) -> Iterator[Raw]:
    """A cached function of this file called with its caller's data turned hashable
    (`_cached(tuple(xs), s)`, `_cached(x.tobytes())`): an output cache keyed on the input."""
    cached = cached_functions(sc)
    if not cached:
        return
    for fn in ast.walk(sc.tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        for n in ast.walk(fn):
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id in cached
                and any(_data_of(sc, a, params) for a in [*n.args, *(k.value for k in n.keywords)])
            ):
                yield Raw("input-cache", n, f"  # caches {n.func.id}() on the caller's data")


def _input_attributes(sc: FileNames) -> Iterator[Raw]:
    """An attribute stored on a parameter's object after probing whether it is there, by a
    function that is not a method (`if hasattr(x, "_out"): return x._out ... x._out = y`,
    `getattr(x, "_n", 0)`, `try: x._out except AttributeError`): a cache carried by the
    caller's input, which the bench hands again to every timed call."""
    for fn in ast.walk(sc.tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or isinstance(
            sc.parents.get(id(fn)), ast.ClassDef
        ):
            continue
        params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        stores: list[tuple[ast.AST, str, str | None]] = []
        probes: set[tuple[str, str]] = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in params:
                if isinstance(n.ctx, ast.Store | ast.Del):
                    stores.append((n, n.value.id, n.attr))
                elif _in_try(sc, n, fn):
                    probes.add((n.value.id, n.attr))
            elif (
                isinstance(n, ast.Call)
                and len(n.args) >= 2
                and isinstance(n.args[0], ast.Name)
                and n.args[0].id in params
            ):
                name = n.args[1]
                key = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
                if sc.is_builtin(n.func, "hasattr") or (sc.is_builtin(n.func, "getattr") and len(n.args) == 3):
                    if key is not None:
                        probes.add((n.args[0].id, key))
                elif sc.is_builtin(n.func, "setattr") or sc.is_builtin(n.func, "delattr"):
                    stores.append((n, n.args[0].id, key))
        for node, param, attr in stores:
            if attr is None or (param, attr) in probes:
                yield Raw("input-cache", node, f"  # kept on the caller's {param} between calls")


def _argument_containers(sc: FileNames) -> Iterator[Raw]:
    """A container method, a string-keyed item store or a mutating function on what a
    parameter holds (see the module docstring)."""
    fns = [n for n in ast.walk(sc.tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)]
    handed = _handed_parameters(fns)
    for fn in fns:
        name = getattr(fn, "name", "")
        params = _parameters(fn, sc)
        if name in handed.calls and not handed.params.get(name):
            continue  # a helper only ever handed its callers' own locals
        for _ in range(2):  # memo = kw.get("memo"); m = cfg: locals that hold the caller's objects
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign | ast.NamedExpr | ast.AnnAssign) and n.value is not None:
                    got = _param_root(n.value, params, keyed=True)
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    if got is not None:
                        params.held.update(
                            {t.id: got for t in targets if isinstance(t, ast.Name) and t.id not in params.held}
                        )
        for n in ast.walk(fn):
            root: tuple[str, bool] | None = None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CONTAINER_MUTATORS:
                root = _param_root(n.func.value, params)
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store | ast.Del):
                keyed = isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)
                found = _param_root(n.value, params, keyed=keyed)
                root = found if found and found[1] else None  # out[i] = y on a tensor is its output
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store | ast.Del):
                root = _param_root(n.value, params, keyed=True)  # x._out = y: on the caller's own object
            elif isinstance(n, ast.Call) and n.args:
                q = sc.resolve(n.func)
                if q and q[1] and q[0] in MUTATING_FUNCTIONS:
                    found = _param_root(n.args[0], params)
                    root = found if found and found[1] else None  # numpy.copyto(out, y) is an output
            if root is not None and (root[1] or root[0] not in params.fresh):
                yield Raw("input-cache", n, f"  # kept in the caller's {root[0]} between calls")


class _Params(set[str]):
    """A function's parameters (not self/cls), which of them are fresh per call (*args,
    **kwargs), and the locals bound to what a parameter holds."""

    fresh: set[str]
    held: dict[str, tuple[str, bool]]


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, sc: FileNames) -> _Params:
    a = fn.args
    names = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    if isinstance(sc.parents.get(id(fn)), ast.ClassDef) and names:
        names = names[1:]
    out = _Params(names + [p.arg for p in filter(None, [a.vararg, a.kwarg])])
    out.fresh = {p.arg for p in filter(None, [a.vararg, a.kwarg])}
    out.held = {}
    return out


def _param_root(node: ast.AST, params: _Params, *, keyed: bool = False) -> tuple[str, bool] | None:
    """(the parameter, whether reached through an item or lookup: `p["k"]`, `p.get(k)`, `p.a`)
    when node is a parameter's object or part of it; a bare `p` counts only when `keyed` (a
    string key: a dict, never a tensor)."""
    deep = False
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
            deep = True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOOKUPS:
            node = node.func.value
            deep = True
        else:
            break
    if isinstance(node, ast.Name) and node.id in params.held:
        param, was_deep = params.held[node.id]
        return (param, was_deep or deep or keyed)
    if isinstance(node, ast.Name) and node.id in params:
        return (node.id, deep or keyed)
    return None


@dataclass
class _Handed:
    calls: set[str] = field(default_factory=set)
    """Names of the file's functions it calls itself."""
    params: dict[str, bool] = field(default_factory=dict)
    """Of those, whether some call hands one a parameter of its caller."""


def _handed_parameters(fns: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda]) -> _Handed:
    out = _Handed()
    for fn in fns:
        a = fn.args
        own = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]}
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                out.calls.add(n.func.id)
                args = [*n.args, *(k.value for k in n.keywords)]
                passed = any(isinstance(x, ast.Name) and x.id in own for arg in args for x in ast.walk(arg))
                out.params[n.func.id] = out.params.get(n.func.id, False) or passed
    return out


def _in_try(sc: FileNames, node: ast.AST, fn: ast.AST) -> bool:
    """node lies in a try whose handler catches AttributeError (or everything: bare)."""
    p = sc.parents.get(id(node))
    while p is not None and p is not fn:
        if isinstance(p, ast.Try) and any(
            h.type is None or any(isinstance(t, ast.Name) and t.id == "AttributeError" for t in ast.walk(h.type))
            for h in p.handlers
        ):
            return True
        p = sc.parents.get(id(p))
    return False


def _data_of(sc: FileNames, node: ast.AST, params: set[str]) -> bool:
    """tuple(p), frozenset(p), bytes(p), bytearray(p), hash(p) of a parameter p, or
    p....tobytes() / p....tolist()."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("tobytes", "tolist"):
        root: ast.AST = node.func.value
        while isinstance(root, ast.Attribute | ast.Call | ast.Subscript):
            root = root.func if isinstance(root, ast.Call) else root.value
        return isinstance(root, ast.Name) and root.id in params
    first = node.args[0] if node.args else None
    return (
        isinstance(first, ast.Name)
        and first.id in params
        and any(sc.is_builtin(node.func, b) for b in ("tuple", "frozenset", "bytes", "bytearray", "hash"))
    )


def _pointerish(sc: FileNames, node: ast.AST, tainted: set[str]) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in POINTER_METHODS:
            return True
        if isinstance(n, ast.Call) and (sc.is_builtin(n.func, "id") or sc.is_builtin(n.func, "hash")):
            return True
        if isinstance(n, ast.Name) and n.id in tainted:
            return True
        resolved = sc.resolve(n) if isinstance(n, ast.Attribute) else None
        if resolved and resolved[0] == "ctypes.addressof":
            return True
    return False
