"""The bundled kernels and `materialize`: a self-contained target repo for kopt.

    KERNELS["adaln"], KERNELS["rmsnorm"]       what is bundled (KernelInfo)
    materialize(name, dest, naive=True)        writes the repo into an existing empty dir

A materialized repo holds the kernel's baseline/ (PyTorch) and solution/ (Triton), its
contract.py and roofline.py, bench.py, params.json (naive=True: a deliberately naive start, 1
row per program and a small chunk so the two-pass loop runs, at 1 warp (rmsnorm) or Triton's
default 4 (adaln); naive=False: the tuned defaults) and kopt.toml. Its bench and solution
import kopt's public harness (`kopt_supervisor.kernels.harness`, installed with kopt) as any
user's bench does; no copy of the harness goes into the repo.

The params contract (for the tune proposer): params.json is {"*": {...}, "<class key>": {...}}
with the Triton meta-parameters BLOCK_D, ROWS_PER_PROG, num_warps, num_stages; a class key is
kopt's `dclass=narrow` / `dclass=wide` (class_by = ["dclass"]); the solution launches with
{**p["*"], **p.get(key, {})}. BLOCK_D = 0 means the next power of two >= the row length
(single pass), capped at 8192.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
STATS = ("us_mean", "us_std", "us_min", "us_p10", "us_p90", "samples")
EXTRA = ("calls", "gbps", "copy_us", "copy_gbps", "pct_copy", "prod", "seed", "model")
"""Must match harness/bench.py (a test checks): the CSV's columns that kopt ignores."""
PROTECTED = ["bench.py", "contract.py", "roofline.py", "baseline/", ".gitignore", "README.md"]


@dataclass(frozen=True)
class KernelInfo:
    name: str
    title: str
    func: str
    config: list[str]
    bytes_expr: str
    space: dict[str, list[Any]]
    """The tune proposer's space: its best point should reach >= 90% of D2D copy bandwidth
    on the H100 for every production shape (kernels/validate_gpu.py --sweep checks)."""
    summary: str
    triton_kernel: str
    """A regex naming every Triton kernel of the solution ([profile].kernel: it only marks the
    hottest kernels for display; the profiler compares every kernel launched per config)."""
    row_dim: str
    """The shape dimension a row runs along (BLOCK_D tiles it)."""
    class_by: list[str] = field(default_factory=lambda: ["dclass"])
    max_block_d: int = 8192
    """The solution's MAX_BLOCK_D: BLOCK_D 0 (the whole row) stops there (a test checks)."""

    @property
    def folder(self) -> Path:
        return HERE / self.name


KERNELS: dict[str, KernelInfo] = {
    "adaln": KernelInfo(
        name="adaln",
        title="fused adaLN modulation: LayerNorm(x) * (1 + scale) + shift",
        func="adaln_modulate",
        config=["shape", "B", "N", "D", "dtype", "esize", "dclass"],
        bytes_expr="2 * B * N * D * esize + 2 * B * D * esize",
        space={
            "BLOCK_D": [64, 128, 256, 512, 1024, 2048, 4096, 0],
            "ROWS_PER_PROG": [1, 2, 4, 8],
            "num_warps": [1, 2, 4, 8, 16],
            "num_stages": [1, 2],
        },
        triton_kernel="_adaln_kernel",
        row_dim="D",
        summary="x [B, N, D], scale/shift [B, D] (per batch), as in FLUX.1, SD3/SD3.5, PixArt-alpha "
        "and Wan2.1 DiT blocks; bf16/fp16 in, fp32 statistics; class dclass = narrow (D <= 2048) "
        "or wide",
    ),
    "rmsnorm": KernelInfo(
        name="rmsnorm",
        title="RMSNorm over head_dim with a weight (QK-norm)",
        func="rms_norm",
        config=["shape", "B", "N", "H", "hd", "dtype", "esize", "dclass"],
        bytes_expr="2 * B * N * H * hd * esize + hd * esize",
        space={
            "BLOCK_D": [16, 32, 64, 128, 0],
            "ROWS_PER_PROG": [1, 2, 4, 8, 16, 32, 64],
            "num_warps": [1, 2, 4, 8],
            "num_stages": [1, 2],
        },
        triton_kernel="_rms_(kernel|whole_tiles)",  # both kernels: whole tiles run _rms_whole_tiles
        row_dim="hd",
        summary="q [B, N, H, head_dim], weight [head_dim], as QK-norm in FLUX.1, SD3.5 and HunyuanVideo "
        "attention; bf16/fp16 in, fp32 accumulation; class dclass = narrow (head_dim <= 64) or wide",
    ),
}


