"""Unconfined runs (--no-sandbox, or the demo where no sandbox works) send a tree's compile
caches where its confinement would: a Python bench that imports the tree's own modules writes
no `__pycache__` into best/ or cand/ (the after-run check refuses one, so before this every
unconfined Python bench failed its baseline on a machine without PYTHONDONTWRITEBYTECODE:
found in a Debian chroot without bubblewrap, docs/fresh-machine.md)."""

from __future__ import annotations

import json
import os
import subprocess

from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt

GIT_ENV = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}


def test_an_unconfined_python_bench_leaves_no_bytecode_in_the_trees(fake_env, monkeypatch, driven_clock):
    repo, root = fake_env(["gain5"], toml_replace={"review_timeout_s = 2": "review_timeout_s = 1800"})
    (repo / "helper.py").write_text("SCALE = 1.0\n")
    bench = (repo / "bench.py").read_text()
    (repo / "bench.py").write_text(bench.replace("import math\n", "import math\nimport helper  # noqa: F401\n", 1))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "commit", "-qm", "a module the bench imports"], cwd=repo, check=True, env={**os.environ, **GIT_ENV}
    )
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)  # a fresh login's environment
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "u"]) == 0
    ws = Workspace(root, "u")
    assert run_engine(ws, max_iters=1, no_sandbox=True) == 0
    v0, v1 = (json.loads(ws.memory_path(v).read_text()) for v in (0, 1))
    assert v0["status"] == "baseline", v0.get("reason")
    assert v1["status"] == "keep", v1["decision"]
    for tree in (ws.dir / "best", ws.dir / "cand"):
        assert not list(tree.rglob("__pycache__")), tree
