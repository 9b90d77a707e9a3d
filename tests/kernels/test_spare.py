"""kopt's spare (kernels/harness/spare.py): a served bench's process started before its tree
exists. Nothing of a tree may run in it before its `run` line; after it, the script runs as
`python SCRIPT ARG...` in the tree would, answering on the same stdin."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine.loop.served_trees import SPARE_CODE, spare_launch
from kopt_supervisor.kernels.harness import bench, spare

SCRIPT = """import json, os, sys
print(json.dumps({"cwd": os.getcwd(), "argv": sys.argv, "path0": sys.path[0],
                  "ran_at": os.environ.get("KOPT_SPARE_RAN_AT", "")}), flush=True)
for line in sys.stdin:
    print("echo " + line.strip(), flush=True)
"""
PLANTED = "open({marker!r}, 'a').write({name!r} + '\\n')\n"


def start(cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SPARE_CODE],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_nothing_in_the_spares_folder_runs_and_the_script_runs_as_in_its_tree(tmp_path: Path) -> None:
    """Hostile: the folder the spare starts in holds modules named after everything it and a
    bench import (torch, Triton, kopt's package, json, os's helpers); none may run, before or
    after `run`. Then the script runs from its tree: its folder first on sys.path, its argv,
    the working directory, and the requests that follow on the same stdin."""
    here, tree, marker = tmp_path / "start", tmp_path / "tree", tmp_path / "ran.txt"
    here.mkdir()
    tree.mkdir()
    for name in ("torch", "triton", "json", "runpy", "importlib", "sitecustomize", "usercustomize"):
        (here / f"{name}.py").write_text(PLANTED.format(marker=str(marker), name=name))
    (here / "kopt_supervisor").mkdir()
    (here / "kopt_supervisor" / "__init__.py").write_text(PLANTED.format(marker=str(marker), name="kopt"))
    (tree / "bench.py").write_text(SCRIPT)
    p = start(here)
    try:
        out, err = p.communicate(
            "run " + json.dumps({"cwd": str(tree), "argv": ["bench.py", "--serve", "x"]}) + "\nlook 0\n", timeout=120
        )
    finally:
        p.kill()
    assert p.returncode == 0, err
    assert not marker.exists(), marker.read_text()
    first, echo = out.splitlines()[:2]
    seen = json.loads(first)
    assert seen["cwd"] == str(tree) and seen["argv"] == ["bench.py", "--serve", "x"]
    assert seen["path0"] == str(tree) and float(seen["ran_at"]) > 0
    assert echo == "echo look 0"
    assert "spare: preloaded in" in err


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("look 0 1 /x", "expected `run JSON`"),
        ("run {", "not JSON"),
        ('run {"argv": ["b.py"]}', "string `cwd`"),
        ('run {"cwd": "/", "argv": []}', "non-empty list"),
        ('run {"cwd": "/", "argv": ["b.py", 3]}', "non-empty list"),
    ],
)
def test_a_bad_run_line_is_named(line: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        spare.parse_run(line)


def test_a_bad_first_line_is_answered_fail_and_the_spare_leaves(tmp_path: Path) -> None:
    p = start(tmp_path)
    out, _ = p.communicate("look 0 1 /x\n", timeout=120)
    assert p.returncode == 2 and out.startswith("fail ? expected `run JSON`")


def test_a_bench_run_by_the_spare_counts_its_start_from_the_run_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(spare.SPARE_RAN_AT_ENV, repr(time.clock_gettime(time.CLOCK_BOOTTIME) - 1.5))
    assert 1.5 <= bench.process_age_s() < 5.0


def test_only_a_python_script_command_gets_a_spare() -> None:
    launch = spare_launch("/opt/v/bin/python3.12 bench.py --serve --dtypes bfloat16")
    assert launch is not None
    assert launch[0] == ["/opt/v/bin/python3.12", "-c", SPARE_CODE]
    assert launch[1] == ["bench.py", "--serve", "--dtypes", "bfloat16"]
    for command in ("python -u bench.py --serve", "./serve --serve", "cd x && python b.py", "torchrun b.py"):
        assert spare_launch(command) is None, command
