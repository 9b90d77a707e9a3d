"""Kernel tests run Triton in its interpreter (no GPU here). TRITON_INTERPRET=1 must be set
before triton.language is first imported (its own @jit helpers, tl.sum's combine function,
are built at import): this conftest sets it when it is collected, before any test runs; the
tests that compile for a real GPU do so in subprocesses without it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "src" / "kopt_supervisor" / "kernels"

if "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture(autouse=True)
def _interpreted() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.fail("triton was imported before tests/kernels/conftest.py could set TRITON_INTERPRET=1")


@pytest.fixture
def harness_path() -> Path:
    """kopt's kernels/ folder (the solutions import the installed public harness,
    kopt_supervisor.kernels.harness: nothing goes on sys.path)."""
    return KERNELS
