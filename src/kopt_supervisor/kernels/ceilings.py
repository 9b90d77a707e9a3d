"""Measure this GPU's ceilings: device-to-device copy bandwidth and bf16 matmul rate.

Run:  python -m kopt_supervisor.kernels.ceilings --json [--device 0] [--copy-mib 1024] [--iters 50]

Copy: one `dst.copy_(src)` of a large buffer per timed iteration (CUDA events around each),
after warm-up; bandwidth = (bytes read + bytes written) / median time. Matmul: bf16
8192 x 8192 x 8192 on random data into a preallocated output, after warm-up; rate =
2*m*n*k / median time. Prints JSON with the GPU's name and UUID and the exact command,
which `engine.profile.roofline.register_measured` turns into a measured spec page (`kopt
ceilings` runs this script as a subprocess and calls it).

torch lives here only; the engine never imports this module.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import UTC, datetime
from typing import Any

from kopt_supervisor.kernels.harness.timing import event_times


def copy_result(times_s: list[float], buffer_bytes: int) -> dict[str, Any]:
    """Bandwidth of a copy of `buffer_bytes`: read once and written once per iteration."""
    median = statistics.median(times_s)
    moved = 2 * buffer_bytes
    return {
        "buffer_bytes": buffer_bytes,
        "bytes_per_iter": moved,
        "iters": len(times_s),
        "median_s": median,
        "min_s": min(times_s),
        "max_s": max(times_s),
        "bandwidth_Bps": moved / median,
    }


def matmul_result(times_s: list[float], m: int, n: int, k: int, dtype: str = "bf16") -> dict[str, Any]:
    median = statistics.median(times_s)
    flops = 2 * m * n * k
    return {
        "m": m,
        "n": n,
        "k": k,
        "dtype": dtype,
        "flops_per_iter": flops,
        "iters": len(times_s),
        "median_s": median,
        "min_s": min(times_s),
        "max_s": max(times_s),
        "flops_per_s": flops / median,
    }


def _copy(torch: Any, nbytes: int, iters: int) -> dict[str, Any]:
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    return copy_result(event_times(torch, lambda: dst.copy_(src), iters, warmup=5), nbytes)


def _matmul(torch: Any, size: int, iters: int) -> dict[str, Any]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    return matmul_result(event_times(torch, lambda: torch.matmul(a, b, out=c), iters, warmup=10), size, size, size)


def measure(device: int, copy_mib: int, iters: int, size: int, command: str) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("ceilings: no GPU visible to torch (torch.cuda.is_available() is False)")
    torch.cuda.set_device(device)
    props = torch.cuda.get_device_properties(device)
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid and not uuid.startswith("GPU-"):
        uuid = f"GPU-{uuid}"

    copy = _copy(torch, copy_mib * 2**20, iters)
    torch.cuda.empty_cache()
    # A ceiling is the best rate seen: one size alone can sit at the power cap longer
    # (seen on an H100: 8192^3 ran at 726 TFLOP/s, 4096^3 at 783).
    tried = [_matmul(torch, s, iters) for s in sorted({size // 2, size}) if s >= 1024]
    matmul = max(tried, key=lambda r: r["flops_per_s"])
    matmul["sizes_tried"] = [r["m"] for r in tried]
    return result_record(
        gpu_name=props.name,
        gpu_uuid=uuid or None,
        gpu_index=device,
        vendor="amd" if getattr(torch.version, "hip", None) else "nvidia",
        command=command,
        versions={
            "torch": torch.__version__,
            "runtime": getattr(torch.version, "hip", None) or torch.version.cuda,
        },
        copy=copy,
        matmul=matmul,
    )


def result_record(
    *,
    gpu_name: str,
    gpu_uuid: str | None,
    gpu_index: int,
    vendor: str,
    command: str,
    versions: dict[str, Any],
    copy: dict[str, Any],
    matmul: dict[str, Any],
    date: str | None = None,
) -> dict[str, Any]:
    """The JSON this script prints (the input of engine.profile.roofline.register_measured)."""
    return {
        "gpu_name": gpu_name,
        "gpu_uuid": gpu_uuid,
        "gpu_index": gpu_index,
        "vendor": vendor,
        "command": command,
        "date": date or datetime.now(UTC).isoformat(timespec="seconds"),
        **versions,
        "copy": copy,
        "matmul": matmul,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kopt_supervisor.kernels.ceilings", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index (after CUDA_VISIBLE_DEVICES)")
    ap.add_argument("--copy-mib", type=int, default=1024, help="copy buffer size in MiB (default 1024)")
    ap.add_argument("--iters", type=int, default=50, help="timed iterations per measurement (default 50)")
    ap.add_argument(
        "--size",
        type=int,
        default=8192,
        help="largest matmul m = n = k (default 8192; size/2 is tried too, the best rate counts)",
    )
    ap.add_argument("--out", help="also write the JSON to this file")
    args = ap.parse_args(argv)
    command = " ".join(["python", "-m", "kopt_supervisor.kernels.ceilings", *(sys.argv[1:] if argv is None else argv)])
    result = measure(args.device, args.copy_mib, args.iters, args.size, command)
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    if args.json:
        print(text)
    else:
        print(f"GPU {result['gpu_name']} ({result['gpu_uuid']})")
        print(f"  d2d copy  {result['copy']['bandwidth_Bps'] / 1e12:8.3f} TB/s  (read + write, median of {args.iters})")
        print(
            f"  bf16 mm   {result['matmul']['flops_per_s'] / 1e12:8.1f} TFLOP/s (m=n=k={args.size}, median of {args.iters})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
