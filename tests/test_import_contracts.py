"""The package boundaries of docs/design.md §1, enforced: every import of the source tree, read
from its syntax tree (imports inside functions, under `if TYPE_CHECKING:` and in `try:`
blocks included), against a list of contracts.

- the front door (kopt_tui) imports the engine only through `engine.api`;
- the engine never imports the bundled kernels;
- the loop never imports the report;
- a pure room (statistics, expressions, number formatting, roofline math) imports nothing
  with side effects: only the standard library (less a deny-list), numpy/pandas, and other
  pure modules.

Besides `import` statements the checker reads what else brings a module in: an attribute
chain spelled from the package root (`kopt_supervisor.engine.daemon.start_detached`, after
any import that loaded it) and `importlib.import_module` / `__import__` / `runpy.run_module`
with a name it can compute (string constants, concatenations, f-strings of constants); a
name it cannot compute is a violation where the contract says `dynamic_ok=False`.

To add a contract (the records module, the CSV parsing of metrics...), add a `Contract` to
CONTRACTS or a glob to PURE_ROOMS; `EXEMPTIONS` lists the known breaches the lead fixes,
each with its reason, and fails when one is no longer needed.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT_PACKAGE = "kopt_supervisor"

# ---------------------------------------------------------------------------------------
# The contracts

SIDE_EFFECTS = (
    # processes, threads, signals
    "subprocess", "multiprocessing", "concurrent.futures", "threading", "_thread", "asyncio", "signal", "pty",
    # files and databases beyond reading a path
    "sqlite3", "shutil", "tempfile", "fcntl", "mmap",
    # network
    "socket", "ssl", "http", "urllib.request", "ftplib", "smtplib", "requests",
    # native libraries and the machine
    "ctypes", "git", "psutil", "pynvml", "amdsmi",
    # the engine's edges
    "kopt_supervisor.engine.store", "kopt_supervisor.engine.gitops", "kopt_supervisor.engine.runner",
    "kopt_supervisor.engine.gpu", "kopt_supervisor.engine.profile", "kopt_supervisor.engine.workspace",
    "kopt_supervisor.engine.daemon", "kopt_supervisor.engine.loop", "kopt_supervisor.engine.api",
    "kopt_supervisor.engine.sandbox", "kopt_supervisor.engine.demo", "kopt_supervisor.engine.ceilings",
    "kopt_supervisor.engine.report", "kopt_supervisor.engine.propose", "kopt_supervisor.engine.lanes",
    "kopt_supervisor.kernels",
)
"""Modules whose use means side effects (a module named here covers its submodules)."""

PURE_THIRD_PARTY = ("numpy", "pandas")

PURE_ROOMS = ("engine/decide/*", "engine/diffscan/*", "engine/expr.py", "engine/fmt.py", "engine/roofline/model.py",
              "engine/metrics.py", "engine/records.py", "engine/bookkeeping.py", "engine/roofline/spec_values.py",
              "engine/dataclass_io.py")
"""Pure logic: data in, data out."""

PURE_LEAVES = ("engine/errors.py", "engine/config/*")
"""What the pure rooms may import besides each other: exception types and the kopt.toml
schema (frozen dataclasses; `config.load` reads the one file it is given). Held to the pure
rule themselves."""


@dataclass(frozen=True)
class Contract:
    name: str
    sources: tuple[str, ...]
    """Globs of repo-relative paths (`*` crosses folders) whose imports are checked."""
    forbidden: tuple[str, ...]
    """Modules (and their submodules) the sources must not import."""
    except_exactly: tuple[str, ...] = ()
    """Modules under `forbidden` that may be imported, themselves only (not their submodules)."""
    only_pure: bool = False
    """Besides `forbidden`: import only the standard library, numpy/pandas, PURE_ROOMS and
    PURE_LEAVES."""
    dynamic_ok: bool = True
    """Whether an import by a name the checker cannot compute is let through."""


CONTRACTS = (
    Contract("the front door imports the engine only through engine.api",
             sources=("kopt_tui/*",), forbidden=(f"{ROOT_PACKAGE}.engine",),
             except_exactly=(f"{ROOT_PACKAGE}.engine.api",), dynamic_ok=False),
    Contract("the engine never imports the bundled kernels",
             sources=("engine/*",), forbidden=(f"{ROOT_PACKAGE}.kernels", "kernels")),
    Contract("the loop never imports the report",
             sources=("engine/loop.py", "engine/loop/*"), forbidden=(f"{ROOT_PACKAGE}.engine.report",)),
    Contract("a pure room imports nothing with side effects",
             sources=PURE_ROOMS + PURE_LEAVES, forbidden=SIDE_EFFECTS, only_pure=True, dynamic_ok=False),
)

EXEMPTIONS: dict[tuple[str, str, str], str] = {
    ("a pure room imports nothing with side effects", "engine/config/validate.py", f"{ROOT_PACKAGE}.engine.propose"):
        "validating [propose].agent reads the presets of propose/agents, a module that finds executables "
        "(shutil.which) and loads the whole propose package: move the preset table (names, resume support) "
        "into a pure module that config and agents both import",
    ("a pure room imports nothing with side effects", "engine/decide/simulate.py", "concurrent.futures"):
        "the Monte Carlo check of the decision procedure is a command-line script that runs its trials in "
        "worker processes: it belongs beside the pure room (e.g. engine/decide_sim.py), not in it",
}
"""(contract, source glob, imported module) -> why it is let through for now."""

# ---------------------------------------------------------------------------------------
# Reading imports


@dataclass(frozen=True)
class Import:
    line: int
    text: str
    """The statement or expression as written (unparsed)."""
    base: str | None
    """The module named (`from BASE import x`, `import BASE`); None when not computable."""
    name: str | None = None
    """The imported name of `from base import name` (a submodule or an attribute)."""


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    text: str
    module: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: `{self.text}` imports {self.module}: {self.why}"


def package_dirs() -> dict[str, Path]:
    """Import name -> folder, as pyproject.toml maps them (kopt_supervisor.engine -> engine/)."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {name: REPO / folder for name, folder in data["tool"]["setuptools"]["package-dir"].items()}


