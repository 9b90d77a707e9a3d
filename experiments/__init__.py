"""One-off GPU experiments whose figures go into docs/ (each documents its command at the top),
and what they share: the import paths and one production case of a bundled kernel."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

KERNELS = Path(__file__).resolve().parents[1] / "src" / "kopt_supervisor" / "kernels"


def import_paths() -> None:
    """kernels/ on sys.path: the kernels import `harness` as a top-level package (kopt itself
    is imported from the installed `kopt_supervisor`)."""
    for path in (KERNELS,):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


def add_case_args(ap: argparse.ArgumentParser, blocks: int) -> None:
    ap.add_argument("--kernel", default="rmsnorm")
    ap.add_argument("--shape", default="hunyuanvideo-720p", help="a production shape's name (contract.py)")
    ap.add_argument("--blocks", type=int, default=blocks)


def one_case(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """(torch, validate_gpu.Kernel, harness Case in bf16, harness Timing) for --kernel/--shape
    on this GPU, with the harness's timing settings (300 µs blocks)."""
    import_paths()
    import torch
    from harness.bench import Case, Timing
    from validate_gpu import Kernel

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    k = Kernel(args.kernel, None, None, "production")
    shapes = {s.name: s for s in k.shapes}
    if args.shape not in shapes:
        raise SystemExit(f"--shape {args.shape!r} is not one of {', '.join(shapes)}")
    case = Case(torch, k.contract, k.roofline, shapes[args.shape], "bfloat16", 1, True)
    return torch, k, case, Timing(torch, True, 300.0, max_reps=1000)
