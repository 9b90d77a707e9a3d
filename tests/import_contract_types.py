"""Two import-linter contract types for what its built-in ones cannot say; pyproject.toml's
[tool.importlinter] names them (`contract_types`) and holds the contracts themselves.

- `pure` (a `forbidden` contract, and more): the source modules reach none of the forbidden
  modules, directly or through others; besides, they import nothing but the standard library,
  the `allowed_external` packages and each other, and importing a module runs its packages'
  `__init__` files, so each of those must be a source module too or import nothing.
- `static_imports`: the source modules bring in other modules by import statements only, the
  ones the import graph holds: no `importlib.import_module`, `__import__` or `runpy.run_module`
  call, and no attribute chain spelled from the root package into a module the file does not
  import (`kopt_supervisor.engine.daemon.start_detached(ws)` after `import
  kopt_supervisor.engine.api`, which works once something else has loaded the daemon).

Both take `alone` too: modules held to the contract as source modules are, without the modules
under them (a package's `__init__`, e.g. `kopt_supervisor.engine`'s exception types); a pure
contract's `alone` modules import none of the forbidden modules either.

Both report in the `forbidden` contract's shape: "<importer> is not allowed to import
<imported>" with the line. tests/test_import_contracts.py runs `lint-imports` and proves that
every contract catches what it forbids.
"""

from __future__ import annotations

import ast
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain import helpers

DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__", "run_module"})


def _chain(importer: str, imported: str, lines: tuple[int, ...]) -> dict[str, Any]:
    """One broken import in the metadata shape ForbiddenContract renders."""
    return {
        "upstream_module": imported,
        "downstream_module": importer,
        "chains": [[{"importer": importer, "imported": imported, "line_numbers": lines}]],
    }


def _modules(graph: ImportGraph, expressions: Any, alone: Any = None) -> set[str]:
    """The modules the expressions name, each with its descendants, and the `alone` ones
    without theirs."""
    named = {m.name for m in helpers.module_expressions_to_modules(graph, expressions, raise_if_unmatched=True)}
    for module in alone or ():
        assert module in graph.modules, f"{module}: no such module"
    return named | {d for m in named for d in graph.find_descendants(m)} | set(alone or ())


class PureContract(ForbiddenContract):
    """A forbidden contract whose sources may import only the standard library, the
    `allowed_external` packages and each other (their packages' __init__ files included)."""

    type_name = "pure"
    allowed_external = fields.ListField(subfield=fields.StringField())
    alone = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        check = super().check(graph, verbose)  # removes the ignored imports from `graph` too
        alone: set[str] = set(self.alone or ())  # type: ignore[arg-type]
        pure = _modules(graph, self.source_modules, alone)
        # the forbidden contract above follows the source modules' imports, not the `alone` ones'
        denied = tuple(str(e) for e in self.forbidden_modules)  # type: ignore[attr-defined]
        root = tuple(self.session_options["root_packages"])
        allowed_external = set(self.allowed_external) | set(sys.stdlib_module_names)  # type: ignore[call-overload]
        # the imports that start a chain the deny-list found are reported there already
        seen = {
            (chain[0]["importer"], chain[0]["imported"])
            for c in check.metadata["invalid_chains"]
            for chain in c["chains"]
        }
        broken = []
        for importer in sorted(pure):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                lines = tuple(d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported))
                if importer in alone and any(imported == d or imported.startswith(d + ".") for d in denied):
                    broken.append(_chain(importer, imported, lines))
                    continue
                if imported.split(".")[0] not in root:
                    if imported.split(".")[0] not in allowed_external:
                        broken.append(_chain(importer, imported, lines))
                    continue
                if imported not in pure:
                    broken.append(_chain(importer, imported, lines))
                    continue
                # importing a.b.c runs a/__init__.py and a/b/__init__.py first
                parts = imported.split(".")
                for n in range(2, len(parts)):
                    parent = ".".join(parts[:n])
                    if parent not in pure and graph.find_modules_directly_imported_by(parent):
                        broken.append(_chain(importer, f"{parent} (run by importing {imported})", lines))
                        break
        fresh = [b for b in broken if (b["downstream_module"], b["upstream_module"]) not in seen]
        return ContractCheck(
            kept=check.kept and not fresh,
            warnings=check.warnings,
            ignored_import_count=check.ignored_import_count,
            metadata={"invalid_chains": check.metadata["invalid_chains"] + fresh},
        )


class StaticImportsContract(Contract):
    """The source modules name every module they use in an import statement."""

    type_name = "static_imports"
    source_modules = fields.ListField(subfield=fields.ModuleExpressionField())
    alone = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        broken = []
        for module in sorted(_modules(graph, self.source_modules, self.alone)):
            file = _file_of(module)
            tree = ast.parse(file.read_text(encoding="utf-8"))
            package = module if file.name == "__init__.py" else module.rpartition(".")[0]
            for line, what in _hidden_imports(tree, graph.modules, _stated(tree, package)):
                broken.append(_chain(module, what, (line,)))
        return ContractCheck(kept=not broken, metadata={"invalid_chains": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        ForbiddenContract.render_broken_contract(self, check)  # type: ignore[arg-type]

    @property
    def broken_contract_guidance(self) -> str:
        return (
            "Import the module with an import statement (import-linter reads only those), or leave it "
            "to a module of a room that may import it."
        )


def _file_of(module: str) -> Path:
    """The source file of `module`, found without importing anything (a package's __init__)."""
    top, _, rest = module.partition(".")
    spec = find_spec(top)
    assert spec is not None and spec.submodule_search_locations, f"{top}: not a package on sys.path"
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest.split(".")) if rest else None
    if base is None:
        return Path(str(spec.origin))
    return base / "__init__.py" if (base / "__init__.py").is_file() else base.with_suffix(".py")


def _stated(tree: ast.AST, package: str) -> set[str]:
    """Every module an import statement of `tree` loads (ancestors included), as absolute names;
    `package` is the one relative imports start from."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                start = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*start, *([base] if base else [])])
            names |= {base, *(f"{base}.{a.name}" for a in node.names)}
    return {".".join(n.split(".")[:k]) for n in names for k in range(1, len(n.split(".")) + 1)}


def _hidden_imports(tree: ast.AST, modules: set[str], stated: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each module brought in other than by an import statement."""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in DYNAMIC_IMPORTERS:
                found.append((node.lineno, f"a module named at run time: {ast.unparse(node)}"))
        elif isinstance(node, ast.Attribute) and id(node) not in inner and (dotted := _dotted(node)):
            parts = dotted.split(".")
            prefixes = [".".join(parts[:n]) for n in range(len(parts), 1, -1)]
            module = next((p for p in prefixes if p in modules), None)  # the longest that is a module
            if module is not None and module not in stated:
                found.append((node.lineno, f"{module} (reached as an attribute, never imported here)"))
    return found


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of names, else None (a call or a subscript in it)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None
