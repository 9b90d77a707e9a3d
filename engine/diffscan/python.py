"""The diff scan's Python rules: `ast` over a changed file's new version. Pure.

Names are resolved through the file's imports and simple aliases (`import time as t`,
`from time import perf_counter as pc`, `t = time`, `m = __import__("time")`,
`importlib.import_module("time")`, `sys.modules["time"]`, `getattr(time, "perf_counter")`),
so a rule written against `time.perf_counter` sees every spelling of it. The parser
normalizes identifiers (NFKC), so `ｔｉｍｅ.perf_counter` is `time.perf_counter` here as it is
to the interpreter. A string passed to exec/eval/compile is parsed and scanned as code; C-like
code in a string (a load_inline source) meets the C rules.

A finding counts when the node it is about touches an added line, or uses a name that an
added line binds (a changed import makes an old line the candidate's).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator

from kopt_supervisor.engine.diffscan.findings import Finding, quote
from kopt_supervisor.engine.diffscan.findings import Raw as _Raw
from kopt_supervisor.engine.diffscan.lazy import lazy_results
from kopt_supervisor.engine.diffscan.names import (
    BUILTIN,
    BUILTIN_NAMES,
    BUILTIN_RULES,
    CACHE_DECORATORS,
    FRAME_ATTRS,
    IDENTITY_DUNDERS,
    LOOKUPS,
    MUTATORS,
    OPEN_WITH_MODE,
    POINTER_METHODS,
    QUALIFIED,
    SAFE_DUNDERS,
    SENSITIVE_MODULES,
    SENSITIVE_NAMES,
    SIDE_PATH,
    STR_METHODS,
    TENSOR_ATTRS,
    TENSOR_TYPES,
    WRITE_METHODS,
)
from kopt_supervisor.engine.diffscan.state import cached_functions, persistent_state
from kopt_supervisor.engine.diffscan.text import C_RULES, GENERIC_RULES, PY_TEXT_RULES, text_rules


def scan_python(path: str, source: str, added: dict[int, str]) -> list[Finding]:
    """Findings of the Python rules on one file's new version (added: new line -> text)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", 0) or 0
        return [Finding("unparsed", path, line, f"does not parse: {getattr(exc, 'msg', exc)}")] + text_rules(
            path, added, PY_TEXT_RULES + GENERIC_RULES)
    lines = source.splitlines()
    scanner = _Scanner(tree)
    out: list[Finding] = []
    for raw in scanner.findings():
        if not _candidates(raw.node, set(added), scanner):
            continue
        line = getattr(raw.node, "lineno", 0)
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        out.append(Finding(raw.rule, path, line, quote(f"{text.strip()}{raw.note}")))
    return out


def _candidates(node: ast.AST, added: set[int], scanner: _Scanner) -> bool:
    """Whether a finding is the candidate's: its node touches an added line, or a name it
    uses is bound on an added line."""
    lo = getattr(node, "lineno", 0)
    hi = getattr(node, "end_lineno", lo) or lo
    if any(lo <= n <= hi for n in added):
        return True
    return any(isinstance(n, ast.Name) and scanner.bind_lines.get(n.id, set()) & added for n in ast.walk(node))


