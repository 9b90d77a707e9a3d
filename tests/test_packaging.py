"""The installed names (docs/design.md §1): one namespace, `kopt_supervisor`, and nothing generic.

`kernels` is the import name of Hugging Face's `kernels` package and `engine` is generic, so
the wheel maps the product card's folders under `kopt_supervisor` (pyproject.toml). These
tests build the real wheel and read what it would put into site-packages."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"engine": "kopt_supervisor.engine", "kopt_tui": "kopt_supervisor.kopt_tui",
           "kernels": "kopt_supervisor.kernels"}


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_package_folder_is_listed_under_the_namespace() -> None:
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = set()
    for folder, name in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((name, *rel)))
    found |= {"kopt_supervisor.gpu_wiki"}  # data only (docs/gpu-wiki, the spec pages the roofline cites)
    assert found == listed, f"missing from pyproject: {sorted(found - listed)}; stale: {sorted(listed - found)}"


def test_the_distribution_name_is_not_the_taken_kopt_and_the_command_stays() -> None:
    project = _pyproject()["project"]
    assert project["name"] != "kopt"
    assert project["scripts"] == {"kopt": "kopt_supervisor.kopt_tui.cli:main"}


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_name_and_the_bundled_targets(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path), str(REPO)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"kopt_supervisor"}, tops
    for needed in ("kopt_supervisor/kernels/rmsnorm/bench.py", "kopt_supervisor/kernels/adaln/solution/adaln.py",
                   "kopt_supervisor/kopt_tui/app.tcss", "kopt_supervisor/engine/loop.py",
                   "kopt_supervisor/gpu_wiki/h100-sxm.md"):
        assert any(n == needed or n.startswith(needed.rsplit(".py", 1)[0]) for n in names), needed
    assert not any("/experiments/" in n for n in names), "one-off experiments do not ship in the wheel"
