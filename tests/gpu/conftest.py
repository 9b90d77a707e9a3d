"""Fixtures for the GPU room's tests (helpers live in gpu_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_helpers import FakeTime


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own claim directory and no inherited fake-GPU script."""
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()
