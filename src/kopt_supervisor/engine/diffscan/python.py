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

The names are read by `bindings.FileNames`; beside the rules here, the rooms of the rules
that need more than one node: `caches` (input-cache) and `state` (module-state and
lazy-result).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterator

from kopt_supervisor.engine.diffscan.bindings import FileNames
from kopt_supervisor.engine.diffscan.findings import (
    C_RULES,
    GENERIC_RULES,
    PY_BREAK,
    PY_TEXT_RULES,
    Finding,
    quote,
    shown,
    text_rules,
)
from kopt_supervisor.engine.diffscan.findings import Raw as _Raw
from kopt_supervisor.engine.diffscan.giveaways import (
    FRAME_ATTRS,
    IDENTITY_DUNDERS,
    INTROSPECTION_ATTRS,
    MUTATING_FUNCTIONS,
    MUTATORS,
    OBJECT_MUTATORS,
    OPEN_WITH_MODE,
    SAFE_DUNDERS,
    SENSITIVE_MODULES,
    SENSITIVE_NAMES,
    SIDE_PATH,
    SOURCE_COMPILERS,
    STR_METHODS,
    TENSOR_TYPES,
    WRITE_METHODS,
)
from kopt_supervisor.engine.diffscan.lifetimes import cached_on_tensors, input_caches
from kopt_supervisor.engine.diffscan.qualified import BUILTIN, BUILTIN_RULES, QUALIFIED
from kopt_supervisor.engine.diffscan.state import in_place, lazy_results, persistent_state


