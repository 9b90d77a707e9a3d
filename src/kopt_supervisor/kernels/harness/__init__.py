"""kopt's public bench harness: what the bundled kernels have, for your own kernel.

    from kopt_supervisor.kernels import harness

    SPEC = harness.Spec(
        name="softmax",
        function="softmax/kernel.py:softmax",          # where the function lives in each tree
        shapes=[harness.production("llm-4k", M=4096, N=4096),
                harness.regression("odd", M=3, N=1000),
                harness.small("cpu", M=4, N=96)],      # what the CPU (Triton's interpreter) runs
        tolerance={"float16": (1e-3, 1e-3)},           # dtype -> (atol, rtol)
        make_inputs=make_inputs,                       # (torch, dims, dtype, device, gen) -> (args, kwargs)
        reference=reference,                           # (torch, args, kwargs) -> fp64 tensor
        bytes_moved=lambda M, N, esize, **_: 2 * M * N * esize,
    )
    if __name__ == "__main__":
        raise SystemExit(harness.main(SPEC))

`harness.main` gives the bench kopt's modes, each for one tree: a plain run (CSV on stdout),
`--serve` (kopt's served looks, one process per tree: `look N SEED PATH` -> `done N`), `--once`
(the contract alone) and `--profile` (the profiler's command: the solution called a few times
per config in its range, no reference, no check). The one-process A/B mode (`--ab BEST CAND`)
was removed on 2026-12-01: candidate code in one process with best's could bend best's
measurement.
Per config: fresh inputs, the contract check (outputs poisoned with NaN, NaN/Inf counted,
inputs unchanged), CUDA-graph timing with an L2 flush and rotated buffers, an NVTX (or roctx)
range `kopt:col=value,...`; without a GPU, Triton's interpreter on the CPU.
docs/byo-kernel.md is the guide.

Self-contained (torch, triton, numpy; never imports kopt's engine): a bench pays only for
what it uses. The modules: spec (Spec, shapes), locate (the function in each tree), check
(the contract), timing (timers), ranges (NVTX/roctx), bench (the driver), params (the
bundled kernels' params.json), kernelbench (a KernelBench Model/ModelNew pair as a Spec).
"""

from .bench import Case, main
from .check import CheckResult, check_call
from .locate import LocateError, locate
from .ranges import range_name
from .shapes import PRODUCTION, REGRESSION, SMALL, Shape
from .spec import Spec, production, regression, small, spec_from_folder

__all__ = [
    "PRODUCTION",
    "REGRESSION",
    "SMALL",
    "Case",
    "CheckResult",
    "LocateError",
    "Shape",
    "Spec",
    "check_call",
    "locate",
    "main",
    "production",
    "range_name",
    "regression",
    "small",
    "spec_from_folder",
]
