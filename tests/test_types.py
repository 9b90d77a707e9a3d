"""The package's types and imports, as plain commands: `mypy src/kopt_supervisor`, and pyright
(basedpyright) resolving every import of the editable install.

The settings are [tool.mypy] in pyproject.toml: the engine with no untyped definitions
(`disallow_untyped_defs`), everything else with its untyped definitions still checked. The
src layout needs no symlink farm nor MYPYPATH: the folders are the import names. The parts of
torch and ray that kopt never reaches are not followed (a cold run, as in a fresh clone: ~12
CPU-s, not ~23)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_src_kopt_supervisor_finds_nothing() -> None:
    pytest.importorskip("mypy", reason="mypy is in the dev extra")
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "src/kopt_supervisor"], cwd=REPO, capture_output=True, text=True, timeout=280
    )
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert "Success: no issues found" in res.stdout


def test_the_engine_is_held_to_typed_definitions() -> None:
    """The strict override names the engine's modules as mypy names them from src/."""
    import tomllib

    mypy = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in mypy["overrides"] if o.get("disallow_untyped_defs")]
    assert [o["module"] for o in strict] == [["kopt_supervisor.engine.*"]]
    assert (REPO / "src" / "kopt_supervisor" / "__init__.py").is_file()  # so mypy names src/kopt_supervisor/engine so


def test_only_third_party_imports_are_skipped() -> None:
    """The skip list (pyproject's `follow_imports = "skip"` override) spares mypy torch's and ray's
    parts that kopt never reaches; kopt's own modules are always followed and checked."""
    import tomllib

    mypy = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert "follow_imports" not in mypy
    skipped = [m for o in mypy["overrides"] if "follow_imports" in o for m in o["module"]]
    assert skipped, "the torch/ray skip list is gone: a cold mypy costs ~10 CPU-s more"
    assert all(m.split(".")[0] in {"torch", "ray"} for m in skipped), skipped
    assert all(o["follow_imports"] == "skip" for o in mypy["overrides"] if "follow_imports" in o)


def _pyright(*paths: str) -> dict:
    import json

    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "basedpyright",
            "--project",
            str(REPO / "pyproject.toml"),
            "--pythonpath",
            sys.executable,
        ]
        + ["--outputjson", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
    )
    return json.loads(res.stdout)


@pytest.mark.slow
def test_pyright_resolves_every_import_of_the_editable_install(tmp_path: Path) -> None:
    """[tool.basedpyright]: every import in src/kopt_supervisor resolves (the optional
    matplotlib says so where it is imported); a module that does not exist is reported, so
    the check can fail."""
    pytest.importorskip("basedpyright", reason="basedpyright is in the dev extra")
    whole = _pyright()
    assert whole["summary"]["filesAnalyzed"] > 200
    assert whole["generalDiagnostics"] == [], whole["generalDiagnostics"][:5]
    probe = tmp_path / "probe.py"  # outside src/: the other checks never see it
    probe.write_text("import kopt_supervisor.engine.no_such_module\nfrom kopt_supervisor.engine import api\n")
    one = _pyright(str(probe))
    missing = [d["message"] for d in one["generalDiagnostics"] if d.get("rule") == "reportMissingImports"]
    assert len(missing) == 1 and "no_such_module" in missing[0], one["generalDiagnostics"]