PACKAGE_DIRS = package_dirs()


def module_of(relpath: str) -> tuple[str, bool]:
    """The dotted name of a repo file and whether it is a package's __init__."""
    path = REPO / relpath
    for name, folder in PACKAGE_DIRS.items():
        if path.is_relative_to(folder):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            return ".".join([name, *(parts[:-1] if is_package else parts)]), is_package
    raise AssertionError(f"{relpath} is in no package of pyproject.toml")


def file_of(module: str) -> Path | None:
    """The repo file of a dotted module name (its __init__.py for a package), or None."""
    for name, folder in PACKAGE_DIRS.items():
        if module == name or module.startswith(name + "."):
            rest = module[len(name):].lstrip(".").split(".") if module != name else []
            base = folder.joinpath(*rest)
            for candidate in (base / "__init__.py", base.with_suffix(".py") if rest else None):
                if candidate is not None and candidate.is_file():
                    return candidate
            return None
    return None


def _constant_text(node: ast.expr) -> str | None:
    """The value of a string expression made of constants only, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant_text(node.left), _constant_text(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            text = _constant_text(v.value if isinstance(v, ast.FormattedValue) else v)
            if text is None:
                return None
            parts.append(text)
        return "".join(parts)
    return None


DYNAMIC_IMPORTERS = {"import_module", "__import__", "run_module"}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def imports_in(source: str, module: str, is_package: bool) -> Iterator[Import]:
    """Every import of `source` (the text of module `module`)."""
    tree = ast.parse(source)
    inner_attributes = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(node.lineno, ast.unparse(node), alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{node.module}" if node.module else package
            else:
                base = node.module or ""
            for alias in node.names:
                yield Import(node.lineno, ast.unparse(node), base, None if alias.name == "*" else alias.name)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in DYNAMIC_IMPORTERS and node.args:
                yield Import(node.lineno, ast.unparse(node), _constant_text(node.args[0]))
        elif isinstance(node, ast.Attribute) and id(node) not in inner_attributes:
            dotted = _dotted(node)
            if dotted and dotted.startswith(ROOT_PACKAGE + "."):
                parts = dotted.split(".")
                for n in range(len(parts), 1, -1):  # the longest prefix that is a module
                    if file_of(".".join(parts[:n])) is not None:
                        yield Import(node.lineno, ast.unparse(node), ".".join(parts[:n]))
                        break


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _pure_file(path: Path | None) -> bool:
    if path is None:
        return False
    rel = path.relative_to(REPO).as_posix()
    return any(fnmatch.fnmatch(rel, g) for g in PURE_ROOMS + PURE_LEAVES)


@functools.cache
def _imports_anything(path: Path) -> bool:
    return any(isinstance(n, ast.Import | ast.ImportFrom) for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def _impure_parent(module: str) -> Path | None:
    """The first package __init__ that importing `module` runs and that is neither pure nor
    free of imports (importing engine.roofline.model runs engine/roofline/__init__.py)."""
    parts = module.split(".")
    for n in range(2, len(parts)):
        init = file_of(".".join(parts[:n]))
        if init is not None and init.name == "__init__.py" and not _pure_file(init) and _imports_anything(init):
            return init
    return None


def judge(contract: Contract, imp: Import) -> tuple[str, str] | None:
    """(the module at fault, why) when `imp` breaks `contract`, else None."""
    if imp.base is None:
        return None if contract.dynamic_ok else ("a module named at run time", "the checker cannot tell which")
    named = f"{imp.base}.{imp.name}" if imp.name else imp.base
    # the module brought in: a submodule `from base import sub`, else base itself
    module = named if imp.name and file_of(named) is not None else imp.base
    for candidate in dict.fromkeys((named, module)):
        for prefix in contract.forbidden:
            if _under(candidate, prefix) and candidate not in contract.except_exactly:
                if module in contract.except_exactly:
                    continue  # a name taken from an allowed module (`from engine.api import Workspace`)
                return candidate, f"forbidden by {prefix!r}"
    if contract.only_pure:
        top = module.split(".")[0]
        if top == ROOT_PACKAGE:
            if not _pure_file(file_of(module)):
                return module, "not a pure room (PURE_ROOMS) nor a pure leaf (PURE_LEAVES)"
            parent = _impure_parent(module)
            if parent is not None:
                return module, f"importing it runs {parent.relative_to(REPO).as_posix()}, which is not pure"
        elif top not in PURE_THIRD_PARTY and top not in sys.stdlib_module_names:
            return module, "not the standard library, numpy or pandas"
    return None


def check_source(contract: Contract, relpath: str, source: str) -> list[Violation]:
    """The violations of `contract` in `source`, as if it were the file at `relpath`."""
    module, is_package = module_of(relpath)
    out: dict[tuple[int, str], Violation] = {}  # one per line and module (`from m import a, b` is one)
    for imp in imports_in(source, module, is_package):
        fault = judge(contract, imp)
        if fault is not None:
            out.setdefault((imp.line, fault[0]), Violation(relpath, imp.line, imp.text, *fault))
    return sorted(out.values(), key=lambda v: v.line)


def source_files(contract: Contract) -> list[str]:
    files = sorted(p.relative_to(REPO).as_posix() for folder in PACKAGE_DIRS.values() for p in folder.rglob("*.py"))
    return [f for f in files if any(fnmatch.fnmatch(f, g) for g in contract.sources)]


def exemption(contract: Contract, v: Violation) -> tuple[str, str, str] | None:
    for key in EXEMPTIONS:
        name, glob, module = key
        if name == contract.name and fnmatch.fnmatch(v.path, glob) and _under(v.module, module):
            return key
    return None


def violations(contract: Contract) -> tuple[list[Violation], set[tuple[str, str, str]]]:
    """The tree's violations of `contract` not exempted, and the exemptions that were used."""
    found, used = [], set()
    for rel in source_files(contract):
        for v in check_source(contract, rel, (REPO / rel).read_text(encoding="utf-8")):
            key = exemption(contract, v)
            if key is None:
                found.append(v)
            else:
                used.add(key)
    return found, used


