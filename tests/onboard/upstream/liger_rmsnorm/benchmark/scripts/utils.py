"""The bench's helpers: timing, and the long-format CSV it keeps in benchmark/data/."""

import csv
import os
import random
import time

QUANTILES = [0.5, 0.2, 0.8]
FIELDS = ["kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit", "x_name",
          "x_label", "x_value", "y_value_50", "y_value_20", "y_value_80", "extra_benchmark_config_str", "gpu_name",
          "timestamp", "liger_version"]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "all_benchmark_data.csv")


def quantiles_ms(fn, reps=15):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return [times[min(len(times) - 1, int(q * len(times)))] for q in QUANTILES]


def inputs(m, n, seed=0):
    rng = random.Random(seed * 1000003 + n)
    return [[rng.gauss(0.0, 1.0) for _ in range(n)] for _ in range(m)], [1.0] * n


def _key(row):
    return (row["kernel_name"], row["kernel_provider"], row["kernel_operation_mode"] or "", row["metric_name"],
            row["x_name"], str(row["x_value"]), row["extra_benchmark_config_str"] or "", row["gpu_name"])


def update_benchmark_data_csv(rows, overwrite=False):
    """The file's rows and this run's, keyed; an existing key is kept unless `overwrite`."""
    existing = []
    if os.path.isfile(DATA):
        with open(DATA, newline="") as f:
            existing = list(csv.DictReader(f))
    merged = {_key(r): r for r in existing}
    for r in rows:
        if _key(r) not in merged or overwrite:
            merged[_key(r)] = r
    os.makedirs(os.path.dirname(DATA), exist_ok=True)
    with open(DATA, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in merged.values():
            w.writerow(r)
