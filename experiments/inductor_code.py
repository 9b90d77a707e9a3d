"""What torch.compile runs for a bundled kernel's baseline: Inductor's generated Triton code.

    python -m experiments.inductor_code --kernel rmsnorm --shape sd35-medium-1024 [--out code.txt]

Compiles the kernel's PyTorch baseline (default mode, dynamic=False, as validate_gpu.py does)
for one production shape in bf16, runs it once, and prints every source Inductor generated
(`torch._inductor.utils.run_and_get_code`): the Triton kernel with its heuristics decorator
(size hints) and the wrapper that launches it, then the launch config Inductor chose at the
first call (rows per program as XBLOCK, num_warps, num_stages). For comparing a tuned solution's launch with the one it competes against.
Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments import KERNELS, import_paths


def chosen_configs() -> list[str]:
    """The config each live Inductor autotuner launches with (its kernel's name, the Triton
    meta-parameters and num_warps / num_stages), found among the live objects: Inductor
    times its candidate configs at the first call and keeps the fastest."""
    import gc

    lines = []
    for obj in gc.get_objects():
        if type(obj).__name__ != "CachingAutotuner":
            continue
        name = getattr(obj, "fn", None) and getattr(obj.fn, "__name__", "?")
        for launcher in getattr(obj, "launchers", []) or []:
            cfg = getattr(launcher, "config", None)
            if cfg is not None:
                lines.append(f"{name}: {cfg.kwargs} num_warps={cfg.num_warps} num_stages={cfg.num_stages}")
        if not getattr(obj, "launchers", None):
            lines.append(f"{name}: no launcher (not yet run)")
    return lines or ["NA: no Inductor autotuner found (this torch names it otherwise)"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="rmsnorm")
    ap.add_argument("--shape", required=True, help="a production shape's name (contract.py)")
    ap.add_argument("--out", help="also write the code here")
    args = ap.parse_args(argv)
    import_paths()
    import torch
    from harness.loader import load_module
    from torch._inductor.utils import run_and_get_code

    if not torch.cuda.is_available():
        raise SystemExit("inductor_code: needs a CUDA GPU")
    folder = KERNELS / args.kernel
    contract = load_module(folder / "contract.py", f"ic_{args.kernel}_contract")
    baseline = load_module(folder / "baseline" / f"{args.kernel}.py", f"ic_{args.kernel}_baseline")
    shapes = {s.name: s for s in contract.SHAPES}
    if args.shape not in shapes:
        raise SystemExit(f"inductor_code: --shape {args.shape!r} is not one of {', '.join(shapes)}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs, kwargs = contract.make_inputs(torch, shapes[args.shape].dims, torch.bfloat16, "cuda", gen)
    fn = torch.compile(getattr(baseline, contract.FUNC), dynamic=False)
    _, codes = run_and_get_code(fn, *inputs, **kwargs)
    text = "\n\n".join(f"# ---- generated source {i} ----\n{c}" for i, c in enumerate(codes))
    text += "\n\n# ---- launch configs chosen at the first call ----\n" + "\n".join(chosen_configs())
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
