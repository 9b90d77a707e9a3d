"""The spec wiki: shipped pages parse and cite, GPU names match the right page, measured pages win."""

from __future__ import annotations

from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.profile.roofline import (
    load_pages,
    lookup_specs,
    matched_page_name,
    parse_page,
    register_measured,
    shipped_wiki_dir,
)
from kopt_supervisor.engine.roofline import get_spec

REPO = Path(__file__).resolve().parents[2]
WIKI = REPO / "src" / "kopt_supervisor" / "gpu_wiki"


def test_the_shipped_wiki_is_found_in_this_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("KOPT_GPU_WIKI", raising=False)
    assert shipped_wiki_dir() == WIKI
    # an installed kopt without this checkout points KOPT_GPU_WIKI at a copy of the folder
    (tmp_path / "h100-sxm.md").write_text((WIKI / "h100-sxm.md").read_text())
    monkeypatch.setenv("KOPT_GPU_WIKI", str(tmp_path))
    assert lookup_specs("NVIDIA H100 80GB HBM3")["hbm_bandwidth"].source.startswith(str(tmp_path / "h100-sxm.md"))


@pytest.mark.parametrize("page", sorted(p.name for p in WIKI.glob("*.md") if p.name != "README.md"))
def test_every_shipped_page_cites_a_vendor_document_for_every_value(page: str):
    parsed = parse_page(WIKI / page)
    assert parsed.specs, page
    for spec in parsed.specs.values():
        assert ("NVIDIA" in spec.citation) or ("AMD" in spec.citation), spec.metric
        assert "sparsity" not in spec.citation or "dense" in spec.citation or "halved" in spec.citation
    # the two roofline peaks, in units kopt converts
    assert parsed.specs["hbm_bandwidth"].si() > 1e12
    assert parsed.specs["bf16_dense_tflops"].si() > 1e14
    assert "## Verification notes" in (WIKI / page).read_text()


def test_the_index_lists_every_page():
    index = (WIKI / "README.md").read_text()
    for page in WIKI.glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name


@pytest.mark.parametrize(
    "reported, page",
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"),
        ("NVIDIA H100 PCIe", None),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H200", "NVIDIA H200 SXM 141GB"),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"),
        ("NVIDIA A100-SXM4-40GB", None),
        ("NVIDIA A100 80GB PCIe", None),
        ("AMD Instinct MI300X", "AMD Instinct MI300X"),
        ("AMD Instinct MI300A", None),
        ("AMD Instinct MI355X", "AMD Instinct MI355X"),
        ("AMD Instinct MI350X", None),
        ("h100-sxm", "NVIDIA H100 SXM5 80GB"),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_gpu_names_match_their_page(reported: str, page: str | None):
    assert matched_page_name(reported) == page


def test_spec_lines_point_at_the_line_holding_the_value():
    specs = lookup_specs("NVIDIA H100 80GB HBM3")
    line = specs["hbm_bandwidth"].line()
    assert line.startswith("hbm_bandwidth: 3.35 TB/s <- kopt_supervisor/gpu_wiki/h100-sxm.md:")
    number = int(line.rsplit(":", 1)[1])
    assert (
        (WIKI / "h100-sxm.md").read_text().splitlines()[number - 1].startswith("- hbm_bandwidth: 3.35 TB/s — source:")
    )
    assert specs["bf16_dense_tflops"].si() == pytest.approx(989.4e12)


def test_an_unmatched_gpu_has_no_values_and_unknown_is_never_a_number():
    specs = lookup_specs("NVIDIA H100 PCIe")
    assert specs == {}
    spec = get_spec(specs, "hbm_bandwidth")
    assert spec.line() == "hbm_bandwidth: UNKNOWN (no source)"
    assert spec.value is None and spec.si() is None and not spec.known


PAGE = """\
# My GPU

name: Lab GPU X1
vendor: nvidia
matches: X1 Lab
excludes: mini

## Specs

- hbm_bandwidth: 1,200 GB/s — source: Lab GPU X1 datasheet (2026), table 2, row "Memory bandwidth"
- bf16_dense_tflops: 100 TFLOPS — source: Lab GPU X1 datasheet (2026), table 3

## Notes

- this bullet is prose, not a spec
"""


def test_a_user_wiki_replaces_the_shipped_one(tmp_path: Path):
    (tmp_path / "x1.md").write_text(PAGE)
    specs = lookup_specs("ACME X1 Lab Edition", tmp_path)
    assert specs["hbm_bandwidth"].value == 1200 and specs["hbm_bandwidth"].si() == pytest.approx(1.2e12)
    assert specs["hbm_bandwidth"].source == f"{tmp_path / 'x1.md'}:10"
    assert specs["hbm_bandwidth"].citation.startswith("Lab GPU X1 datasheet")
    assert lookup_specs("ACME X1 Lab mini", tmp_path) == {}
    assert lookup_specs("NVIDIA H100 80GB HBM3", tmp_path) == {}


