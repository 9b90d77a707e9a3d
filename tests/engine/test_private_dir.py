"""kopt's private folder for index files (engine/gitops/invoke.py `private_dir`): one per
process, named after it, and the folders of processes that are gone swept by the next one."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine.gitops import invoke


def test_the_folders_of_gone_processes_are_swept_and_a_live_ones_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    dead = tmp_path / f"kopt-git-{dead_pid}-abc"  # an engine killed before its atexit ran
    live = tmp_path / f"kopt-git-{os.getpid()}-def"
    old = tmp_path / "kopt-git-x1y2z3"  # named before folders carried their pid
    young = tmp_path / "kopt-git-q9w8e7"
    other = tmp_path / "unrelated-dir"
    for d in (dead, live, old, young, other):
        d.mkdir()
        (d / "ref-1.index").write_text("index")
    day_ago = time.time() - invoke.STALE_UNNAMED_S - 60
    os.utime(old, (day_ago, day_ago))
    (tmp_path / f"kopt-git-{dead_pid}-file").write_text("not a folder")
    # a link named as a gone process's folder (planted by anyone who can write the temp dir):
    # neither the link nor what it points at is touched
    target = tmp_path / "someone-elses"
    target.mkdir()
    (target / "keep.txt").write_text("data")
    (tmp_path / f"kopt-git-{dead_pid}-link").symlink_to(target)
    removed = invoke.sweep_private_dirs()
    assert sorted(removed) == sorted([dead, old])
    assert not dead.exists() and not old.exists()
    assert live.is_dir() and young.is_dir() and other.is_dir() and (tmp_path / f"kopt-git-{dead_pid}-file").exists()
    assert (target / "keep.txt").read_text() == "data" and (tmp_path / f"kopt-git-{dead_pid}-link").is_symlink()


def test_a_process_s_own_folder_carries_its_pid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(invoke, "_PRIVATE", [])
    monkeypatch.setattr(invoke.atexit, "register", lambda *a, **k: None)
    d = invoke.private_dir()
    assert d.parent == tmp_path and d.name.startswith(f"kopt-git-{os.getpid()}-") and invoke.private_dir() == d
    assert oct(d.stat().st_mode & 0o777) == "0o700"
