"""A finished fake-target run for the report tests and for docs/reports.md's example.

The run: the fake CPU target (tests/fake_target) on a scripted fake H100 (KOPT_FAKE_GPUS),
production configs n >= 256, roofline formulas, a format command that leaves a cache folder
and a report file in the tree (both end up in kopt's keep commits, neither is source), and
this proposer script (tests/report/proposer.py):

    v1 gain5   v2 loss5   v3 gain_small (class cls=small)   v4 gain5_artifacts
    v5 nochange   v6 gain5

then v2 and v6 masked (v6 was the best: masking it moves BEST_COMMIT back to v4).

Regenerate the docs example (prints the workspace; results.md is in it):

    /work/main/.venv/bin/python -m tests.report.scenario /tmp/kopt-report-example
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine import api
from engine.daemon import run_engine
from engine.workspace import Workspace
from tests.conftest import FAKE, git, make_fake_repo

HERE = Path(__file__).parent
SCRIPT = ["gain5", "loss5", "gain_small", "gain5_artifacts", "nochange", "gain5"]
GPU = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5f1c0d2e-fake-h100", "util_pct": 0,
       "mem_used_mib": 12, "mem_total_mib": 81559, "processes": []}
TAG = "demo"


def toml_changes() -> dict[str, str]:
    return {
        f"{sys.executable} {FAKE / 'proposer.py'}": f"{sys.executable} {HERE / 'proposer.py'}",
        'csv = "-"': 'csv = "-"\nproduction = "n >= 256"\ncompile_flags = "-O3 -DKOPT_FAKE=1"\n'
                     'env = { FAKE_NOISE = "0.003" }',
        'vendor = "none"': 'vendor = "auto"\nsamples = 1\nsample_interval_s = 0\nwait_s = 0.2\nwait_max_s = 5',
    }


EXTRA_TOML = """
[format]
command = "mkdir -p .ruff_cache && echo cache > .ruff_cache/CACHEDIR.TAG && date +%s%N > format-report.txt"

[stop]
max_iters = 6

[roofline]
bytes = "n * 8"
flops = "n * 2"
"""


@contextmanager
def fake_gpu_env(tmp: Path) -> Iterator[None]:
    """KOPT_FAKE_GPUS (one idle H100, forever) and a private claims folder, restored after."""
    gpus = tmp / "gpus.json"
    gpus.write_text(json.dumps([[GPU]]))
    saved = {k: os.environ.get(k) for k in ("KOPT_FAKE_GPUS", "KOPT_GPU_CLAIMS_DIR", "FAKE_SCRIPT")}
    os.environ["KOPT_FAKE_GPUS"] = str(gpus)
    os.environ["KOPT_GPU_CLAIMS_DIR"] = str(tmp / "claims")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def make_target(tmp: Path, name: str = "target", script: list[str] | None = None) -> Path:
    repo = make_fake_repo(tmp / name, script=script or SCRIPT, extra_toml=EXTRA_TOML, toml_replace=toml_changes())
    (repo / ".gitignore").write_text("*.dat\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore data files")
    os.environ["FAKE_SCRIPT"] = str(tmp / f"{name}.script.json")
    return repo


def finished_run(tmp: Path, *, script: list[str] | None = None, mask: list[int] | None = None,
                 tag: str = TAG) -> Workspace:
    """Init, run to the end, mask; call inside fake_gpu_env(tmp)."""
    from kopt_tui.cli import main as kopt

    repo = make_target(tmp, f"target-{tag}", script)
    root = tmp / "workspaces"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", tag]) == 0
    ws = Workspace(root, tag)
    assert run_engine(ws) == 0
    if mask:
        api.send(ws, "mask", {"versions": mask})
    return ws


def main(argv: list[str]) -> int:
    from engine.report import write_report

    out = Path(argv[0] if argv else "/tmp/kopt-report-example").resolve()
    if out.exists() and any(out.iterdir()):
        print(f"{out} is not empty", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    with fake_gpu_env(out):
        ws = finished_run(out, mask=[2, 6])
        path = write_report(ws)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