# ---------------------------------------------------------------------------------------
# The tree keeps the contracts


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.name)
def test_the_tree_keeps_the_contract(contract: Contract) -> None:
    assert source_files(contract), f"{contract.name}: no file matches {contract.sources} (renamed?)"
    found, _ = violations(contract)
    assert not found, f"{contract.name}:\n" + "\n".join(map(str, found))


def test_every_exemption_is_still_needed() -> None:
    used: set[tuple[str, str, str]] = set()
    for contract in CONTRACTS:
        used |= violations(contract)[1]
    stale = set(EXEMPTIONS) - used
    assert not stale, f"remove these exemptions, nothing needs them any more: {sorted(stale)}"


def test_every_pure_glob_names_a_file() -> None:
    files = {p.relative_to(REPO).as_posix() for p in REPO.glob("engine/**/*.py")}
    for glob in PURE_ROOMS + PURE_LEAVES:
        assert any(fnmatch.fnmatch(f, glob) for f in files), f"{glob} matches no file"


# ---------------------------------------------------------------------------------------
# The checker catches what each contract forbids (synthetic sources)


def _contract(prefix: str) -> Contract:
    return next(c for c in CONTRACTS if c.name.startswith(prefix))


def _faults(contract: Contract, relpath: str, source: str) -> list[str]:
    return [v.module for v in check_source(contract, relpath, source)]


