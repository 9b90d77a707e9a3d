"""engine/adapters/__init__.py, the long format: rows (value + metric-name/unit columns) read wide;
hardware columns never merge configs; repeated keys are samples; and the onboarding rules
around them (a reference provider, the kernel's provider, --answer forms, `cd` commands)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput, adapters, onboard
from kopt_supervisor.engine.adapters import long_format_file_table
from kopt_supervisor.engine.adapters.table import AdapterError
from kopt_supervisor.engine.metrics import describe_classes
from kopt_supervisor.engine.onboard.draft import bench_scripts

HEAD = (
    "kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_value,y_value_50,y_value_20,gpu_name,timestamp\n"
)


def rows(*lines: str) -> str:
    return HEAD + "".join(f"{ln}\n" for ln in lines)


def test_rows_read_wide_per_provider_and_metric() -> None:
    t = long_format_file_table(
        rows(
            "liger,forward,speed,ms,64,0.5,0.4,H100,t1",
            "huggingface,forward,speed,ms,64,0.9,0.8,H100,t1",
            "liger,full,memory,MB,64,12,12,H100,t1",
        ),
        "d.csv",
    )
    assert t.config == ("kernel_operation_mode", "x_value", "gpu_name")  # timestamp and y_value_20 set aside
    assert t.metrics == ("liger speed (ms)", "huggingface speed (ms)", "liger memory (MB)")
    assert t.units["liger speed (ms)"] == "ms"
    f = t.frame.set_index("kernel_operation_mode")
    assert f.loc["forward", "liger speed (ms)"] == 0.5 and f.loc["forward", "huggingface speed (ms)"] == 0.9
    assert f.loc["full", "liger memory (MB)"] == 12


def test_configs_of_different_gpus_are_never_merged_and_repeats_are_samples() -> None:
    t = long_format_file_table(
        rows(
            "liger,forward,speed,ms,64,0.5,0.4,H100,t1",
            "liger,forward,speed,ms,64,0.7,0.6,A100,t1",
            "liger,forward,speed,ms,64,0.52,0.4,H100,t2",
        ),
        "d.csv",
    )
    f = t.frame
    assert len(f) == 3 and sorted(f["gpu_name"]) == ["A100", "H100", "H100"]
    assert sorted(f[f["gpu_name"] == "H100"]["liger speed (ms)"]) == [0.5, 0.52]  # two samples of one config


def test_the_loop_reads_the_same_file_with_format_long() -> None:
    text = rows("liger,forward,speed,ms,64,0.5,0.4,H100,t1")
    frame = adapters.frame_from_text("long", text, "d.csv", csv_file=True)
    assert list(frame.columns) == ["kernel_operation_mode", "x_value", "gpu_name", "liger speed (ms)"]
    with pytest.raises(AdapterError, match="not a long-format table"):
        adapters.frame_from_text("long", "a,b\n1,2\n", "d.csv", csv_file=True)


def test_a_plain_csv_is_not_long_format() -> None:
    assert long_format_file_table is not None
    with pytest.raises(AdapterError):
        long_format_file_table("N,time_us\n1,2\n", "x.csv")


def _run(
    tmp_path: Path, files: dict[str, str], repo_name: str = "repo", bench: str = "python b.py"
) -> onboard.BenchRun:
    repo = tmp_path / repo_name
    repo.mkdir(parents=True)
    (repo / "b.py").write_text("import os\n")
    for name, text in files.items():
        (repo / name).write_text(text)
    out = tmp_path / "o.out"
    out.write_text("")
    return onboard.BenchRun(bench, repo, 0, out, tuple(Path(n) for n in files), 2.0)


def test_the_provider_naming_the_repo_is_the_metric_and_huggingface_a_reference(tmp_path: Path) -> None:
    csv = rows(
        "liger,forward,speed,ms,64,0.5,0.4,cpu,t1",
        "huggingface,forward,speed,ms,64,0.9,0.8,cpu,t1",
        "liger,full,speed,ms,64,0.5,0.4,cpu,t1",
        "huggingface,full,speed,ms,64,0.9,0.8,cpu,t1",
    )
    p = onboard.propose(_run(tmp_path, {"d.csv": csv}, "Liger-Kernel"))
    assert p.complete and p.target["metric"] == "liger speed (ms)" and p.target["format"] == "long"
    assert "huggingface speed (ms) names a reference" in p.comments["target.metric"]
    # two providers neither of which is a known reference: the one naming the repo wins
    two = csv.replace("huggingface", "cutile")
    p = onboard.propose(_run(tmp_path / "b", {"d.csv": two}, "Liger-Kernel"))
    assert (
        p.target["metric"] == "liger speed (ms)" and "names the kernel the bench imports" in p.comments["target.metric"]
    )


def test_answers_name_a_table_without_the_file_prefix_and_a_metric_before_the_filter(tmp_path: Path) -> None:
    files = {"a.csv": "N,t_ms\n1,2\n2,3\n", "c.csv": "N,lat_us\n1,2\n2,3\n", "b.csv": "N,score\n1,5\n2,6\n"}
    run = _run(tmp_path, files)
    p = onboard.propose(run)
    assert p.questions[0].key == "table" and "metric=COLUMN" in p.error_line()
    assert {c.value for c in p.questions[0].choices} == {"file:a.csv", "file:c.csv"}
    assert onboard.propose(run, {"table": "a.csv"}).target["metric"] == "t_ms"  # no `file:` needed
    # `score` is no time or rate by its name: answering it picks its table, then asks its direction
    p = onboard.propose(run, {"metric": "score"})
    assert p.target["csv"] == "b.csv" and p.questions[0].key == "direction"
    assert onboard.propose(run, {"metric": "score", "direction": "max"}).target["direction"] == "max"
    with pytest.raises(BadInput, match="table=KEY, metric=COLUMN, direction=min"):
        onboard.answers_from(["colour=red"])


def test_a_cd_prefixed_command_is_scanned_from_its_folder(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    (repo / "benchmark" / "scripts").mkdir(parents=True)
    (repo / "benchmark" / "scripts" / "b.py").write_text("")
    found, notes = bench_scripts("cd benchmark && PYTHONPATH=../src python scripts/b.py --x 1; echo done", repo)
    assert [f.relative_to(repo).as_posix() for f in found] == ["benchmark/scripts/b.py"] and not notes
    found, notes = bench_scripts("cd /etc && python scripts/b.py", repo)  # a cd out of the repo is not followed
    assert found == [] and notes


def test_one_class_is_described_one_way() -> None:
    assert describe_classes([]) == "one class: every config decided together (class_by = [])"
    assert describe_classes(["dtype", "mode"]) == "classes by `dtype`, `mode`"
