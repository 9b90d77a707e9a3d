"""The code's style is ruff's, checked where CI runs (the README's test command): `ruff check`
(the rules of pyproject.toml's [tool.ruff.lint]) and `ruff format --check` over the package,
the tests and the experiments. A file that is not formatted, or breaks a rule, fails here with
the command that fixes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ruff", reason="ruff is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["src", "tests", "experiments"]


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_ruff_check_finds_nothing() -> None:
    res = ruff("check", "--no-cache")
    assert res.returncode == 0, (
        f"ruff check: {res.stdout[-3000:]}{res.stderr[-1000:]} (ruff check --fix {' '.join(PATHS)})"
    )


def test_every_file_is_ruff_formatted() -> None:
    res = ruff("format", "--check", "--no-cache")
    assert res.returncode == 0, f"{res.stdout[-3000:]}{res.stderr[-1000:]} (run: ruff format {' '.join(PATHS)})"


def test_the_check_catches_an_unformatted_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("x = {  'a':1 }\n")
    res = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1 and "bad.py" in res.stdout