def test_the_front_door_may_not_reach_past_engine_api() -> None:
    c = _contract("the front door")
    assert _faults(c, "kopt_tui/x.py", "from kopt_supervisor.engine.daemon import start_detached\n") == [
        "kopt_supervisor.engine.daemon.start_detached"]
    # one statement, one bad name among good ones
    assert _faults(c, "kopt_tui/x.py", "from kopt_supervisor.engine import api, daemon\n") == [
        "kopt_supervisor.engine.daemon"]
    # inside a function, under TYPE_CHECKING, in a try block, relative
    hidden = ("import typing\n"
              "def f():\n    import kopt_supervisor.engine.store as s\n"
              "if typing.TYPE_CHECKING:\n    from kopt_supervisor.engine.config import Config\n"
              "try:\n    from ...engine.gpu import backends\nexcept ImportError:\n    pass\n")
    assert _faults(c, "kopt_tui/screens/x.py", hidden) == [
        "kopt_supervisor.engine.store", "kopt_supervisor.engine.config.Config", "kopt_supervisor.engine.gpu.backends"]
    # the façade's own submodules are not the façade; nor is the engine package itself
    assert _faults(c, "kopt_tui/x.py", "from kopt_supervisor.engine.api import runs\n") == [
        "kopt_supervisor.engine.api.runs"]
    assert _faults(c, "kopt_tui/x.py", "import kopt_supervisor.engine\n") == ["kopt_supervisor.engine"]
    assert _faults(c, "kopt_tui/x.py", "from kopt_supervisor.engine import fmt\n") == ["kopt_supervisor.engine.fmt"]
    # a module the façade loaded, reached by its full name; or named at run time
    assert _faults(c, "kopt_tui/x.py", "import kopt_supervisor.engine.api\n"
                                       "kopt_supervisor.engine.daemon.start_detached(ws)\n") == [
        "kopt_supervisor.engine.daemon"]
    assert _faults(c, "kopt_tui/x.py", "import importlib\n"
                                       "importlib.import_module('kopt_supervisor.engine.' + 'daemon')\n") == [
        "kopt_supervisor.engine.daemon"]
    assert _faults(c, "kopt_tui/x.py", "__import__(name)\n") == ["a module named at run time"]
    # what it may do
    ok = ("from kopt_supervisor.engine import api\nfrom kopt_supervisor.engine.api import Workspace, fmt\n"
          "import kopt_supervisor.engine.api as a\nfrom kopt_supervisor.kernels import catalog\n"
          "from kopt_supervisor.kopt_tui import model\nfrom . import model\nkopt_supervisor.engine.api.status(ws)\n")
    assert _faults(c, "kopt_tui/x.py", ok) == []


