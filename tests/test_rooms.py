"""The engine's rooms stay small enough to hold in one's head (docs/architecture.md; issue 29): no
module of `engine/` over MAX_LINES lines. A module that grows past the bound is split along what
it holds, as served_trees.py (look_files.py), context.py (spent.py), runner/command.py
(server.py), decide/verdict.py (review.py) and gpu/gate.py (claims.py) were."""

from __future__ import annotations

from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "src" / "kopt_supervisor" / "engine"
MAX_LINES = 600


def over(limit: int, root: Path = ENGINE) -> list[tuple[str, int]]:
    """(module, lines) for every module under `root` longer than `limit` lines."""
    sizes = ((p, len(p.read_text(encoding="utf-8").splitlines())) for p in sorted(root.rglob("*.py")))
    return [(str(p.relative_to(root)), n) for p, n in sizes if n > limit]


def test_no_engine_module_is_over_the_bound() -> None:
    assert over(MAX_LINES) == []


def test_the_bound_catches_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert over(MAX_LINES, tmp_path) == [("pkg/long.py", MAX_LINES + 1)]
