"""kernels/ceilings.py: its arithmetic, its JSON feeding register_measured, its no-GPU exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kopt_supervisor.engine.profile.roofline import lookup_specs, register_measured
from kopt_supervisor.kernels.ceilings import copy_result, matmul_result, result_record

REPO = Path(__file__).resolve().parents[2]


def test_copy_bandwidth_counts_bytes_read_and_written():
    r = copy_result([1.0e-3, 0.8e-3, 0.9e-3, 2.0e-3], 2**30)
    assert r["median_s"] == pytest.approx(0.95e-3)
    assert r["bytes_per_iter"] == 2 * 2**30
    assert r["bandwidth_Bps"] == pytest.approx(2 * 2**30 / 0.95e-3)
    assert (r["min_s"], r["max_s"], r["iters"]) == (0.8e-3, 2.0e-3, 4)


def test_matmul_rate_is_two_mnk_over_the_median():
    r = matmul_result([1.5e-3, 1.4e-3, 1.6e-3], 8192, 8192, 8192)
    assert r["flops_per_s"] == pytest.approx(2 * 8192**3 / 1.5e-3)


def test_the_printed_record_registers_as_a_measured_page(tmp_path: Path):
    record = result_record(
        gpu_name="NVIDIA H100 80GB HBM3",
        gpu_uuid="GPU-0000",
        gpu_index=0,
        vendor="nvidia",
        command="python -m kopt_supervisor.kernels.ceilings --json",
        versions={"torch": "2.x", "runtime": "12.x"},
        copy=copy_result([1e-3] * 3, 2**30),
        matmul=matmul_result([1.5e-3] * 3, 8192, 8192, 8192),
        date="2026-11-22T00:00:00+00:00",
    )
    register_measured(record, tmp_path)
    specs = lookup_specs("NVIDIA H100 80GB HBM3", measured_dir=tmp_path)
    assert specs["hbm_bandwidth"].si() == pytest.approx(2 * 2**30 / 1e-3, rel=1e-3)
    assert specs["bf16_dense_tflops"].si() == pytest.approx(2 * 8192**3 / 1.5e-3, rel=1e-4)
    assert "median of 3" in specs["hbm_bandwidth"].citation


def test_without_a_gpu_the_script_says_so():
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, "-m", "kopt_supervisor.kernels.ceilings", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode != 0
    assert "no GPU visible to torch" in done.stderr