def test_the_engine_may_not_import_the_kernels() -> None:
    c = _contract("the engine never")
    src = ("def prepare():\n    from kopt_supervisor.kernels import catalog\n"
           "import kernels.catalog\n"
           "from ...kernels.harness import bench\n"
           "import importlib\nimportlib.import_module(f\"kopt_supervisor.{'kernels'}.catalog\")\n")
    assert _faults(c, "engine/roofline/x.py", src) == [
        "kopt_supervisor.kernels.catalog", "kernels.catalog", "kopt_supervisor.kernels.harness.bench",
        "kopt_supervisor.kernels.catalog"]
    # the engine's own modules named "kernel..." are fine, and a module named at run time is its business
    assert _faults(c, "engine/x.py", "from kopt_supervisor.engine.profile import model\nimport_module(name)\n") == []


def test_the_loop_may_not_import_the_report() -> None:
    c = _contract("the loop")
    src = ("from kopt_supervisor.engine.report import write_report\n"
           "from kopt_supervisor.engine import report\n"
           "def keep():\n    from ..report.render import render_results\n")
    faults = ["kopt_supervisor.engine.report.write_report", "kopt_supervisor.engine.report",
              "kopt_supervisor.engine.report.render.render_results"]
    assert _faults(c, "engine/loop/keep.py", src) == faults
    # engine/loop.py sits one level higher: its `..report` is out of the package
    assert _faults(c, "engine/loop.py", src.replace("..report", ".report")) == faults
    assert _faults(c, "engine/loop/keep.py", "from kopt_supervisor.engine import projections\n") == []


@pytest.mark.parametrize(("source", "fault"), [
    ("import subprocess\n", "subprocess"),
    ("from concurrent.futures import ProcessPoolExecutor\n", "concurrent.futures.ProcessPoolExecutor"),
    ("from urllib import request\n", "urllib.request"),
    ("import requests\n", "requests"),
    ("def f():\n    import sqlite3\n", "sqlite3"),
    ("from kopt_supervisor.engine import store\n", "kopt_supervisor.engine.store"),
    ("from kopt_supervisor.engine.gpu.backends import open_backend\n",
     "kopt_supervisor.engine.gpu.backends.open_backend"),
    ("import typing\nif typing.TYPE_CHECKING:\n    from kopt_supervisor.engine.store import Iteration\n",
     "kopt_supervisor.engine.store.Iteration"),
    ("from kopt_supervisor.engine import history\n", "kopt_supervisor.engine.history"),
    ("import torch\n", "torch"),
    # a pure module inside a package whose __init__ loads the impure rest (the adapters that run tools)
    ("from kopt_supervisor.engine.profile import units\n", "kopt_supervisor.engine.profile.units"),
    ("__import__('so' + 'cket')\n", "socket"),
    ("import importlib\nimportlib.import_module(name)\n", "a module named at run time"),
])
def test_a_pure_room_may_not_import_side_effects(source: str, fault: str) -> None:
    c = _contract("a pure room")
    assert _faults(c, "engine/decide/x.py", source) == [fault]


def test_a_pure_room_may_import_the_standard_library_numpy_pandas_and_pure_rooms() -> None:
    c = _contract("a pure room")
    ok = ("import math, statistics, json, os\nfrom dataclasses import dataclass\nimport numpy as np\n"
          "import pandas\nfrom urllib.parse import quote\nfrom kopt_supervisor.engine.decide import stats\n"
          "from . import stats\nfrom kopt_supervisor.engine import expr, fmt\n"
          "from kopt_supervisor.engine.errors import BadInput\nfrom kopt_supervisor.engine.config import DecideConfig\n")
    assert _faults(c, "engine/decide/x.py", ok) == []


def test_a_violation_names_the_file_the_line_and_the_import() -> None:
    c = _contract("a pure room")
    (v,) = check_source(c, "engine/fmt.py", "import math\n\n\ndef f():\n    import shutil as sh\n")
    assert str(v) == "engine/fmt.py:5: `import shutil as sh` imports shutil: forbidden by 'shutil'"
