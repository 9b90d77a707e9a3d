"""The package boundaries of docs/design.md §1, enforced by import-linter: `lint-imports` with the
contracts of pyproject.toml's [tool.importlinter] (two contract types of our own live in
tests/import_contract_types.py).

- the front door (kopt_tui) imports the engine only through `engine.api`;
- the engine never imports the front door nor the bundled kernels;
- the loop never imports the report;
- a pure room (statistics, expressions, number formatting, roofline math) imports nothing
  with side effects: only the standard library (less a deny-list), numpy/pandas, and other
  pure modules, whose packages' __init__ files are pure too or import nothing; the engine
  package itself (its exception types) is held to this alone, without its modules;
- the front door and the pure rooms bring modules in by import statements only.

The tree keeps them; and each contract is shown to catch what it forbids on a copy of the
package with violating modules written into it (imports inside functions, under
TYPE_CHECKING, in try blocks, relative ones); an exemption nothing needs any more fails the run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is in the dev extra")

REPO = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` run in `root` (its pyproject.toml, its tests/ for the contract types) over
    the package in root/src."""
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "NO_COLOR": "1", "COLUMNS": "300"}
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=240)


def test_the_tree_keeps_every_contract() -> None:
    res = lint(REPO)
    assert res.returncode == 0, res.stdout[-8000:] + res.stderr[-2000:]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in res.stdout


