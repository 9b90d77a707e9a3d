"""RMSNorm speed and memory, liger against the huggingface reference, long-format rows."""

import json
import sys
import time

from utils import inputs, quantiles_ms, update_benchmark_data_csv

from liger_kernel.ops.rms_norm import rms_norm


def llama_rms_norm(rows, weight, eps=1e-6):
    out = []
    for row in rows:
        variance = sum(v ** 2 for v in row) / len(row)
        out.append([w * (v / (variance + eps) ** 0.5) for v, w in zip(row, weight)])
    return out


PROVIDERS = {"liger": rms_norm, "huggingface": llama_rms_norm}


def main():
    overwrite = "--overwrite" in sys.argv
    extra = json.dumps({"M": 8, "dtype": "torch.float32", "eps": 1e-06})
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    rows = []
    print("**************************************")
    print("     BENCHMARKING SPEED for RMS_NORM")
    print("**************************************")
    for mode in ("forward", "full"):
        for provider, fn in PROVIDERS.items():
            for n in (64, 128, 256):
                x, w = inputs(8, n)
                reps = 1 if mode == "forward" else 2
                y50, y20, y80 = quantiles_ms(lambda: [fn(x, w) for _ in range(reps)])
                rows.append(dict(kernel_name="rms_norm", kernel_provider=provider, kernel_operation_mode=mode,
                                 metric_name="speed", metric_unit="ms", x_name="H", x_label="hidden size",
                                 x_value=n, y_value_50=y50, y_value_20=y20, y_value_80=y80,
                                 extra_benchmark_config_str=extra, gpu_name="cpu", timestamp=stamp,
                                 liger_version="0.0.0"))
                if mode == "full":
                    mb = 8 * n * 8 * 3 / 2**20
                    rows.append({**rows[-1], "metric_name": "memory", "metric_unit": "MB", "y_value_50": mb,
                                 "y_value_20": mb, "y_value_80": mb})
    print(json.dumps(rows[:2], indent=2))
    update_benchmark_data_csv(rows, overwrite=overwrite)


if __name__ == "__main__":
    main()