def _toml(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return repr(v)


ORDER = ("BLOCK_D", "ROWS_PER_PROG", "num_warps", "num_stages")
"""The tune order: the tile first (a row in one block is read once, not twice), then rows per
program (short QK-norm rows need many per program), then warps, then stages."""
CPU_PARAMS = ("BLOCK_D", "ROWS_PER_PROG")
"""The params that change anything in Triton's interpreter (it ignores warps and stages)."""


def contract(name: str) -> ModuleType:
    """The kernel's contract.py (pure Python: shapes, tolerances, class rule)."""
    from kopt_supervisor.kernels.harness.loader import load_module

    return load_module(KERNELS[name].folder / "contract.py", f"kopt_catalog_{name}_contract")


def alike_blocks(name: str, *, cpu: bool = False) -> dict[str, dict[str, list[Any]]]:
    """Per class key, the BLOCK_D values of the tune space that give every shape the bench
    runs in that class the same tile (the production and regression shapes; the small ones
    with cpu): the tune proposer's `alike`. A class whose rows are all at most 64 long runs
    BLOCK_D 64, 128 and 0 as one 64-wide tile; without this the search spent 6 of 60 H100
    iterations on such no-op changes (2026-11-24)."""
    from kopt_supervisor.kernels.harness.params import launch_meta

    k = KERNELS[name]
    c = contract(name)
    kinds = {"small"} if cpu else {"production", "regression"}
    rows: dict[str, list[int]] = {}
    for shape in c.SHAPES:
        if shape.kind in kinds:
            rows.setdefault(f"dclass={c.dclass(shape.dims)}", []).append(int(shape.dims[k.row_dim]))
    out: dict[str, dict[str, list[Any]]] = {}
    for cls, lengths in sorted(rows.items()):
        by_tiles: dict[tuple[int, ...], list[Any]] = {}
        for v in k.space["BLOCK_D"]:
            p = {"*": {"BLOCK_D": v, "ROWS_PER_PROG": 1, "num_warps": 1, "num_stages": 1}}
            by_tiles.setdefault(tuple(launch_meta(p, "*", n, k.max_block_d)["BLOCK_D"] for n in lengths), []).append(v)
        groups = sorted((g for g in by_tiles.values() if len(g) > 1), key=len, reverse=True)
        if groups:
            out[cls] = {"BLOCK_D": groups[0]}
    return out


def kopt_toml(
    name: str,
    *,
    naive: bool = True,
    python: str | None = None,
    cpu: bool = False,
    review_timeout_s: float | None = None,
    profile: bool = True,
) -> str:
    """The kopt.toml of a materialized kernel repo.

    cpu: the target runs in Triton's interpreter: the tune space keeps only CPU_PARAMS (a
    warps or stages step is a no-op there, left undecided after every round), a decision
    stops at 10 looks (each interpreted look takes about a second), and a class a candidate
    did not aim at may move 5% (its looks vary about 4%: against 1% it stayed undecided and
    sent every class-targeted gain to review), and only a step more than 10x faster is
    suspicious (the interpreter's cost is per operation, so one tuning step from the naive
    start, e.g. the chunk loop replaced by one whole-row tile, measured 3.0-3.1x there and
    went to review half the time against the default 3x).
    profile: confirm keeps with the vendor profiler ([profile] kind "auto"), else "none".
    review_timeout_s: how long a borderline candidate waits for the engineer (0: decide by
    policy at once, for a run nobody watches)."""
    k = KERNELS[name]
    py = python or shlex.quote(sys.executable)
    tuned = [p for p in k.space if not cpu or p in CPU_PARAMS]
    space = ", ".join(f"{p} = {_toml(k.space[p])}" for p in tuned)
    # the bench serves looks, one process per tree (a look costs about half a second on the
    # H100, a process start 5 s): 12 looks settle a tie; the production shapes vote, the
    # regression grid guards (it must not get much slower)
    # on the CPU a loaded machine inflates a look's median up to 1.6x: 6 looks left the naive
    # start's -35% first step undecided under a suite's load (2026-11-29); 10 decide it
    decide = [f"max_rounds = {10 if cpu else 12}", "production_verdicts = true"]
    if cpu:  # interpreted looks vary ~4%: an untouched class is never shown within 1% in 6 looks
        decide += ["max_other_regression_pct = 5.0", "suspicious_speedup = 10.0"]
    if review_timeout_s is not None:
        decide.append(f"review_timeout_s = {float(review_timeout_s)!r}")
    alike = {cls: groups for cls, groups in alike_blocks(name, cpu=cpu).items() if "BLOCK_D" in tuned}
    alike_section = (
        (
            "# BLOCK_D values that give every shape of a class the same tile: one point for the search\n"
            "alike = { "
            + ", ".join(f"{json.dumps(cls)} = {{ BLOCK_D = {_toml(g['BLOCK_D'])} }}" for cls, g in alike.items())
            + " }\n"
        )
        if alike
        else ""
    )
    decide_section = ("\n[decide]\n" + "\n".join(decide) + "\n") if decide else ""
    # on the CPU both trees' servers share the cores: torch's worker threads spinning in one
    # while the other measures left the demo's first keep undecided in 3 of 6 runs on a
    # loaded 2-core machine (never with one thread: 4 of 4)
    cpu_env = 'env = { OMP_NUM_THREADS = "1", MKL_NUM_THREADS = "1" }\n' if cpu else ""
    return f"""\
# kopt target: {k.title}
# Written by kopt's kernels/catalog.py ({"naive" if naive else "tuned"} params.json). The bench
# prints the CSV on stdout: one row per shape and dtype; `err` <= 1 passes the contract.
# On a machine without a GPU it runs the Triton kernel in Triton's interpreter on small
# shapes: CPU timings.

[target]
bench = {_toml(f"{py} bench.py --dtypes bfloat16")}
csv = "-"
metric = "us"
direction = "min"
correct = "err <= 1"
config = {_toml(k.config)}
class_by = {_toml(k.class_by)}
ignore = {_toml([*STATS, *EXTRA])}
production = "prod == 1"
protected = {_toml(PROTECTED)}
timeout_s = 900
serve = {_toml(f"{py} bench.py --serve --dtypes bfloat16")}
serve_prepare = true
calls = "calls"
{cpu_env}
[profile]
kind = {_toml("auto" if profile else "none")}
kernel = {_toml(k.triton_kernel)}
command = {_toml(f"{py} bench.py --profile --dtypes bfloat16")}

[propose]
kind = "tune"

[propose.tune]
params = "params.json"
space = {{ {space} }}
order = {_toml([p for p in ORDER if p in tuned])}
per_class = true
shared_first = true
{alike_section}
[gpu]
# a look of a bundled kernel lasts about half a second: two idle readings half a second apart
samples = 2
sample_interval_s = 0.5

[stop]
max_iters = 40
consecutive_regressions = 10
{decide_section}
[roofline]
bytes = {_toml(k.bytes_expr)}
unit_scale = 1e-6
"""


def params_text(name: str, naive: bool) -> str:
    src = KERNELS[name].folder / ("params.naive.json" if naive else "params.json")
    return src.read_text(encoding="utf-8")


def _readme(k: KernelInfo, naive: bool) -> str:
    return f"""# {k.name}: {k.title}

{k.summary}.

- `baseline/{k.name}.py`: the PyTorch reference; `solution/{k.name}.py`: the Triton kernel
  (same signature: `{k.func}(..., eps=1e-6, out=None)`).
- `contract.py`: tolerances per dtype, shapes (production ones name their model), inputs,
  the fp64 reference. `roofline.py`: bytes per call.
- `bench.py`: `python bench.py` prints kopt's CSV; `python bench.py --serve` answers kopt's
  looks of this tree on stdin (`look N SEED PATH`, `audit N SEED PATH`, `load`). It runs on
  kopt's public harness (`kopt_supervisor.kernels.harness`, installed with kopt:
  docs/byo-kernel.md).
- `params.json`: the solution's meta-parameters per class ({"naive start" if naive else "tuned defaults"}).
- `kopt.toml`: the target for kopt (tune proposer over params.json).
"""


def _ignore(_dir: str, names: list[str]) -> set[str]:
    return {n for n in names if n == "__pycache__" or n.endswith(".pyc")}


def materialize(
    name: str,
    dest: Path,
    naive: bool = True,
    *,
    python: str | None = None,
    cpu: bool = False,
    review_timeout_s: float | None = None,
    profile: bool = True,
) -> None:
    """Write kernel `name` as a self-contained repo into `dest` (an existing, empty dir);
    cpu and review_timeout_s shape its kopt.toml (see kopt_toml)."""
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r} (bundled: {', '.join(sorted(KERNELS))})")
    dest = Path(dest)
    if not dest.is_dir():
        raise ValueError(f"{dest}: not a directory")
    if any(dest.iterdir()):
        raise ValueError(f"{dest}: not empty")
    k = KERNELS[name]
    src = k.folder
    for sub in ("baseline", "solution"):
        shutil.copytree(src / sub, dest / sub, ignore=_ignore)
    for f in ("contract.py", "roofline.py", "bench.py"):
        shutil.copy2(src / f, dest / f)
    (dest / "params.json").write_text(params_text(name, naive), encoding="utf-8")
    (dest / "kopt.toml").write_text(
        kopt_toml(name, naive=naive, python=python, cpu=cpu, review_timeout_s=review_timeout_s, profile=profile),
        encoding="utf-8",
    )
    (dest / ".gitignore").write_text("__pycache__/\n*.pyc\n", encoding="utf-8")
    (dest / "README.md").write_text(_readme(k, naive), encoding="utf-8")