class _Scanner:
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
        self._collect()

    # -- bindings -----------------------------------------------------------------------------

    def _collect(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    name = a.asname or a.name.split(".")[0]
                    self.aliases[name] = a.name if a.asname else name
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
                    for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                                *filter(None, [node.args.vararg, node.args.kwarg])]:
                        self._bind(arg.arg, node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                self._bind(node.id, node)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self._bind(node.name, node)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    self.docstrings.add(id(body[0].value))
        for stmt in self.tree.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                [stmt.target] if isinstance(stmt, ast.AnnAssign | ast.AugAssign) else []
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
            return (f"{base[0]}.{node.attr}", base[1]) if base else None
        if isinstance(node, ast.Call):
            fn = self.resolve(node.func)
            first = node.args[0] if node.args else None
            const = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            if fn and fn[0] in (f"{BUILTIN}__import__", "builtins.__import__", "importlib.import_module") and const:
                return const, True
            if fn and _is_builtin(fn[0], "getattr") and len(node.args) >= 2:
                name = node.args[1]
                base = self.resolve(node.args[0]) if node.args else None
                if base and isinstance(name, ast.Constant) and isinstance(name.value, str):
                    return f"{base[0]}.{name.value}", base[1]
            if fn and _is_builtin(fn[0], "vars") and first is not None:
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

    def _is_bound(self, name: str) -> bool:
        return name in self.bound or name in self.aliases

    def _builtin(self, node: ast.AST, name: str) -> bool:
        """node is the builtin `name`, directly, through an alias (o = open) or the module."""
        resolved = self.resolve(node)
        return bool(resolved and resolved[1] and _is_builtin(resolved[0], name))

    # -- rules ------------------------------------------------------------------------------------

    def findings(self) -> Iterator[_Raw]:
        for node in ast.walk(self.tree):
            yield from self._references(node)
            yield from self._stores(node)
            yield from self._calls(node)
            yield from self._strings(node)
            yield from self._defs(node)
        yield from self._pointer_keys()
        yield from self._data_keys()
        yield from self._input_attributes()
        yield from persistent_state(self)
        yield from lazy_results(self)

    def _references(self, node: ast.AST) -> Iterator[_Raw]:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
            if any(a.name == "*" for a in node.names):  # everything the module has: every rule under it
                names += [p for prefixes in QUALIFIED.values() for p in prefixes if p.startswith(node.module + ".")]
        elif isinstance(node, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
            resolved = self.resolve(node)
            if resolved and resolved[1] and not resolved[0].startswith(BUILTIN):
                names = [resolved[0]]
            elif resolved and resolved[1] and isinstance(node, ast.Name) and node.id in self.aliases:
                rule = BUILTIN_RULES.get(resolved[0][len(BUILTIN):])  # run = eval; run(...)
                if rule:
                    yield _Raw(rule, node)
        for q in names:
            for rule, prefixes in QUALIFIED.items():
                if any(q == p or q.startswith(p + ".") for p in prefixes):
                    note = "  # the bench's own module" if q.split(".")[0] == "__main__" else ""
                    yield _Raw(rule, node, note)  # a name may meet several rules (os.environ.pop, sys.stdout)
        if isinstance(node, ast.Attribute):
            if node.attr in FRAME_ATTRS:
                yield _Raw("frame-inspection", node)
            if node.attr == "__dict__":
                yield _Raw("dynamic-access", node)
            if node.attr == "elapsed_time":
                yield _Raw("clock-time", node)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in BUILTIN_RULES and not self._is_bound(node.id):
                yield _Raw(BUILTIN_RULES[node.id], node)
            parent = self.parents.get(id(node))
            called = isinstance(parent, ast.Call) and parent.func is node
            if node.id in ("setattr", "delattr", "getattr") and not called and not self._is_bound(node.id):
                yield _Raw("dynamic-access", node)
            module = self.aliases.get(node.id)
            if module in SENSITIVE_MODULES and not (isinstance(parent, ast.Attribute) and parent.value is node) \
                    and not called:
                yield _Raw("dynamic-access", node, f"  # the module {module} handed on as a value")
        if isinstance(node, ast.Compare) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS):
            if self._probes_identity(node):
                yield _Raw("worktree-probe", node)
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in ("SystemExit", "KeyboardInterrupt") and not self._is_bound(exc.id):
                yield _Raw("process-exit", node)

    def _probes_identity(self, node: ast.AST) -> bool:
        """__file__, __name__ (other than == "__main__"), cwd or argv compared or searched as text."""
        if isinstance(node, ast.Compare) and len(node.comparators) == 1 and isinstance(node.left, ast.Name) \
                and node.left.id == "__name__" and isinstance(node.comparators[0], ast.Constant) \
                and node.comparators[0].value == "__main__":
            return False
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in IDENTITY_DUNDERS and not self._is_bound(n.id):
                return True
            resolved = self.resolve(n) if isinstance(n, ast.Attribute | ast.Call) else None
            if resolved and resolved[1] and any(resolved[0].startswith(p) for p in QUALIFIED["worktree-probe"]):
                return True
        return False

    def _stores(self, node: ast.AST) -> Iterator[_Raw]:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.For | ast.AsyncFor):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        for target in targets:
            for t in (target.elts if isinstance(target, ast.Tuple | ast.List) else [target]):
                yield from self._store_target(t, node)

    def _store_target(self, t: ast.expr, stmt: ast.AST) -> Iterator[_Raw]:
        at = t if hasattr(t, "lineno") else stmt
        if isinstance(t, ast.Attribute):
            base = self.resolve(t.value)
            if base and base[1]:
                yield _Raw("patch-module", at)
            elif t.attr.startswith("__") and t.attr.endswith("__") and t.attr not in SAFE_DUNDERS:
                yield _Raw("patch-module", at)
            elif not isinstance(t.value, ast.Name | ast.Attribute):
                yield _Raw("patch-module", at, "  # an attribute of a computed object")
            elif isinstance(t.value, ast.Name) and not self._is_bound(t.value.id):
                yield _Raw("patch-module", at, "  # an attribute of a name this file never binds")
        elif isinstance(t, ast.Subscript):
            base = self.resolve(t.value)
            if base and base[0] == "os.environ" and base[1]:
                yield _Raw("env-write", at)
            elif base and (base[0].endswith(".__dict__") or base[0] == "sys.modules"):
                yield _Raw("patch-module", at)
            elif base and base[1] and base[0] == "sys.path":
                yield _Raw("import-tricks", at)
            elif isinstance(t.value, ast.Call) and (self._builtin(t.value.func, "globals")
                                                    or self._builtin(t.value.func, "vars")):
                yield _Raw("patch-module", at)
        elif isinstance(t, ast.Name) and t.id == "__builtins__":
            yield _Raw("builtins", at)

    def _calls(self, node: ast.AST) -> Iterator[_Raw]:
        if not isinstance(node, ast.Call):
            return
        fn = node.func
        q = self.resolve(fn)
        name = q[0] if q and q[1] else None
        if (self._builtin(fn, "setattr") or self._builtin(fn, "delattr")) and node.args:
            first = node.args[0]
            base = self.resolve(first)
            attr = node.args[1] if len(node.args) > 1 else None
            dunder = isinstance(attr, ast.Constant) and isinstance(attr.value, str) and attr.value.startswith("__")
            if (base and base[1]) or dunder or not isinstance(first, ast.Name | ast.Attribute):
                yield _Raw("patch-module", node)
        if isinstance(fn, ast.Attribute):
            if fn.attr in ("__setattr__", "__delattr__"):
                yield _Raw("patch-module", node)
            owner = self.resolve(fn.value)
            if fn.attr in MUTATORS and owner and owner[0].endswith(".__dict__"):
                yield _Raw("patch-module", node)
            if fn.attr in ("insert", "append", "extend", "remove", "pop", "clear") and owner == ("sys.path", True):
                yield _Raw("import-tricks", node)
            if fn.attr in WRITE_METHODS or (fn.attr == "dump" and not (owner and owner[1])):
                yield _Raw("file-write", node)  # p.write_text(...), df.to_csv(...), arr.dump(...)
            if fn.attr == "open" and _write_mode(node, mode_at=1 if owner and owner[1] else 0):
                yield _Raw("file-write", node)  # a module's open(name, mode), or a path's open(mode)
        if name in OPEN_WITH_MODE or self._builtin(fn, "open"):
            if _write_mode(node, mode_at=1):
                yield _Raw("file-write", node)
        if self._builtin(fn, "print"):
            dest = next((k.value for k in node.keywords if k.arg == "file"), None)
            resolved = self.resolve(dest) if dest is not None else None
            if dest is None or (resolved and resolved[0] in ("sys.stdout", "sys.__stdout__")):
                yield _Raw("stdout-write", node)
        if any(self._builtin(fn, b) for b in ("exec", "eval", "compile")) and node.args:
            code = node.args[0]
            if isinstance(code, ast.Constant) and isinstance(code.value, str):
                yield from self._inner(code.value, node)
        if name == "types.ModuleType":  # a module made at run time (the name alone is an annotation)
            yield _Raw("import-tricks", node)
        if self._builtin(fn, "type") and len(node.args) == 3:
            yield _Raw("dynamic-access", node, "  # a class made at run time")
        if self._builtin(fn, "getattr") and len(node.args) >= 2:
            base = self.resolve(node.args[0])
            if base and base[1] and base[0] in SENSITIVE_MODULES and not isinstance(node.args[1], ast.Constant):
                yield _Raw("dynamic-access", node, "  # an attribute by computed name")  # getattr(torch, dtype) is fine

    def _inner(self, code: str, at: ast.Call) -> Iterator[_Raw]:
        """The rules on code passed to exec/eval/compile as a string, reported at the call."""
        try:
            inner = ast.parse(code)
        except SyntaxError:
            return
        sub = _Scanner(inner)
        sub.aliases = {**self.aliases, **sub.aliases}
        for raw in sub.findings():
            yield _Raw(raw.rule, at, f"  # in the string: {ast.unparse(raw.node)[:60]}")

    def _strings(self, node: ast.AST) -> Iterator[_Raw]:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in self.docstrings:
            return
        s = node.value
        if re.search(r"(?i)kopt|/proc/", s):
            yield _Raw("kopt-probe", node)
        if SIDE_PATH.search(s.strip()):
            yield _Raw("worktree-probe", node)
        if s.strip() in SENSITIVE_NAMES:
            yield _Raw("dynamic-access", node, f"  # the name {s.strip()!r} as a string")
        if len(s) > 8 and ("(" in s or "#" in s):
            lines = dict(enumerate(s.splitlines(), 1))
            for f in text_rules("", lines, C_RULES + GENERIC_RULES[:1], strip_comments=True):
                yield _Raw(f.rule, node, f"  # in the string: {f.text[:60]}")

    def _defs(self, node: ast.AST) -> Iterator[_Raw]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == "__del__":
                yield _Raw("process-exit", node, "  # runs when collected, or at exit")
            if node.name in ("__torch_function__", "__torch_dispatch__"):
                yield _Raw("tensor-subclass", node)
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                resolved = self.resolve(target)
                if resolved and resolved[1] and resolved[0] in CACHE_DECORATORS and self._takes_tensors(node):
                    yield _Raw("input-cache", dec, f"  # caches {node.name}(), which takes tensors")
        if isinstance(node, ast.ClassDef):
            for b in node.bases:
                resolved = self.resolve(b)
                if resolved and resolved[1] and resolved[0] in TENSOR_TYPES:
                    yield _Raw("tensor-subclass", node)
        if isinstance(node, ast.Call):
            fn = node.func.func if isinstance(node.func, ast.Call) else node.func
            resolved = self.resolve(fn)
            wrapped = node.args[0] if node.args and isinstance(node.func, ast.Call | ast.Attribute | ast.Name) else None
            if resolved and resolved[1] and resolved[0] in CACHE_DECORATORS and isinstance(wrapped, ast.Name):
                cached = self.defs.get(wrapped.id)
                if cached is not None and self._takes_tensors(cached):
                    yield _Raw("input-cache", node, f"  # caches {cached.name}(), which takes tensors")

    def _takes_tensors(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A parameter annotated as a tensor or array, or read through an attribute only a
        tensor has (x.shape, x.data_ptr(), x.dtype): the cache is keyed on the object."""
        params = [a for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs] if a.arg not in ("self", "cls")]
        names = {a.arg for a in params}
        for a in params:
            if a.annotation is None:
                continue
            text = ast.unparse(a.annotation)
            resolved = self.resolve(a.annotation)
            if (resolved and resolved[0] in TENSOR_TYPES) or re.search(r"\b(Tensor|ndarray)\b", text):
                return True
        return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in names
                   and n.attr in TENSOR_ATTRS for n in ast.walk(fn))

    def _pointer_keys(self) -> Iterator[_Raw]:
        """Dictionary keys, lookups and membership tests built from data_ptr()/id()/storage."""
        for fn in [self.tree, *(n for n in ast.walk(self.tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]:
            tainted: set[str] = set()
            for _ in range(2):
                for n in ast.walk(fn):
                    if isinstance(n, ast.Assign | ast.AnnAssign | ast.NamedExpr) and n.value is not None \
                            and self._pointerish(n.value, tainted):
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                            tainted |= {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
            for n in ast.walk(fn):
                keys: list[ast.AST] = []
                if isinstance(n, ast.Subscript):
                    keys = [n.slice]
                elif isinstance(n, ast.Dict):
                    keys = [k for k in n.keys if k is not None]
                elif isinstance(n, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in n.ops):
                    keys = [n.left]
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LOOKUPS \
                        and n.args:
                    keys = [n.args[0]]
                if any(self._pointerish(k, tainted) for k in keys):
                    yield _Raw("input-cache", n, "  # keyed on a pointer or object identity")

    def _data_keys(self) -> Iterator[_Raw]:
        """A cached function of this file called with its caller's data turned hashable
        (`_cached(tuple(xs), s)`, `_cached(x.tobytes())`): an output cache keyed on the input."""
        cached = cached_functions(self)
        if not cached:
            return
        for fn in ast.walk(self.tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in cached \
                        and any(self._data_of(a, params) for a in [*n.args, *(k.value for k in n.keywords)]):
                    yield _Raw("input-cache", n, f"  # caches {n.func.id}() on the caller's data")

    def _input_attributes(self) -> Iterator[_Raw]:
        """An attribute stored on a parameter's object after probing whether it is there, by a
        function that is not a method (`if hasattr(x, "_out"): return x._out ... x._out = y`,
        `getattr(x, "_n", 0)`, `try: x._out except AttributeError`): a cache carried by the
        caller's input, which the bench hands again to every timed call."""
        for fn in ast.walk(self.tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) \
                    or isinstance(self.parents.get(id(fn)), ast.ClassDef):
                continue
            params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
            stores: list[tuple[ast.AST, str, str | None]] = []
            probes: set[tuple[str, str]] = set()
            for n in ast.walk(fn):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in params:
                    if isinstance(n.ctx, ast.Store | ast.Del):
                        stores.append((n, n.value.id, n.attr))
                    elif self._in_try(n, fn):
                        probes.add((n.value.id, n.attr))
                elif isinstance(n, ast.Call) and len(n.args) >= 2 and isinstance(n.args[0], ast.Name) \
                        and n.args[0].id in params:
                    name = n.args[1]
                    key = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
                    if self._builtin(n.func, "hasattr") or (self._builtin(n.func, "getattr") and len(n.args) == 3):
                        if key is not None:
                            probes.add((n.args[0].id, key))
                    elif self._builtin(n.func, "setattr") or self._builtin(n.func, "delattr"):
                        stores.append((n, n.args[0].id, key))
            for node, param, attr in stores:
                if attr is None or (param, attr) in probes:
                    yield _Raw("input-cache", node, f"  # kept on the caller's {param} between calls")

    def _in_try(self, node: ast.AST, fn: ast.AST) -> bool:
        """node lies in a try whose handler catches AttributeError (or everything: bare)."""
        p = self.parents.get(id(node))
        while p is not None and p is not fn:
            if isinstance(p, ast.Try) and any(
                    h.type is None or any(isinstance(t, ast.Name) and t.id == "AttributeError" for t in ast.walk(h.type))
                    for h in p.handlers):
                return True
            p = self.parents.get(id(p))
        return False

    def _data_of(self, node: ast.AST, params: set[str]) -> bool:
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
        return isinstance(first, ast.Name) and first.id in params and any(
            self._builtin(node.func, b) for b in ("tuple", "frozenset", "bytes", "bytearray", "hash"))

    def _pointerish(self, node: ast.AST, tainted: set[str]) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and n.attr in POINTER_METHODS:
                return True
            if isinstance(n, ast.Call) and (self._builtin(n.func, "id") or self._builtin(n.func, "hash")):
                return True
            if isinstance(n, ast.Name) and n.id in tainted:
                return True
            resolved = self.resolve(n) if isinstance(n, ast.Attribute) else None
            if resolved and resolved[0] == "ctypes.addressof":
                return True
        return False


def _rule_of(qualified: str) -> str | None:
    for rule, prefixes in QUALIFIED.items():
        if any(qualified == p or qualified.startswith(p + ".") for p in prefixes):
            return rule
    return None


def _is_builtin(qualified: str, name: str) -> bool:
    return qualified in (f"{BUILTIN}{name}", f"builtins.{name}")


def _write_mode(call: ast.Call, *, mode_at: int) -> bool:
    """open()'s mode writes (w, a, x or +), or cannot be read (not a constant)."""
    mode: ast.AST | None = call.args[mode_at] if len(call.args) > mode_at else None
    for k in call.keywords:
        if k.arg == "mode":
            mode = k.value
        if k.arg in ("flags",):
            return True
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return True
