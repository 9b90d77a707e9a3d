"""A KernelBench-style problem on kopt's harness: `ModelNew` timed and checked against `Model`.

    python -m kopt_supervisor.kernels.harness.kernelbench --ref level1/23_Softmax.py --new solution.py
    python -m kopt_supervisor.kernels.harness.kernelbench --ref REF --new NEW --serve

The reference file (KernelBench's problem: `class Model(nn.Module)`, `get_inputs()`,
`get_init_inputs()`, module-level sizes such as `batch_size = 16`) is read from the working
directory's tree (kopt runs the bench in each tree, and kopt.toml protects the file); the file
holding `ModelNew` (same constructor arguments, same forward signature) is found in the same
tree (`--new`, relative to it): kopt serves each tree's ModelNew in a process of its own.

Per run: both models are built after the same `torch.manual_seed` (KernelBench's rule: equal
seeds give equal weights), moved to the device and dtype; the inputs come from `get_inputs()`
after seeding torch's generator with the run's seed (fresh inputs every run); the reference is
`Model` in float64 on the same inputs; the error is max |out - ref| / (atol + rtol |ref|) with
KernelBench's tolerance 1e-2/1e-2 by default (`--atol`, `--rtol`). The config columns are the
problem's name, its module-level integer sizes, the dtype and element size. Everything else is
harness/bench.py: CUDA graphs (eager events when the model cannot be captured), L2 flush,
rotated inputs, NVTX ranges, the served mode, the CPU path. `--which baseline` times
`Model` itself.

Imports torch only when run.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from .bench import main as bench_main
from .loader import load_module
from .shapes import Shape
from .spec import Spec

INIT_SEED = 42
"""The seed both models are built after (KernelBench seeds before each construction)."""
DTYPES = ("float32", "float16", "bfloat16")


def _floating(torch: Any, x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def problem_spec(
    ref: ModuleType, ref_path: str, new_path: str, *, name: str = "", atol: float = 1e-2, rtol: float = 1e-2
) -> Spec:
    """The Spec of a KernelBench problem: `ref` is the loaded reference module."""
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(ref, attr):
            raise SystemExit(
                f"{ref_path}: a KernelBench problem defines Model, get_inputs and get_init_inputs (no {attr})"
            )
    problem = name or re.sub(r"\W+", "_", Path(ref_path).stem).strip("_") or "problem"
    dims = {k: v for k, v in vars(ref).items() if not k.startswith("_") and type(v) is int}

    def make_inputs(torch: Any, dims: dict[str, Any], dtype: Any, device: str, gen: Any) -> tuple[tuple, dict]:
        torch.manual_seed(int(gen.initial_seed()))
        args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in ref.get_inputs()]
        return tuple(a.to(dtype) if _floating(torch, a) else a for a in args), {}

    def build(torch: Any, cls: Any, device: Any, dtype: Any) -> Any:
        torch.manual_seed(INIT_SEED)
        model = cls(*ref.get_init_inputs())
        return model.to(device=device, dtype=dtype).eval()

    def reference(torch: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), "cpu")
        model = build(torch, ref.Model, device, torch.float64)
        with torch.no_grad():
            return model(*[a.double() if _floating(torch, a) else a for a in args])

    def prepare(cls: Any, case: Any) -> Any:
        torch = case.torch
        model = build(torch, cls, case.device, case.dt)

        def forward(*args: Any) -> Any:
            with torch.no_grad():
                return model(*args)

        return forward

    def columns(shape: Shape, dtype: str, esize: int) -> dict[str, Any]:
        return {"problem": problem, **shape.dims, "dtype": dtype, "esize": esize}

    tol = {"float32": (atol, rtol), "float16": (2 * atol, 2 * rtol), "bfloat16": (5 * atol, 5 * rtol)}
    return Spec(
        name=problem.replace("_", "-")[:40] or "problem",
        function=f"{new_path}:ModelNew",
        baseline=f"{ref_path}:Model",
        shapes=[Shape(problem, f"KernelBench {ref_path}", dims)],
        tolerance=tol,
        dtypes=["float32"],
        make_inputs=make_inputs,
        reference=reference,
        columns=columns,
        class_by=["dtype"],
        out=None,
        same_dtype=False,
        prepare=prepare,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="a KernelBench Model/ModelNew pair on kopt's harness "
        "(the harness's options follow: --serve, --dtypes, ...)"
    )
    ap.add_argument("--ref", required=True, help="the problem file (Model, get_inputs, get_init_inputs)")
    ap.add_argument("--new", required=True, help="the file defining ModelNew, relative to each tree")
    ap.add_argument("--name", default="", help="the problem's name in the CSV (default: the file's stem)")
    ap.add_argument("--atol", type=float, default=1e-2)
    ap.add_argument("--rtol", type=float, default=1e-2)
    a, rest = ap.parse_known_args(argv)
    for p in (a.ref, a.new):
        if Path(p).is_absolute() or ".." in Path(p).parts:
            raise SystemExit(f"{p}: give the path relative to the tree")
    ref_file = Path.cwd() / a.ref
    if not ref_file.is_file():
        raise SystemExit(f"{a.ref}: no such file in {Path.cwd()}")
    from .bench import setup_device

    setup_device()  # before the reference (which may import triton) loads
    ref = load_module(ref_file, "kopt_kernelbench_reference")
    spec = problem_spec(ref, a.ref, a.new, name=a.name, atol=a.atol, rtol=a.rtol)
    return bench_main(spec, rest, tree=Path.cwd())


if __name__ == "__main__":
    sys.exit(main())
