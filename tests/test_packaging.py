"""The installed names (docs/design.md §1): one namespace, `kopt_supervisor`, and nothing generic.

`kernels` is the import name of Hugging Face's `kernels` package and `engine` is generic, so
the product card's folders live under src/kopt_supervisor/ (a plain src layout that setuptools
finds on its own). These tests read pyproject.toml, build the real wheel and read what it would
put into site-packages, and read what an editable install puts there: one path, no import hook."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata, resources
from pathlib import Path

import pytest

import kopt_supervisor

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_setuptools_finds_the_packages_under_src_with_no_hand_list_nor_mapping() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools["packages"] == {"find": {"where": ["src"]}}
    assert "package-dir" not in setuptools
    assert sorted(p.name for p in SRC.iterdir() if not p.name.endswith(".egg-info")) == ["kopt_supervisor"]
    assert {p.name for p in (SRC / "kopt_supervisor").iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "engine",
        "kopt_tui",
        "kernels",
        "gpu_wiki",
    }


def test_the_distribution_name_is_not_the_taken_kopt_and_the_command_stays() -> None:
    project = _pyproject()["project"]
    assert project["name"] != "kopt"
    assert project["scripts"] == {"kopt": "kopt_supervisor.kopt_tui.cli:main"}


def test_the_gpu_wiki_is_package_data_read_through_importlib_resources() -> None:
    from kopt_supervisor.engine.profile import roofline as evaluate

    wiki = resources.files("kopt_supervisor") / "gpu_wiki"
    assert (wiki / "h100-sxm.md").is_file()
    assert evaluate.shipped_wiki_dir() == wiki
    assert evaluate.lookup_specs("NVIDIA H100 80GB HBM3")["hbm_bandwidth"].source.startswith(
        "kopt_supervisor/gpu_wiki/h100-sxm.md:"
    )


def test_an_editable_install_is_a_plain_path_to_src() -> None:
    # the installed one (src/kopt_supervisor.egg-info, the build's leftover, is found on src/ too)
    installed = [d for d in metadata.distributions(name="kopt-supervisor") if d.read_text("direct_url.json")]
    dist = installed[0] if installed else None
    if dist is None or not json.loads(dist.read_text("direct_url.json") or "{}").get("dir_info", {}).get("editable"):
        pytest.skip("kopt is not installed in editable mode here")
    pth = [f for f in dist.files or () if f.name.endswith(".pth")]
    assert len(pth) == 1, dist.files
    assert Path(dist.locate_file(pth[0])).read_text().strip() == str(SRC)  # no import hook, no finder module
    assert not [f for f in dist.files or () if "finder" in f.name]
    assert Path(kopt_supervisor.__file__).resolve().parent == SRC / "kopt_supervisor"


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_name_the_bundled_targets_and_the_wiki(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"kopt_supervisor"}, tops
    for needed in (
        "kopt_supervisor/__init__.py",
        "kopt_supervisor/kernels/rmsnorm/bench.py",
        "kopt_supervisor/kernels/rmsnorm/params.json",
        "kopt_supervisor/kernels/adaln/solution/adaln.py",
        "kopt_supervisor/kernels/harness/bench.py",
        "kopt_supervisor/kopt_tui/app.tcss",
        "kopt_supervisor/engine/loop/proposal.py",
        "kopt_supervisor/gpu_wiki/h100-sxm.md",
    ):
        assert needed in names, needed
    wiki = {Path(n).name for n in names if n.startswith("kopt_supervisor/gpu_wiki/")}
    assert wiki == {p.name for p in (SRC / "kopt_supervisor" / "gpu_wiki").glob("*.md")}
    assert not any("/experiments/" in n or n.startswith("tests/") for n in names), "no tests nor experiments ship"


def test_every_install_hint_names_this_distribution_and_an_extra_it_has() -> None:
    """`pip install 'NAME[extra]'` in what kopt prints and in the docs names this distribution
    (a hint with `kopt[nvidia]` would install an unrelated package called kopt) and one of its
    extras."""
    import re

    project = _pyproject()["project"]
    name, extras = project["name"], set(project["optional-dependencies"])
    hint = re.compile(r"pip install -?e? ?'([A-Za-z0-9_.\-]*)\[([a-z,]+)\]'")
    seen = []
    for path in [*(SRC / "kopt_supervisor").rglob("*.py"), *REPO.glob("*.md"), *(REPO / "docs").glob("*.md")]:
        for dist, wanted in hint.findall(path.read_text(encoding="utf-8")):
            if dist in ("", "."):
                continue  # an install from a clone: `pip install -e '.[extra]'`
            seen.append((path.name, dist, wanted))
            assert dist == name, f"{path}: pip install '{dist}[{wanted}]' (the distribution is {name})"
            assert set(wanted.split(",")) <= extras, f"{path}: extras {wanted} (pyproject has {sorted(extras)})"
    assert any(d == name for _, d, _ in seen)