def scan_python(path: str, source: str, added: Collection[int], added_text: dict[int, str]) -> list[Finding]:
    """Findings of the Python rules on one file's new version, decoded as the interpreter
    decodes it (`findings.read_python`); added: the Python lines that are the candidate's,
    added_text: the diff's added lines (read by the text rules when the file does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", 0) or 0
        return [Finding("unparsed", path, line, f"does not parse: {getattr(exc, 'msg', exc)}")] + text_rules(
            path, added_text, PY_TEXT_RULES + GENERIC_RULES
        )
    lines = PY_BREAK.split(source)
    scanner = _Scanner(tree)
    ours = set(added)
    out: list[Finding] = []
    for raw in scanner.findings():
        if not _candidates(raw.node, ours, scanner):
            continue
        line = getattr(raw.node, "lineno", 0)
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        out.append(Finding(raw.rule, path, line, quote(f"{shown(text.strip())}{raw.note}")))
    return out


def _candidates(node: ast.AST, added: set[int], scanner: _Scanner) -> bool:
    """Whether a finding is the candidate's: its node touches an added line, or a name it
    uses is bound on an added line."""
    lo = getattr(node, "lineno", 0)
    hi = getattr(node, "end_lineno", lo) or lo
    if any(lo <= n <= hi for n in added):
        return True
    return any(isinstance(n, ast.Name) and scanner.bind_lines.get(n.id, set()) & added for n in ast.walk(node))


class _Scanner(FileNames):
    """The rules over one file, reading its names through `FileNames`."""

    # -- rules ------------------------------------------------------------------------------------

    def findings(self) -> Iterator[_Raw]:
        for node in ast.walk(self.tree):
            yield from self._references(node)
            yield from self._stores(node)
            yield from self._calls(node)
            yield from self._strings(node)
            yield from self._defs(node)
        yield from input_caches(self)
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
                rule = BUILTIN_RULES.get(resolved[0][len(BUILTIN) :])  # run = eval; run(...)
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
            if node.attr in INTROSPECTION_ATTRS and isinstance(node.ctx, ast.Load):
                yield _Raw("dynamic-access", node, f"  # {node.attr}: what the object was made from or lives in")
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in BUILTIN_RULES and not self.is_bound(node.id):
                yield _Raw(BUILTIN_RULES[node.id], node)
            parent = self.parents.get(id(node))
            called = isinstance(parent, ast.Call) and parent.func is node
            if node.id in ("setattr", "delattr", "getattr") and not called and not self.is_bound(node.id):
                yield _Raw("dynamic-access", node)
            module = self.aliases.get(node.id)
            if (
                module in SENSITIVE_MODULES
                and not (isinstance(parent, ast.Attribute) and parent.value is node)
                and not called
            ):
                yield _Raw("dynamic-access", node, f"  # the module {module} handed on as a value")
        if isinstance(node, ast.Compare) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS
        ):
            if self._probes_identity(node):
                yield _Raw("worktree-probe", node)
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if (
                isinstance(exc, ast.Name)
                and exc.id in ("SystemExit", "KeyboardInterrupt")
                and not self.is_bound(exc.id)
            ):
                yield _Raw("process-exit", node)

    def _probes_identity(self, node: ast.AST) -> bool:
        """__file__, __name__ (other than == "__main__"), cwd or argv compared or searched as text."""
        if (
            isinstance(node, ast.Compare)
            and len(node.comparators) == 1
            and isinstance(node.left, ast.Name)
            and node.left.id == "__name__"
            and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value == "__main__"
        ):
            return False
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in IDENTITY_DUNDERS and not self.is_bound(n.id):
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
            for t in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
                yield from self._store_target(t, node)

    def _store_target(self, t: ast.expr, stmt: ast.AST) -> Iterator[_Raw]:
        at = t if hasattr(t, "lineno") else stmt
        if isinstance(t, ast.Attribute):
            base = self.resolve(t.value)
            held = self._held(t.value)
            if base and base[1]:
                yield _Raw("patch-module", at)
            elif held:
                yield _Raw("patch-module", at, f"  # {ast.unparse(t.value)[:30]} may be {held}")
            elif t.attr.startswith("__") and t.attr.endswith("__") and t.attr not in SAFE_DUNDERS:
                yield _Raw("patch-module", at)
            elif not isinstance(t.value, ast.Name | ast.Attribute):
                yield _Raw("patch-module", at, "  # an attribute of a computed object")
            elif isinstance(t.value, ast.Name) and not self.is_bound(t.value.id):
                yield _Raw("patch-module", at, "  # an attribute of a name this file never binds")
        elif isinstance(t, ast.Subscript):
            base = self.resolve(t.value)
            if base and base[0] == "os.environ" and base[1]:
                yield _Raw("env-write", at)
            elif base and (base[0].endswith(".__dict__") or base[0] == "sys.modules"):
                yield _Raw("patch-module", at)
            elif base and base[1] and base[0] == "sys.path":
                yield _Raw("import-tricks", at)
            elif isinstance(t.value, ast.Call) and (
                self.is_builtin(t.value.func, "globals") or self.is_builtin(t.value.func, "vars")
            ):
                yield _Raw("patch-module", at)
            else:
                yield from self._changes_other_module(t.value, at)
        elif isinstance(t, ast.Name) and t.id == "__builtins__":
            yield _Raw("builtins", at)
        elif isinstance(t, ast.Name) and isinstance(stmt, ast.AugAssign) and t.id not in self.imported_modules:
            yield from self._changes_other_module(t, at)  # from problem import SIZES; SIZES *= 0: in place

    def _calls(self, node: ast.AST) -> Iterator[_Raw]:
        if not isinstance(node, ast.Call):
            return
        fn = node.func
        q = self.resolve(fn)
        name = q[0] if q and q[1] else None
        if (self.is_builtin(fn, "setattr") or self.is_builtin(fn, "delattr")) and node.args:
            first = node.args[0]
            base = self.resolve(first)
            attr = node.args[1] if len(node.args) > 1 else None
            dunder = isinstance(attr, ast.Constant) and isinstance(attr.value, str) and attr.value.startswith("__")
            if (base and base[1]) or dunder or not isinstance(first, ast.Name | ast.Attribute) or self._held(first):
                yield _Raw("patch-module", node)
        if isinstance(fn, ast.Attribute):
            if fn.attr in ("__setattr__", "__delattr__"):
                yield _Raw("patch-module", node)
            owner = self.resolve(fn.value)
            if fn.attr in MUTATORS and owner and owner[0].endswith(".__dict__"):
                yield _Raw("patch-module", node)
            if fn.attr in ("insert", "append", "extend", "remove", "pop", "clear") and owner == ("sys.path", True):
                yield _Raw("import-tricks", node)
            elif fn.attr in OBJECT_MUTATORS and not (owner and owner[0].endswith(".__dict__")):
                yield from self._changes_other_module(fn.value, node)  # problem.REF.zero_(), json.__all__.clear()
            if fn.attr in WRITE_METHODS or (fn.attr == "dump" and not (owner and owner[1])):
                yield _Raw("file-write", node)  # p.write_text(...), df.to_csv(...), arr.dump(...)
            if fn.attr == "open" and _write_mode(node, mode_at=1 if owner and owner[1] else 0):
                yield _Raw("file-write", node)  # a module's open(name, mode), or a path's open(mode)
        if name in OPEN_WITH_MODE or self.is_builtin(fn, "open"):
            if _write_mode(node, mode_at=1):
                yield _Raw("file-write", node)
        if self.is_builtin(fn, "print"):
            dest = next((k.value for k in node.keywords if k.arg == "file"), None)
            resolved = self.resolve(dest) if dest is not None else None
            if dest is None or (resolved and resolved[0] in ("sys.stdout", "sys.__stdout__")):
                yield _Raw("stdout-write", node)
        if any(self.is_builtin(fn, b) for b in ("exec", "eval", "compile")) and node.args:
            code = node.args[0]
            if isinstance(code, ast.Constant) and isinstance(code.value, str):
                yield from self._inner(code.value, node)
        if name == "types.ModuleType":  # a module made at run time (the name alone is an annotation)
            yield _Raw("import-tricks", node)
        if name in MUTATING_FUNCTIONS and node.args:  # heapq.heappush(mod.QUEUE, x)
            yield from self._changes_other_module(node.args[0], node)
        if name and name.rsplit(".", 1)[-1] and in_place(name.rsplit(".", 1)[-1]) and node.args:
            yield from self._changes_other_module(node.args[0], node)  # torch.nn.init.zeros_(problem.REF)
        for k in node.keywords:
            if k.arg == "out":
                yield from self._changes_other_module(k.value, node)  # torch.mul(x, 0, out=problem.REF)
        if isinstance(fn, ast.Attribute) and fn.attr == "fromhex":
            yield _Raw("exec-eval", node, "  # a payload decoded from hex")
        if name in SOURCE_COMPILERS:
            yield from self._compiled_sources(node)
        yield from self._loaders(node, name)
        if self.is_builtin(fn, "type") and len(node.args) == 3:
            yield _Raw("dynamic-access", node, "  # a class made at run time")
        if self.is_builtin(fn, "getattr") and len(node.args) >= 2:
            base = self.resolve(node.args[0])
            key = node.args[1]
            parent = self.parents.get(id(node))
            called = isinstance(parent, ast.Call) and parent.func is node
            names, built = _key_names(key, self.assigned)
            if (
                base
                and base[1]
                and not isinstance(key, ast.Constant)
                and (base[0] in SENSITIVE_MODULES or called or built)
            ):
                # getattr(torch, dtype) is fine; getattr(torch, "manual" + "_seed")(0) is not
                yield _Raw("dynamic-access", node, "  # an attribute by computed name")
            for full in (f"{base[0]}.{n}" for n in sorted(names)) if base and base[1] else ():
                for rule, prefixes in QUALIFIED.items():  # getattr(torch, os.environ.get("X", "manual_seed"))
                    if any(full == p or full.startswith(p + ".") for p in prefixes):
                        yield _Raw(rule, node, f"  # may be {full}")
        if name in ("operator.attrgetter", "operator.methodcaller") and not all(
            isinstance(a, ast.Constant) for a in node.args[: 1 if name.endswith("methodcaller") else None]
        ):
            yield _Raw("dynamic-access", node, "  # an attribute named at run time")

    def _held(self, node: ast.AST) -> str:
        """What imported thing a name (or an attribute of one) that the file never binds to
        one may hold, through a loop over a literal or a parameter of this file's function it
        is handed to (`maybe`): "" when nothing."""
        if isinstance(node, ast.Name | ast.Attribute) and not (self.resolve(node) or ("", False))[1]:
            return ", ".join(sorted(self.possible(node))[:2])
        return ""

    def _changes_other_module(self, owner: ast.AST, at: ast.AST) -> Iterator[_Raw]:
        """An item stored into, or a container method called on, an object another module
        holds (`mod.TABLE[k] = v`, `mod.LIST.append(x)`, `json.__all__.clear()`), or one
        a loop variable or parameter may hold (`for e in (os.environ,): e[k] = v`): state kept
        in, or a patch of, another module. Not a module itself (`os.remove`, `torch.add`)."""
        if isinstance(owner, ast.Name) and owner.id in self.imported_modules:
            return
        for q in sorted(self.possible(owner)):
            if q.startswith(BUILTIN) or q in ("sys.modules", "sys.path") or q.endswith(".__dict__"):
                continue
            rule = "env-write" if q == "os.environ" or q.startswith("os.environ.") else "patch-module"
            yield _Raw(rule, at, f"  # changes {q}, an object of another module")
            return

    def _compiled_sources(self, node: ast.Call) -> Iterator[_Raw]:
        """C/CUDA source handed to a compiler: the text the file holds (constants, names it
        binds to them, f-strings of those) is folded whole and meets the C rules (`"ex" +
        "it(0);"` split across constants is found); text it cannot fold (decoded, read,
        built from what it does not hold) is code the scan cannot read."""
        for arg in [
            *node.args,
            *(
                k.value
                for k in node.keywords
                if k.arg
                not in (
                    None,
                    "name",
                    "extra_cflags",
                    "extra_cuda_cflags",
                    "functions",
                    "verbose",
                    "with_cuda",
                    "options",
                    "backend",
                    "name_expressions",
                )
            ),
        ]:
            text = _fold_text(arg, self.assigned)
            if text is None:
                yield _Raw("exec-eval", node, f"  # compiles source built at run time: {ast.unparse(arg)[:40]}")
                continue
            lines = dict(enumerate(text.splitlines(), 1))
            for f in text_rules("", lines, C_RULES + GENERIC_RULES[:1], strip_comments=True):
                yield _Raw(f.rule, node, f"  # in the compiled source: {f.text[:60]}")

    def _loaders(self, node: ast.Call, name: str | None) -> Iterator[_Raw]:
        """Loaders that run a payload only when asked: torch.load without weights_only=True,
        numpy.load with allow_pickle; warnings recorded with their caller's line."""
        kw = {k.arg: k.value for k in node.keywords if k.arg}

        def const(key: str) -> object:
            v = kw.get(key)
            return v.value if isinstance(v, ast.Constant) else (None if v is None else "computed")

        if name == "torch.load" and const("weights_only") is not True:
            yield _Raw("exec-eval", node, "  # unpickles unless weights_only=True")
        if name in ("numpy.load", "numpy.lib.format.read_array", "numpy.lib.npyio.load") and const(
            "allow_pickle"
        ) not in (None, False):
            yield _Raw("exec-eval", node, "  # allow_pickle: unpickles")
        if name == "warnings.catch_warnings" and const("record") not in (None, False):
            yield _Raw("frame-inspection", node, "  # recorded warnings carry their caller's file and line")

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
        if s.strip() in SENSITIVE_NAMES or (_DOTTED.match(s.strip()) and set(s.strip().split(".")) & SENSITIVE_NAMES):
            yield _Raw("dynamic-access", node, f"  # the name {s.strip()[:40]!r} as a string")
        elif (m := _INTROSPECTION_IN_TEXT.search(s)) is not None:
            yield _Raw("dynamic-access", node, f"  # {m.group(0)} in a string (a format field, a name built from it)")
        if len(s) > 8 and ("(" in s or "#" in s):
            lines = dict(enumerate(s.splitlines(), 1))
            for f in text_rules("", lines, C_RULES + GENERIC_RULES[:1], strip_comments=True):
                yield _Raw(f.rule, node, f"  # in the string: {f.text[:60]}")

    def _defs(self, node: ast.AST) -> Iterator[_Raw]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == "__del__":
                yield _Raw("process-exit", node, "  # runs when collected, or at exit")
            if node.name in ("__reduce__", "__reduce_ex__"):
                yield _Raw("exec-eval", node, "  # copy and pickle call what it returns")
            if node.name in ("__getattr__", "__dir__") and node in self.tree.body:
                yield _Raw("dynamic-access", node, "  # a module-level hook: the bench's reads of this module run it")
            if node.name in ("__torch_function__", "__torch_dispatch__"):
                yield _Raw("tensor-subclass", node)
        if isinstance(node, ast.ClassDef):
            for b in node.bases:
                resolved = self.resolve(b)
                if resolved and resolved[1] and resolved[0] in TENSOR_TYPES:
                    yield _Raw("tensor-subclass", node)
        yield from cached_on_tensors(self, node)