@pytest.mark.parametrize(
    "bad, message",
    [
        ("- hbm_bandwidth: fast TB/s — source: x", "x1.md:10: not a spec line"),
        ("- hbm_bandwidth: 3 TB/s", "x1.md:10: not a spec line"),
        ("- hbm_bandwidth: 3 TB/s — source: again", "x1.md:11: hbm_bandwidth is given twice"),
    ],
)
def test_malformed_pages_name_file_and_line(tmp_path: Path, bad: str, message: str):
    lines = PAGE.splitlines()
    if "twice" in message:
        lines.insert(10, bad)
    else:
        lines[9] = bad
    (tmp_path / "x1.md").write_text("\n".join(lines) + "\n")
    with pytest.raises(BadInput, match=message):
        load_pages(tmp_path)


def test_missing_wiki_folder_is_bad_input(tmp_path: Path):
    with pytest.raises(BadInput, match="spec wiki folder not found"):
        lookup_specs("NVIDIA H100 80GB HBM3", tmp_path / "nope")


RESULT = {
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_uuid": "GPU-1234abcd-0000-1111-2222-333344445555",
    "vendor": "nvidia",
    "command": "python -m kopt_supervisor.kernels.ceilings --json",
    "date": "2026-11-22T10:00:00+00:00",
    "copy": {"buffer_bytes": 2**30, "iters": 50, "bandwidth_Bps": 2.96e12},
    "matmul": {
        "m": 8192,
        "n": 8192,
        "k": 8192,
        "dtype": "bf16",
        "iters": 50,
        "flops_per_s": 7.25e14,
    },
}


def test_measured_values_take_precedence_and_cite_the_measurement(tmp_path: Path):
    page = register_measured(RESULT, tmp_path / "measured")
    text = page.read_text()
    assert (
        "measured by `kopt ceilings` (`python -m kopt_supervisor.kernels.ceilings --json`) on 2026-11-22T10:00:00+00:00"
        in text
    )
    assert "GPU GPU-1234abcd-0000-1111-2222-333344445555" in text
    specs = lookup_specs("NVIDIA H100 80GB HBM3", measured_dir=tmp_path / "measured")
    assert specs["hbm_bandwidth"].si() == pytest.approx(2.96e12)
    assert specs["hbm_bandwidth"].source.startswith(str(page))
    assert specs["bf16_dense_tflops"].value == pytest.approx(725.0)
    assert specs["hbm_bandwidth (datasheet)"].value == 3.35
    assert specs["hbm_bandwidth (datasheet)"].source.startswith("kopt_supervisor/gpu_wiki/h100-sxm.md:")
    assert specs["l2_cache"].value == 50  # untouched wiki values stay
    # another GPU model does not pick up this measurement
    assert "hbm_bandwidth (datasheet)" not in lookup_specs("NVIDIA H200", measured_dir=tmp_path / "measured")


def test_measured_page_of_this_gpu_uuid_wins_then_the_newest(tmp_path: Path):
    other = {
        **RESULT,
        "gpu_uuid": "GPU-other",
        "date": "2026-11-23T00:00:00+00:00",
        "copy": {"bandwidth_Bps": 3.0e12},
    }
    register_measured(RESULT, tmp_path)
    register_measured(other, tmp_path)
    assert len(list(tmp_path.glob("measured-*.md"))) == 2
    name = "NVIDIA H100 80GB HBM3"
    assert lookup_specs(name, measured_dir=tmp_path)["hbm_bandwidth"].si() == pytest.approx(3.0e12)
    mine = lookup_specs(name, measured_dir=tmp_path, gpu_uuid=RESULT["gpu_uuid"])
    assert mine["hbm_bandwidth"].si() == pytest.approx(2.96e12)
    # measuring the same GPU again replaces its page
    register_measured({**RESULT, "copy": {"bandwidth_Bps": 2.5e12}}, tmp_path)
    assert len(list(tmp_path.glob("measured-*.md"))) == 2
    again = lookup_specs(name, measured_dir=tmp_path, gpu_uuid=RESULT["gpu_uuid"])
    assert again["hbm_bandwidth"].si() == pytest.approx(2.5e12)


def test_register_measured_rejects_incomplete_results(tmp_path: Path):
    with pytest.raises(BadInput, match="missing 'command'"):
        register_measured({k: v for k, v in RESULT.items() if k != "command"}, tmp_path)
    with pytest.raises(BadInput, match="neither copy.bandwidth_Bps nor matmul.flops_per_s"):
        register_measured({**RESULT, "copy": {}, "matmul": {}}, tmp_path)
