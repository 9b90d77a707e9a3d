"""Each launch's range read from the profiled run's own raw page (ncu `--nvtx` adds the column
`thread Domain:Push/Pop_Range`), so that a keep's profile needs no read-back of its report;
the read-back stays for what that column cannot say (nested ranges, another domain).

tests/data/ncu_h200_keep/ is a capture: the RMSNorm demo's v8 candidate profile on the H200
(2026-12-01, docs/h100-wave3/part19-the-shell-under-ncu-h200.md, call 6), its run's own
`ncu.csv` and the read-back's `ncu_nvtx.csv`, trimmed to the columns kopt reads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kopt_supervisor.engine.profile import ncu
from kopt_supervisor.engine.profile.ncu import NcuProfiler, ncu_kernel_names, thread_ranges

DATA = Path(__file__).resolve().parents[1] / "data" / "ncu_h200_keep"


def _renamed() -> dict[tuple[str, str], str]:
    """The read-back's names, as `with_nvtx_ranges` reads them ("<range>/<kernel>" -> range)."""
    plain = thread_ranges((DATA / "ncu.csv").read_text())
    assert plain is not None
    kernels = {k: launch.kernel for k, launch in ncu.ncu_keyed_launches((DATA / "ncu.csv").read_text())}
    out = {}
    for key, name in ncu_kernel_names((DATA / "ncu_nvtx.csv").read_text()).items():
        kernel = kernels[key]
        out[key] = name[: -len(kernel) - 1] if name.endswith("/" + kernel) else name
    return out


def test_the_runs_own_page_names_every_launch_as_the_read_back_does():
    own = thread_ranges((DATA / "ncu.csv").read_text())
    assert own is not None and len(own) == 56
    assert own == _renamed()
    inside = {name for name in own.values() if name.startswith("kopt:")}
    assert len(inside) == 9  # the nine configs' ranges; the largest shape's draws outside them
    assert any(not name.startswith("kopt:") for name in own.values())


def test_a_keep_profile_needs_no_read_back_and_parses_as_with_one(tmp_path: Path):
    shutil.copy(DATA / "ncu.csv", tmp_path / "ncu.csv")
    assert NcuProfiler().after_commands(tmp_path) == []
    own = ncu._parse_pass(tmp_path, "_rms_kernel")
    shutil.copy(DATA / "ncu.csv", tmp_path / "ncu_import.csv")
    shutil.copy(DATA / "ncu_nvtx.csv", tmp_path / "ncu_nvtx.csv")
    read_back = ncu._parse_pass(tmp_path, "_rms_kernel")
    assert own.ranges_source == ncu.THREAD_SOURCE and read_back.ranges_source == ncu.NVTX_SOURCE
    assert own.files == (str(tmp_path / "ncu.csv"),)
    assert own.launches == read_back.launches == 56
    assert own.ranged == read_back.ranged and own.kernels == read_back.kernels
    assert own.target_total_ns == read_back.target_total_ns > 0
    assert len(own.ranged) >= 9  # per range and kernel: the configs' ranges were read


@pytest.mark.parametrize(
    "cell",
    [
        # nested: a range of the candidate's own inside kopt's (only the read-back's innermost name is known)
        '26  "<default domain>:kopt:shape=x:none:none:none:none:none:none" "<default domain>:mine:none:none:none:none:none:none" ',
        '26  "my domain:kopt:shape=x:none:none:none:none:none:none" ',  # another domain
        '26  "<default domain>:kopt:sh""ape:none:none:none:none:none:none" ',  # a quote in the name
        "26  <default domain>:kopt:shape=x",  # not the format
    ],
)
def test_what_the_page_cannot_say_is_read_back(tmp_path: Path, cell: str):
    import csv
    import io

    text = (DATA / "ncu.csv").read_text()
    lines = text.splitlines()
    rows = list(csv.reader([line for line in lines if line.startswith('"')]))
    col = next(i for i, h in enumerate(rows[0]) if h.startswith(ncu.THREAD_COLUMN))
    rows[2][col] = cell
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    (tmp_path / "ncu.csv").write_text(
        "\n".join(line for line in lines if line.startswith("==")) + "\n" + buf.getvalue()
    )
    assert thread_ranges((tmp_path / "ncu.csv").read_text()) is None
    plain, renamed = NcuProfiler().after_commands(tmp_path)
    assert "--print-nvtx-rename" in renamed and "--print-nvtx-rename" not in plain
