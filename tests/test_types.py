"""The package's types and imports, as plain commands: `mypy src/kopt_supervisor`, and pyright
(basedpyright) resolving every import of the editable install (over a copy of the package
that holds its import statements only: the same answer at a third of the CPU).

The settings are [tool.mypy] in pyproject.toml: the engine with no untyped definitions
(`disallow_untyped_defs`), everything else with its untyped definitions still checked. The
src layout needs no symlink farm nor MYPYPATH: the folders are the import names. The parts of
torch and ray that kopt never reaches are not followed (a cold run, as in a fresh clone: ~12
CPU-s, not ~23)."""

from __future__ import annotations

import ast
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


def import_statements(text: str) -> str:
    """Every import statement of a module's source (those inside functions, classes, `try` and
    `if` blocks too), each on its own and unindented, in source order, with the comment that
    ends its last line (a `# pyright: ignore[...]` stays with its import)."""
    lines = text.splitlines()
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        end = node.end_col_offset if node.end_col_offset is not None else len(lines[last])
        if first == last:
            code = lines[first][node.col_offset : end]
        else:
            code = "\n".join([lines[first][node.col_offset :], *lines[first + 1 : last], lines[last][:end]])
        tail = lines[last][end:].strip()
        found.append((node.lineno, node.col_offset, code + (f"  {tail}" if tail.startswith("#") else "")))
    return "".join(f"{code}\n" for _, _, code in sorted(found))


def imports_only_copy(dest: Path) -> Path:
    """src/kopt_supervisor as a tree of the same modules holding only their import statements.
    With pyproject's [tool.basedpyright] (every rule off but reportMissingImports: an undefined
    name, a wrong type or a missing attribute in the package reports nothing) pyright answers
    the same on it as on the package, less the ~16 CPU-s its checker spent on the bodies.
    Relative imports resolve inside the copy, which has every module; absolute ones through
    the editable install."""
    src = REPO / "src" / "kopt_supervisor"
    out = dest / "kopt_supervisor"
    for f in sorted(src.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        target = out / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(import_statements(f.read_text(encoding="utf-8")), encoding="utf-8")
    return out


def test_the_imports_only_copy_keeps_every_import_and_its_ignore_comment() -> None:
    text = (
        "from __future__ import annotations\n"
        "import os, sys  # a comment\n"
        "x = 1; import json\n"
        "from .sibling import (\n    a,\n    b,\n)\n"
        "def f() -> None:\n"
        "    try:\n"
        "        import matplotlib  # pyright: ignore[reportMissingImports]\n"
        "    except ImportError:\n"
        "        from ..up import c as d\n"
        "class K:\n    if True: import re\n"
    )
    assert import_statements(text) == (
        "from __future__ import annotations\n"
        "import os, sys  # a comment\n"
        "import json\n"
        "from .sibling import (\n    a,\n    b,\n)\n"
        "import matplotlib  # pyright: ignore[reportMissingImports]\n"
        "from ..up import c as d\n"
        "import re\n"
    )


@pytest.mark.slow
def test_pyright_resolves_every_import_of_the_editable_install(tmp_path: Path) -> None:
    """[tool.basedpyright]: every import in src/kopt_supervisor resolves (the optional
    matplotlib says so where it is imported); a module that does not exist is reported, so
    the check can fail: one pyright run over the imports-only copy of the package, a probe
    outside it, and a copy of one module given imports that do not resolve."""
    pytest.importorskip("basedpyright", reason="basedpyright is in the dev extra")
    copy = imports_only_copy(tmp_path / "imports")
    assert not (tmp_path / "imports" / "kopt_supervisor" / "engine" / "no_such.py").exists()
    broken = tmp_path / "imports" / "kopt_supervisor" / "engine" / "broken_probe.py"
    broken.write_text("from .no_such_sibling import x\nimport kopt_supervisor.engine.no_such_module\n")
    probe = tmp_path / "probe.py"  # outside the package: resolved through the editable install
    probe.write_text("import kopt_supervisor.engine.no_such_module\nfrom kopt_supervisor.engine import api\n")
    got = _pyright(str(copy), str(probe))
    modules = sum(1 for _ in copy.rglob("*.py"))  # the package's, the broken probe among them
    assert modules > 100 and got["summary"]["filesAnalyzed"] >= modules + 1  # every one, and the probe
    by_file: dict[str, list[str]] = {}
    for d in got["generalDiagnostics"]:
        by_file.setdefault(Path(d["file"]).name, []).append(f"{d.get('rule')}: {d['message']}")
    missing = by_file.pop("probe.py", [])
    assert len(missing) == 1 and "reportMissingImports" in missing[0] and "no_such_module" in missing[0], missing
    wrong = by_file.pop("broken_probe.py", [])
    assert len(wrong) == 2 and all("reportMissingImports" in m for m in wrong), wrong
    assert by_file == {}, list(by_file.items())[:5]
