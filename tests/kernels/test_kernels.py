"""The bundled kernels under Triton's interpreter: each passes its contract on the small
shapes in both dtypes, a broken solution fails it, and the catalog's class rule, roofline
formula and params files agree with the bench and with kopt."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kopt_supervisor.engine import expr
from kopt_supervisor.kernels import catalog
from tests.conftest import installed

pytestmark = installed("torch", "triton")

NAMES = sorted(catalog.KERNELS)


def _load(harness_path: Path, name: str, tag: str, path: Path | None = None):  # noqa: ANN202
    from kopt_supervisor.kernels.harness.loader import load_module

    folder = harness_path / name
    contract = load_module(folder / "contract.py", f"t_{name}_contract")
    sol = load_module(path or folder / "solution" / f"{name}.py", f"t_{tag}_{name}_solution")
    return contract, sol


def _check_all(harness_path: Path, name: str, sol, dtypes=None) -> list[tuple[str, str, float, str]]:  # noqa: ANN001
    import torch

    from kopt_supervisor.kernels.harness.bench import Case
    from kopt_supervisor.kernels.harness.loader import load_module

    folder = harness_path / name
    contract = load_module(folder / "contract.py", f"t_{name}_contract")
    roofline = load_module(folder / "roofline.py", f"t_{name}_roofline")
    out = []
    for i, shape in enumerate(s for s in contract.SHAPES if s.kind == "small"):
        for dtype in dtypes or contract.DTYPES:
            case = Case(torch, contract, roofline, shape, dtype, 1000 + i, gpu=False)
            err, why = case.check(sol)
            out.append((shape.name, dtype, err, why))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_solution_and_baseline_pass_the_contract(harness_path: Path, name: str) -> None:
    _, sol = _load(harness_path, name, "good")
    results = _check_all(harness_path, name, sol)
    assert len(results) == 6 and all(err <= 1.0 and not why for _, _, err, why in results), results
    from kopt_supervisor.kernels.harness.loader import load_module

    base = load_module(harness_path / name / "baseline" / f"{name}.py", f"t_{name}_baseline")
    assert all(err <= 1.0 and not why for _, _, err, why in _check_all(harness_path, name, base))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "breakage,expect",
    [
        ("row_ok = rows < M", "row_ok = rows < M - 1"),  # the last row is never written
        ("/ D + eps)", "/ D * 0.0)"),  # a division by zero: Inf/NaN
    ],
)
def test_a_broken_solution_fails_the_contract(
    harness_path: Path, tmp_path: Path, name: str, breakage: str, expect: str
) -> None:
    src = (harness_path / name / "solution" / f"{name}.py").read_text()
    assert breakage in src
    (tmp_path / "solution").mkdir()
    broken = tmp_path / "solution" / f"{name}.py"
    broken.write_text(src.replace(breakage, expect))
    (tmp_path / "params.json").write_text((harness_path / name / "params.json").read_text())
    _, sol = _load(harness_path, name, "broken", broken)
    results = _check_all(harness_path, name, sol, dtypes=["bfloat16"])
    assert all(err == math.inf for _, _, err, _ in results), results
    assert any("NaN/Inf" in why for _, _, _, why in results)


@pytest.mark.parametrize("name", NAMES)
def test_class_rule_roofline_and_params_agree(harness_path: Path, name: str) -> None:
    contract, sol = _load(harness_path, name, "rules")
    from kopt_supervisor.kernels.harness.loader import load_module

    roofline = load_module(harness_path / name / "roofline.py", f"t_{name}_roofline2")
    info = catalog.KERNELS[name]
    assert info.func == contract.FUNC and info.config == contract.CONFIG and info.class_by == contract.CLASS_BY
    assert info.bytes_expr == roofline.BYTES
    classes = set()
    for shape in contract.SHAPES:
        cols = contract.columns(shape, "bfloat16", 2)
        assert list(cols) == contract.CONFIG
        assert sol.class_key(*contract.class_args(shape.dims)) == f"dclass={cols['dclass']}"
        assert expr.parse(roofline.BYTES).eval(cols) == roofline.bytes_moved(**cols)
        classes.add(cols["dclass"])
        if shape.kind == "production":
            assert shape.model and shape.name
    assert classes == {"narrow", "wide"}
    assert {s.kind for s in contract.SHAPES} == {"production", "regression", "small"}
    for file in ("params.json", "params.naive.json"):
        p = json.loads((harness_path / name / file).read_text())
        for key, values in p.items():
            assert key == "*" or key in {"dclass=narrow", "dclass=wide"}
            for param, v in values.items():
                assert v in info.space[param], (file, key, param, v)


@pytest.mark.parametrize("name", NAMES)
def test_the_contract_holds_across_the_tune_space(harness_path: Path, name: str) -> None:
    """Chunked and single pass, one and several rows per program (tiles that span two batches
    and tiles inside one), odd values rounded up: every point the tuner may pick is correct."""
    _, sol = _load(harness_path, name, "space")
    chunk = {"adaln": 512, "rmsnorm": 32}[name]  # chunked on the small shapes, a few chunks each
    for block, rows in ((chunk, 2), (chunk // 2, 4), (0, 2), (0, 8), (chunk * 3 // 4, 3)):
        sol.PARAMS = {"*": {"BLOCK_D": block, "ROWS_PER_PROG": rows, "num_warps": 4, "num_stages": 1}}
        results = _check_all(harness_path, name, sol, dtypes=["bfloat16"])
        assert all(err <= 1.0 and not why for _, _, err, why in results), (block, rows, results)


def test_rmsnorm_runs_whole_tiles_unmasked_and_is_still_exact(harness_path: Path) -> None:
    """The whole-tile kernel (no masks, constant stride, 32-bit offsets) only when every tile is
    whole rows of exactly BLOCK_D and every offset fits in 32 bits; the small shapes take it at
    ROWS_PER_PROG 1 and 2 and pass the contract there."""
    _, sol = _load(harness_path, "rmsnorm", "even")
    meta = {"BLOCK_D": 64, "ROWS": 2, "SINGLE": True, "num_warps": 4, "num_stages": 1}
    assert sol.whole_tiles(meta, 4, 64) is True
    assert sol.whole_tiles(meta, 5, 64) is False  # a last tile of one row
    assert sol.whole_tiles(meta, 4, 48) is False  # masked columns (BLOCK_D 64 > 48)
    assert sol.whole_tiles({**meta, "SINGLE": False, "BLOCK_D": 32}, 4, 64) is False
    assert sol.whole_tiles(meta, 2**25 - 2, 64) is True  # 2^31 - 128 values
    assert sol.whole_tiles(meta, 2**25, 64) is False  # 2^31 values: the 64-bit kernel
    for rows in (1, 2):
        sol.PARAMS = {"*": {"BLOCK_D": 0, "ROWS_PER_PROG": rows, "num_warps": 4, "num_stages": 1}}
        results = _check_all(harness_path, "rmsnorm", sol)
        assert all(err <= 1.0 and not why for _, _, err, why in results), (rows, results)