_DOTTED = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$")
_INTROSPECTION_IN_TEXT = re.compile(
    r"__("
    + "|".join(sorted(a.strip("_") for a in INTROSPECTION_ATTRS | {"__dict__", "__import__", "__closure__"}))
    + r")__"
)


_STRING_BUILDERS = frozenset(
    {
        "join",
        "format",
        "format_map",
        "replace",
        "decode",
        "encode",
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "swapcase",
        "title",
        "capitalize",
        "casefold",
        "translate",
        "removeprefix",
        "removesuffix",
        "zfill",
        "center",
        "ljust",
        "rjust",
    }
)


_FOLD_VALUES = 8
"""At most this many values bound to one name are followed; a name bound more often than
that (or deeper than the depth caps) is taken as built at run time, never cut short."""
_FOLD_CHARS = 1 << 20


def _key_names(key: ast.AST, assigned: dict[str, list[ast.expr]], depth: int = 0) -> tuple[set[str], bool]:
    """The attribute names a getattr key may be (its string constants: a lookup's default,
    a concatenation of constants folded, what the file assigns to a name it uses) and whether
    the name is built at run time (joined, formatted, concatenated from what is not constant,
    decoded, made from chr(), or followed further than the caps)."""
    if isinstance(key, ast.Constant):
        return ({key.value} if isinstance(key.value, str) else set()), False
    if isinstance(key, ast.Name):
        values = assigned.get(key.id, [])
        if depth >= 4 or len(values) > _FOLD_VALUES:
            return set(), True
        names: set[str] = set()
        built = False
        for value in values:
            n, b = _key_names(value, assigned, depth + 1)
            names |= n
            built = built or b
        return names, built
    if isinstance(key, ast.BinOp) and isinstance(key.op, ast.Add):
        if depth >= 8:
            return set(), True
        left, lb = _key_names(key.left, assigned, depth + 1)
        right, rb = _key_names(key.right, assigned, depth + 1)
        if (
            not (lb or rb)
            and isinstance(key.left, ast.Constant | ast.BinOp)
            and isinstance(key.right, ast.Constant | ast.BinOp)
            and len(left) == len(right) == 1
        ):
            return {next(iter(left)) + next(iter(right))}, False
        return left | right, True
    if isinstance(key, ast.JoinedStr | ast.BinOp):
        return set(), True
    if isinstance(key, ast.Call):
        fn = key.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        consts = {
            a.value
            for a in [*key.args, *(k.value for k in key.keywords)]
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        }
        return consts, name in _STRING_BUILDERS or name in ("chr", "str", "bytes", "reversed", "b64decode")
    return set(), False


