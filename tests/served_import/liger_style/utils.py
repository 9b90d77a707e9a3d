"""A CPU stand-in for Liger-Kernel's benchmark/scripts/utils.py, written for kopt's tests (not
upstream's code): the same names and call shapes (SingleBenchmarkRunInput, run_benchmarks,
run_speed_benchmark calling triton.testing.do_bench, build_speed_bench_fn), and a
run_benchmarks that runs every call and writes data/all_benchmark_data.csv beside this file,
as upstream's does: kopt must record the calls, never run them."""

import argparse
import csv
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.testing

QUANTILES = [0.5, 0.2, 0.8]


@dataclass
class SingleBenchmarkRunInput:
    x: int | float | str
    kernel_provider: str
    kernel_operation_mode: str | None = ""
    extra_benchmark_config: dict[str, Any] | None = None


@dataclass
class SingleBenchmarkRunOutput:
    y_20: float
    y_50: float
    y_80: float


def do_bench(fn: Callable, grad_to_none: list[torch.Tensor]) -> list[float]:
    """triton.testing.do_bench (looked up at each call: kopt's import replaces it); where it
    cannot run (no GPU: this stand-in run as it is on the CPU), the stand-in's own perf_counter
    quantiles, so that `kopt init --bench` sees a finished run and its table."""
    try:
        return triton.testing.do_bench(fn, grad_to_none=grad_to_none, rep=10, quantiles=QUANTILES)
    except Exception:  # no GPU
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        return [times[2], times[1], times[3]]


def run_speed_benchmark(fwd_fn: Callable, mode: str, input_tensors: list[torch.Tensor]) -> SingleBenchmarkRunOutput:
    if mode == "forward":
        ms = do_bench(fwd_fn, input_tensors)
    elif mode == "full":

        def full():
            y = fwd_fn()
            y.backward(torch.ones_like(y), retain_graph=True)

        ms = do_bench(full, input_tensors)
    else:
        raise ValueError(f"Unsupported mode: {mode}")
    return SingleBenchmarkRunOutput(y_20=ms[1], y_50=ms[0], y_80=ms[2])


def run_memory_benchmark(fwd_fn: Callable, mode: str) -> SingleBenchmarkRunOutput:
    fwd_fn()  # no do_bench: a memory figure of its own
    return SingleBenchmarkRunOutput(y_20=1.0, y_50=1.0, y_80=1.0)


def default_forward_fn(*setup_out):
    x, layer = setup_out[0], setup_out[1]
    return layer(x)


def build_speed_bench_fn(setup_fn: Callable, forward_fn: Callable = default_forward_fn) -> Callable:
    def bench_speed(input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
        setup_out = setup_fn(input)
        return run_speed_benchmark(lambda: forward_fn(*setup_out), input.kernel_operation_mode, [setup_out[0]])

    return bench_speed


def build_memory_bench_fn(setup_fn: Callable, forward_fn: Callable = default_forward_fn) -> Callable:
    def bench_memory(input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
        setup_out = setup_fn(input)
        return run_memory_benchmark(lambda: forward_fn(*setup_out), input.kernel_operation_mode)

    return bench_memory


def run_benchmarks(
    bench_test_fn: Callable,
    kernel_name: str,
    metric_name: str,
    metric_unit: str,
    x_name: str,
    x_label: str,
    x_values: list[float | int | str],
    kernel_providers: list[str],
    kernel_operation_modes: list[str] | None = [None],  # noqa: B006 - upstream's default
    extra_benchmark_configs: list[dict[str, Any]] | None = None,
    overwrite: bool = False,
):
    print(f"BENCHMARKING {metric_name.upper()} for {kernel_name.upper()}")
    rows = []
    for extra in extra_benchmark_configs:
        for mode in kernel_operation_modes:
            for provider in kernel_providers:
                for x in x_values:
                    out = bench_test_fn(SingleBenchmarkRunInput(x, provider, mode, extra))
                    rows.append(
                        dict(
                            kernel_name=kernel_name,
                            kernel_provider=provider,
                            kernel_operation_mode=mode,
                            metric_name=metric_name,
                            metric_unit=metric_unit,
                            x_name=x_name,
                            x_label=x_label,
                            x_value=x,
                            y_value_50=out.y_50,
                            y_value_20=out.y_20,
                            y_value_80=out.y_80,
                            extra_benchmark_config_str=json.dumps({k: str(v) for k, v in extra.items()}),
                            gpu_name="cpu",
                        )
                    )
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "all_benchmark_data.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    new_file = not os.path.isfile(path)
    with open(path, "a", newline="") as f:  # upstream's long format: a row per config, provider and metric
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new_file:
            w.writeheader()
        w.writerows(rows)


def parse_benchmark_script_args():
    parser = argparse.ArgumentParser(description="a stand-in for Liger-Kernel's bench arguments")
    parser.add_argument("--overwrite", action="store_true")
    return parser.parse_args()