def copy_tree(dest: Path) -> Path:
    """A copy of the package, pyproject.toml and the contract types, to break on purpose."""
    shutil.copytree(
        REPO / "src" / "kopt_supervisor", dest / "src" / "kopt_supervisor", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")
    (dest / "tests").mkdir()
    for name in ("__init__.py", "import_contract_types.py"):
        shutil.copy(REPO / "tests" / name, dest / "tests" / name)
    return dest / "src" / "kopt_supervisor"


FRONT_DOOR = """\
import importlib
import typing

from kopt_supervisor.engine.daemon import start_detached
from kopt_supervisor.engine import api, fmt
from kopt_supervisor.engine.api import run_io


def f():
    import kopt_supervisor.engine.store


if typing.TYPE_CHECKING:
    from kopt_supervisor.engine.config import KoptConfig
try:
    from ..engine.gpu import backends
except ImportError:
    pass
import kopt_supervisor.engine.api

kopt_supervisor.engine.daemon.start_detached(None)
kopt_supervisor.engine.history.plan(None)
kopt_supervisor.engine.api.status(None)
importlib.import_module("kopt_supervisor.engine." + "daemon")
__import__(name)
"""

FRONT_DOOR_OK = """\
from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import Workspace, fmt
import kopt_supervisor.engine.api as a
from kopt_supervisor.kernels import catalog
from kopt_supervisor.kopt_tui import model
from . import model
kopt_supervisor.engine.api.status(None)
kopt_supervisor.kopt_tui.model.x
"""

PURE = """\
import math, statistics, json, os
import subprocess
import torch
import yaml
from kopt_supervisor.engine import history
from kopt_supervisor.engine.adapters import table
from kopt_supervisor.engine.profile import profiler
from kopt_supervisor.engine.arithmetic import model
from kopt_supervisor.engine.decide import geomean
from . import estimate
from kopt_supervisor.engine import expr, fmt
from kopt_supervisor.engine import BadInput
import numpy as np
import pandas


def f():
    from urllib import parse
"""


@pytest.mark.slow
def test_each_contract_catches_what_it_forbids(tmp_path: Path) -> None:
    pkg = copy_tree(tmp_path)
    (pkg / "kopt_tui" / "bad_door.py").write_text(FRONT_DOOR)
    (pkg / "kopt_tui" / "good_door.py").write_text(FRONT_DOOR_OK)
    (pkg / "engine" / "bad_up.py").write_text("def f():\n    from kopt_supervisor.kopt_tui import cli\n")
    (pkg / "engine" / "bad_kernels.py").write_text("from kopt_supervisor.kernels import catalog\nimport kernels.x\n")
    (pkg / "engine" / "loop" / "bad_report.py").write_text("def keep():\n    from ..report import render\n")
    (pkg / "engine" / "decide" / "bad_pure.py").write_text(PURE)
    # a pure module's impure parent: a package of the copy's own, its leaf on the pure list
    (pkg / "engine" / "arithmetic").mkdir()
    (pkg / "engine" / "arithmetic" / "__init__.py").write_text("import shutil\n")
    (pkg / "engine" / "arithmetic" / "model.py").write_text('"""Pure."""\n')
    pyproject = tmp_path / "pyproject.toml"
    text = pyproject.read_text()
    pure_list = '  "kopt_supervisor.engine.roofline",\n'
    assert pure_list in text
    pyproject.write_text(text.replace(pure_list, pure_list + '  "kopt_supervisor.engine.arithmetic.model",\n', 1))
    res = lint(tmp_path)
    out = " ".join(res.stdout.split())  # the report wraps long lines
    assert res.returncode == 1, out

    assert f"Contracts: 0 kept, {len(CONTRACTS)} broken." in out
    door, pure = "kopt_supervisor.kopt_tui.bad_door", "kopt_supervisor.engine.decide.bad_pure"
    for imported, line in [
        ("engine.daemon", 4),
        ("engine.fmt", 5),
        ("engine.api.run_io", 6),
        ("engine.store", 10),
        ("engine.config", 14),
        ("engine.gpu.backends", 16),
    ]:
        assert f"{door} -> kopt_supervisor.{imported} (l.{line})" in out, imported
    assert "good_door" not in out  # the façade by every spelling, the kernels, the TUI itself
    for expected in (
        "kopt_supervisor.engine.bad_up -> kopt_supervisor.kopt_tui.cli (l.2)",
        "kopt_supervisor.engine.bad_kernels -> kopt_supervisor.kernels.catalog (l.1)",
        "kopt_supervisor.engine.bad_kernels -> kernels (l.2)",
        "kopt_supervisor.engine.loop.bad_report -> kopt_supervisor.engine.report.render (l.2)",
        # static imports: a module the façade did not load, named as an attribute or at run time
        f"{door} -> kopt_supervisor.engine.history (reached as an attribute, never imported here) (l.22)",
        f"{door} -> a module named at run time: importlib.import_module('kopt_supervisor.engine.' + 'daemon') (l.24)",
        f"{door} -> a module named at run time: __import__(name) (l.25)",
        # the pure rooms: the deny-list, directly or through another module
        f"{pure} -> subprocess (l.2)",
        f"{pure} -> torch (l.3)",
        f"{pure} -> kopt_supervisor.engine.profile.profiler (l.7)",
        f"{pure} -> kopt_supervisor.engine.history (l.5)",
        "kopt_supervisor.engine.store -> sqlite3",  # history's chain to its database
        # the allow-list: a module no deny-list names, a third-party package, an impure parent
        f"{pure} -> yaml (l.4)",
        f"{pure} -> kopt_supervisor.engine.adapters.table (l.6)",
        f"{pure} -> kopt_supervisor.engine.arithmetic (run by importing kopt_supervisor.engine.arithmetic.model) (l.8)",
        f"{pure} -> urllib (l.18)",
    ):
        assert expected in out, expected
    assert f"{door} -> kopt_supervisor.engine.api (" not in out  # the façade, imported or spelled out
    assert "kopt_supervisor.engine.daemon (reached" not in out  # imported by a statement on line 4
    for fine in (
        "math",
        "statistics",
        "numpy",
        "pandas",
        "kopt_supervisor.engine.decide",
        "kopt_supervisor.engine.expr",
        "kopt_supervisor.engine",
    ):
        assert f"{pure} -> {fine} (" not in out, fine


@pytest.mark.slow
def test_the_engine_package_itself_is_held_to_the_pure_rooms_rules(tmp_path: Path) -> None:
    """Every room imports the exception types from `kopt_supervisor.engine` (the package's
    __init__): held to the pure rooms' rules alone, without the modules under it."""
    init = copy_tree(tmp_path) / "engine" / "__init__.py"
    first = len(init.read_text().splitlines()) + 1
    init.write_text(init.read_text() + "import subprocess\nimport yaml\n__import__(name)\n")
    res = lint(tmp_path)
    out = " ".join(res.stdout.split())
    assert res.returncode == 1, out
    for expected in (
        f"kopt_supervisor.engine -> subprocess (l.{first})",  # the deny-list
        f"kopt_supervisor.engine -> yaml (l.{first + 1})",  # the allow-list
        f"kopt_supervisor.engine -> a module named at run time: __import__(name) (l.{first + 2})",
    ):
        assert expected in out, expected
    assert "kopt_supervisor.engine.store ->" not in out  # its modules are not held to it


@pytest.mark.slow
def test_an_exemption_nothing_needs_any_more_fails_the_run(tmp_path: Path) -> None:
    """A breach let through (`ignore_imports`) that the tree does not commit, or no longer does."""
    copy_tree(tmp_path)
    pyproject = tmp_path / "pyproject.toml"
    text = pyproject.read_text()
    alone = 'alone = ["kopt_supervisor.engine"]\n'
    assert alone in text
    exemption = 'ignore_imports = ["kopt_supervisor.engine.decide.verdict -> concurrent"]\n'
    pyproject.write_text(text.replace(alone, alone + exemption, 1))
    res = lint(tmp_path)
    assert res.returncode != 0
    assert re.search(
        r"No matches for ignored import kopt_supervisor\.engine\.decide\.verdict -> concurrent",
        " ".join((res.stdout + res.stderr).split()),
    ), res.stdout[-3000:] + res.stderr[-3000:]