def _fold_text(
    node: ast.AST, assigned: dict[str, list[ast.expr]], depth: int = 0, memo: dict[int, str | None] | None = None
) -> str | None:
    """The text an expression holds when the file holds all of it: string constants, names
    bound only to such text (each value it may hold, one per line), `+` of them, f-strings (a
    field of a name bound to numbers or text reads as that), lists and tuples of them (joined
    by newlines). None otherwise, or past the caps (a depth, a name's count of values, a
    size): then it is text the scan does not hold, never text read in part."""
    memo = {} if memo is None else memo
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = None  # a cycle (A = A + "x") folds to nothing
    out = _fold(node, assigned, depth, memo) if depth <= 8 else None
    memo[id(node)] = out if out is None or len(out) <= _FOLD_CHARS else None
    return memo[id(node)]


def _fold(node: ast.AST, assigned: dict[str, list[ast.expr]], depth: int, memo: dict[int, str | None]) -> str | None:
    def parts(nodes: list[ast.AST]) -> list[str] | None:
        got = [_fold_text(n, assigned, depth + 1, memo) for n in nodes]
        return None if None in got else [g for g in got if g is not None]

    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        return str(node.value) if isinstance(node.value, int | float) and not isinstance(node.value, bool) else None
    if isinstance(node, ast.Name):
        values = assigned.get(node.id, [])
        texts = parts(list(values)) if 0 < len(values) <= _FOLD_VALUES else None
        return "\n".join(texts) if texts is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        both = parts([node.left, node.right])
        return "".join(both) if both is not None else None
    if isinstance(node, ast.JoinedStr):
        pieces = parts([v.value if isinstance(v, ast.FormattedValue) else v for v in node.values])
        return "".join(pieces) if pieces is not None else None
    if isinstance(node, ast.List | ast.Tuple):
        items = parts(list(node.elts))
        return "\n".join(items) if items is not None else None
    return None


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
