"""engine/onboard/draft.py: the static scan behind protected and sources."""

from __future__ import annotations

from pathlib import Path

from kopt_supervisor.engine.onboard.draft import bench_scripts, scan


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_helpers_are_protected_kernels_are_not_and_data_files_are_sources(tmp_path: Path) -> None:
    repo = write(
        tmp_path,
        {
            "bench/run.py": "import json\nfrom util.timer import cuda_ms\nfrom mykern import softmax\n"
            "import shapes\nCFG = 'bench/sizes.json'\n",
            "bench/shapes.py": "SIZES = [1, 2]\n",
            "bench/sizes.json": "[1, 2]\n",
            "util/__init__.py": "",
            "util/timer.py": "import torch\nfrom .ref import reference\n",
            "util/ref.py": "def reference(x):\n    return x\n",
            "mykern/__init__.py": "from .softmax import softmax\n",
            "mykern/softmax.py": "import triton\nfrom .launch import grid\n\n@triton.jit\ndef _k(x):\n    pass\n",
            "mykern/launch.py": "def grid(n):\n    return (n,)\n",
            "unrelated.py": "x = 1\n",
        },
    )
    s = scan("python bench/run.py --sizes bench/sizes.json", repo)
    assert s.scripts == ["bench/run.py"]  # `import shapes` is found beside the script, as Python finds it
    assert s.kernel == ["mykern/softmax.py"]  # its own helpers (launch.py) are the proposer's to change
    assert s.protected == [
        "bench/run.py",
        "bench/shapes.py",
        "mykern/__init__.py",
        "util/__init__.py",
        "util/ref.py",
        "util/timer.py",
    ]
    assert "bench/sizes.json" in s.sources and "unrelated.py" not in s.sources and "mykern/launch.py" not in s.sources


def test_a_kernel_inside_the_bench_is_said(tmp_path: Path) -> None:
    repo = write(tmp_path, {"bench.py": "import triton\n@triton.jit\ndef k(x):\n    pass\n"})
    s = scan("python3 bench.py", repo)
    assert s.kernel == ["bench.py"] and s.protected == [] and "cannot protect" in s.notes[0]


def test_module_runs_pytest_paths_and_conftest(tmp_path: Path) -> None:
    repo = write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/bench.py": "import pkg.helpers\n",
            "pkg/helpers.py": "",
            "tests/conftest.py": "import pkg.helpers\n",
            "tests/bench/test_speed.py": "",
            "tests/bench/conftest.py": "",
        },
    )
    assert scan("python -m pkg.bench", repo).protected == ["pkg/__init__.py", "pkg/bench.py", "pkg/helpers.py"]
    s = scan("pytest tests/bench --benchmark-json=out.json", repo)
    assert s.scripts == ["tests/bench/test_speed.py"]
    assert {"tests/bench/conftest.py", "tests/conftest.py", "pkg/helpers.py"} <= set(s.protected)


def test_imports_outside_the_repo_and_odd_commands_are_ignored(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", {"evil.py": "x = 1\n"})
    repo = write(tmp_path / "repo", {"bench.py": "import os\nimport evil\nimport numpy\n"})
    (repo / "evil.py").symlink_to(outside / "evil.py")
    s = scan("python bench.py", repo)
    assert s.protected == ["bench.py"] and s.helpers == []
    scripts, notes = bench_scripts("./build/bench --benchmark_format=json", repo)
    assert scripts == [] and "names no Python file" in notes[0]
    assert bench_scripts("python 'unclosed", repo)[1][0].startswith("cannot split")
    assert scan("python ../outside/evil.py", repo).scripts == []


def test_a_function_named_as_module_colon_name_is_followed_like_an_import(tmp_path: Path) -> None:
    # kopt's harness Spec names the timed function as a string; the example softmax repo's
    # kernel was missing from [target].sources, so every change to it went to review as
    # "outside the sources" (found on the H100, 2026-11-24)
    repo = write(
        tmp_path,
        {
            "kopt_bench.py": "from kopt_supervisor.kernels import harness\n"
            'SPEC = harness.Spec(function="softmax.kernel:softmax", note="a:b c", url="http://x:80")\n',
            "softmax/__init__.py": "",
            "softmax/kernel.py": "import triton\n@triton.jit\ndef k(x):\n    pass\n",
            "softmax/missing.py": "",
        },
    )
    s = scan("python kopt_bench.py", repo)
    assert "softmax/kernel.py" in s.kernel and "softmax/kernel.py" in s.sources
    assert "softmax/kernel.py" not in s.protected
    assert "softmax/__init__.py" in s.protected  # the import runs it
    assert "softmax/missing.py" not in s.sources
