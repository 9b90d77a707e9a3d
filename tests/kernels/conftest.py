"""Kernel tests run Triton in its interpreter: TRITON_INTERPRET=1 before triton is imported."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def pytest_configure(config: pytest.Config) -> None:
    if "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def harness_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    """kernels/ on sys.path: the solutions import `harness` as a top-level package."""
    monkeypatch.syspath_prepend(str(KERNELS))
    return KERNELS
