"""mypy over the engine (no untyped definitions) and the front door, as installed.

The folders install under `kopt_supervisor` (pyproject.toml maps them), and every import in
the code names `kopt_supervisor.engine...`; mypy cannot follow setuptools' editable-install
finder, so the check runs on a folder of links that has the installed layout
(.mypy_cache/layout/kopt_supervisor/{engine,kopt_tui,kernels} -> the repository's folders).
The settings are [tool.mypy] in pyproject.toml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_finds_nothing_in_engine_and_kopt_tui() -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra")
    layout = REPO / ".mypy_cache" / "layout"
    pkg = layout / "kopt_supervisor"
    pkg.mkdir(parents=True, exist_ok=True)
    for folder in ("engine", "kopt_tui", "kernels"):
        link = pkg / folder
        if not link.is_symlink():
            link.symlink_to(REPO / folder, target_is_directory=True)
    old = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(layout)
    try:
        out, err, status = api.run(["--config-file", str(REPO / "pyproject.toml"), "--cache-dir",
                                    str(REPO / ".mypy_cache" / "cache"), "--namespace-packages",
                                    "--explicit-package-bases", "-p", "kopt_supervisor.engine",
                                    "-p", "kopt_supervisor.kopt_tui"])
    finally:
        if old is None:
            os.environ.pop("MYPYPATH", None)
        else:
            os.environ["MYPYPATH"] = old
    assert status == 0, out + err
