"""One finished fake-target run for the whole session (tests/report/scenario.py), and markdown readers."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from kopt_supervisor.engine.workspace import Workspace
from tests.report.scenario import fake_gpu_env, finished_run


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory):
    """The scenario run, finished, with v2 and v6 masked (v6 was the best keep)."""
    tmp = tmp_path_factory.mktemp("report")
    with fake_gpu_env(tmp):  # the environment is restored before any test runs
        return finished_run(tmp, mask=[2, 6])


def sections(text: str) -> dict[str, str]:
    """`## Heading` -> the text under it."""
    out = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        out[title.strip()] = body
    return out


def table(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the markdown table whose header's first cell is `first_header`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = split_row(line) if line.startswith("|") else []
        if cells and cells[0] == first_header:
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(cells, split_row(row), strict=True)))
            return rows
    raise AssertionError(f"no table starting with {first_header!r}")


def split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [c.strip().replace("\\|", "|") for c in cells]


def db_rows(ws: Workspace, sql: str, *args) -> list[sqlite3.Row]:
    db = sqlite3.connect(f"file:{ws.db_path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")
