"""The bench driver: a Spec (harness/spec.py) -> kopt's CSV, in every mode kopt uses.

    python bench.py                      # every shape of this machine, CSV on stdout
    python bench.py --serve              # kopt's [target].serve: this tree's looks on request
    python bench.py --shapes production --out results.csv

A bench declares a Spec (the function and where it lives in a tree, shapes, inputs, an fp64
reference, tolerances) and calls `main(spec)`; a bundled kernel's folder (contract.py,
roofline.py, solution/, baseline/) is read into one by `main(folder)`.

One tree (a plain run, or a served look: `Bench.timed_rows`), per shape and dtype: the
contract check (harness/check.py) on inputs drawn from the run's seed (the `seed` column; a
fresh one per run, `--seed` to repeat one) -> `err` (passes when <= 1); then timing over
buffer sets drawn from the same seed but never the check's inputs, with no reference ever
computed for them, refreshed with a second draw and their outputs poisoned with NaN before
the last block (harness/sets.py), so that what they hold afterwards is what the last timed
calls computed: what kopt's audit compares between trees (harness/audit.py). Both inside a
profiler range named `kopt:col=value,...` over the row's config columns
(harness/ranges.py). On a GPU: blocks of a CUDA graph of k launches (k so that a block lasts
about --block-us, a multiple of the sets' count), the sets touching at least 2 x L2 of
distinct data (at most MAX_SETS), L2 flushed before each block, fewer blocks once the first
lasts long (timing.look_blocks); `us` is the median over blocks of µs per launch, with us_mean/std/min/p10/p90, and `calls` the launches timed in all
(blocks x k: `us` x `calls` is the time the row's timed calls took). A served look also
reports `us_last` (LAST): the last timed block's µs per launch, the block whose outputs kopt
audits, which therefore cannot be cheap (kopt's `last_block_not_faster`). The same run times a
device-to-device copy of the same number of bytes (copy_us, copy_gbps) and reports the
kernel's bandwidth as % of it (pct_copy). Without a GPU the Triton solution runs in Triton's
interpreter (TRITON_INTERPRET=1, set here before triton is imported) on the small shapes,
each block one call per set (CPU_SETS), timed by the process's CPU time (timing.CpuTimer): CPU timings.

--once: the contract check alone (each solution runs twice per shape, nothing is timed).

--profile: what a profiler runs (kopt.toml's [profile] command): per shape, each solution called
PROFILE_CALLS times inside its config's range (KOPT_PROFILE_CALLS times when kopt asks for
more), each call on fresh inputs of its own (drawn on the CPU and copied, so no draw kernel runs on the GPU:
Case.host_draw, profile_inputs); every call's outputs summarised where kopt asks
(KOPT_PROFILE_OUTPUTS); no reference, no comparison, nothing
timed (correctness is every look's). Under ncu every launch costs 10-80 ms, and the contract
check's own launches outside the ranges (the fp64 reference, the poisoned buffers, the
comparison) took 86 s of a 90 s profile on the H100; what is left outside the ranges is the
inputs and the candidate's own work, which kopt's outside-time rule is for.

Serve mode (--serve, kopt's `[target].serve`; harness/serve.py has the protocol): the process
answers `look N SEED PATH` (one look of this tree with inputs from SEED), `audit N SEED PATH`
(summaries of the outputs of the timed set the audit seed picks, per config) and `load`. It
saves a process start per look (torch's import alone took 4-5 s on the H100). Each look
makes its configs' timed buffer sets and CUDA graphs anew (serve.KEEP_BUFFERS: a placement
kept for the process's life gave each process an offset of its own, ~1% per class on the
H200); `timed_rows(keep=True)` replays the first look's instead. Graphs are never destroyed
(destroying one faulted, see harness/timing.py; their buffers are freed), so the process
grows by their memory pools; once --serve-memory of the GPU's memory is taken the process
answers `done N last`, serves that look's audit and leaves; kopt starts a fresh one for the
next look.

One tree per process, always: the one-process A/B mode (--ab BEST CAND, kopt's `ab_command`,
both trees imported and timed interleaved) was removed on 2026-12-01, because candidate code
in one process with best's could bend best's measurement. kopt measures each tree in its own
process (--serve).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from . import hold
from .audit import (
    VERSION,
    HostSummaries,
    audit_positions,
    audit_set,
    input_seed,
    output_tensors,
    summarise,
    summarise_sets,
)
from .check import check_call
from .locate import locate
from .params import class_key, config_key
from .ranges import Ranges, no_ranges, open_ranges, range_name
from .sets import TimedSets, keep_result
from .shapes import PRODUCTION, REGRESSION, SMALL
from .spec import Spec, as_spec, spec_from_folder
from .timing import (
    SPIN_US,
    ColdGraphTimer,
    CpuTimer,
    EventTimer,
    GraphTimer,
    L2Flush,
    block_launches,
    byte_launches,
    cycle,
    l2_bytes,
    look_blocks,
    one_call_us,
    reps_for,
    rotation_sets,
    summarize,
    use_side_stream,
)

MAX_SETS = 256
"""The most buffer sets a config's timed calls rotate over on a GPU (a one-row config would
need 2 x L2 / 512 bytes of them); a block has at least as many launches."""
CPU_SETS = 2
"""Buffer sets on the CPU (the interpreter: each block calls each once)."""

STATS = ("us_mean", "us_std", "us_min", "us_p10", "us_p90", "samples")
EXTRA = ("calls", "gbps", "copy_us", "copy_gbps", "pct_copy", "prod", "seed", "model")
"""Columns beside config, metric and err: kopt.toml lists them (with STATS) under ignore
(`calls` also as [target].calls: a config that does not name it must not take it for a
config column, since a GPU's count of launches follows the kernel's speed)."""
LAST = "us_last"
"""A served look's column (`timed_rows(copy=False)`): the last timed block's µs per launch.
That block runs on inputs refreshed just before it into NaN-filled outputs, and what it
writes is what kopt's audit and the look's commitment check, so it is the one block a
candidate cannot make cheap by skipping work (returning at once when its output already
holds a result, counting calls to find the audited block): kopt compares it with the
median (engine/decide/plausible.py, `last_block_not_faster`; engine/metrics.py reads any
`<metric>_last`). Only in served looks: kopt reads it as the metric's own column, never a
config column, but the plain run's CSV is also what `kopt init` reads to propose config
columns, and it takes every column it does not know for one."""

PROFILE_CALLS = 4
"""--profile: each config's calls inside its range, unless kopt asks for more (KOPT_PROFILE_CALLS:
a keep's second profile, when the first could not tell on a class the keep claims). Four, not
two: on the H200 (2026-11-30, experiments/profile_noise.py, the RMSNorm demo's tree) an A/A
class interval at 99% was +-11.1% (narrow) and +-4.2% (wide) at 2 calls, +-3.2% and +-3.1% at 4
(the 730 MB config at 2; the spread read from the calls after the first: engine/profile/summary.py
FIRST_APART), so a claim of -4% or more is shown at 4 and a -10% one was not at 2; the two more calls cost ~2 s a tree (mostly the
host draws of the 28-40 MB shapes), the closer profile they spare 50-110 s."""
PROFILE_CALLS_MAX = 64
LARGE_FIRST_CALLS = 2
"""--profile, unless kopt asks for more calls: a config whose inputs pass GPU_DRAW_BYTES takes
this many. Its calls cost more than a second each (the RMSNorm demo's 730 MB shape: 1.2 s a call
copying and summarising its output on the host, H200, 2026-11-30), while its kernel, hundreds of
microseconds long, varies little from launch to launch (1.3%)."""
LARGE_PROFILE_CALLS = 4
"""--profile, when kopt asks for more calls: a config whose inputs pass GPU_DRAW_BYTES takes at
most this many. Its calls cost seconds each under ncu (each draw's kernels replayed, each output
copied and summarised on the host: the RMSNorm demo's largest shape, 730 MB, spent 13.8 s drawing
and 11.0 s summarising 12 calls of one tree on the H200, 2026-11-30, part 15). Each call's GPU
time is still the profiler's, which candidate code cannot bend: fewer calls only estimate the
config less precisely."""


PROFILE_OUTPUTS_ENV = "KOPT_PROFILE_OUTPUTS"
"""--profile: where kopt wants every profiled call's outputs summarised (audit.py's summary, the
audit file's JSON): kopt compares the candidate's with the baseline's at the same seed (best's
in a run whose baseline drew none), so that a tree which does less work, or wrong work, only
while it is profiled is caught (engine/profile/profiler.py)."""
PROFILE_SEED_ENV = "KOPT_PROFILE_SEED"
"""--profile: the inputs' base seed kopt gives the baseline's profile and every keep's (the same
inputs, so their outputs compare)."""


PROFILE_WARM_ENV = "KOPT_PROFILE_WARM"
"""Set by kopt (with KOPT_PROFILE=1 and one call per config) for a held profile's warm-up: the
--profile run without a profiler, only to compile the tree's kernels into the profile's cache;
its rows are not written."""


def profile_seed(seed: int) -> int:
    """--profile's inputs' base seed: KOPT_PROFILE_SEED when kopt gives one, else `seed`."""
    raw = os.environ.get(PROFILE_SEED_ENV, "").strip()
    if not raw:
        return seed
    if not raw.isdigit():
        raise SystemExit(f"{PROFILE_SEED_ENV}={raw!r}: a whole number")
    return int(raw)


def write_profile_outputs(entries: list[dict[str, Any]]) -> None:
    """The profile's output summaries (one audit entry per config) where kopt asked for them."""
    where = os.environ.get(PROFILE_OUTPUTS_ENV, "")
    if where:
        Path(where).write_text(json.dumps({"version": VERSION, "configs": entries}) + "\n", encoding="utf-8")


def profile_calls(environ: Mapping[str, str] | None = None, first: int = PROFILE_CALLS) -> int:
    """The calls per config of a --profile run: KOPT_PROFILE_CALLS, or `first` (the harness's
    own number: PROFILE_CALLS, IMPORTED_PROFILE_CALLS). A JSON object there names each config's
    calls instead (`exact_calls`): `first` here."""
    raw = (os.environ if environ is None else environ).get("KOPT_PROFILE_CALLS", "").strip()
    if not raw or raw.startswith("{"):
        return first
    if not raw.isdigit() or not 1 <= int(raw) <= PROFILE_CALLS_MAX:
        raise SystemExit(f"KOPT_PROFILE_CALLS={raw!r}: a whole number of calls from 1 to {PROFILE_CALLS_MAX}")
    return int(raw)


def exact_calls(environ: Mapping[str, str] | None = None) -> dict[str, int] | None:
    """KOPT_PROFILE_CALLS as a JSON object of config keys to calls: each config named runs exactly
    that many, whatever its size (kopt divides each config's GPU time by the calls it asked
    for, never by the tree's own launches: engine/profile/floors.py); None when it is not one."""
    raw = (os.environ if environ is None else environ).get("KOPT_PROFILE_CALLS", "").strip()
    if not raw.startswith("{"):
        return None
    try:
        asked = json.loads(raw)
    except ValueError:
        asked = None
    if not isinstance(asked, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= PROFILE_CALLS_MAX for n in asked.values()
    ):
        raise SystemExit(
            f"KOPT_PROFILE_CALLS={raw[:80]!r}: a JSON object of config keys to calls from 1 to {PROFILE_CALLS_MAX}"
        )
    return {str(k): int(n) for k, n in asked.items()}


PROFILE_CONFIGS_ENV = "KOPT_PROFILE_CONFIGS"
"""--profile, with KOPT_PROFILE_CALLS: the configs that take those calls, a JSON list of their
keys (params.config_key); the others take PROFILE_CALLS. Unset: every config takes them (one past
GPU_DRAW_BYTES at most LARGE_PROFILE_CALLS, either way). kopt
sets it, when its first profile could not tell a claimed gain, to the configs of the classes the
keep claims: on the H200 the
second profile of a ~3% claim called every config 12 times and the RMSNorm demo's largest
shape, of another class, took 26 s of each tree's 48 (docs/h100-wave3/part12-...)."""


def profile_calls_for(
    key: str,
    environ: Mapping[str, str] | None = None,
    input_bytes: Callable[[], int] | None = None,
    first: int = PROFILE_CALLS,
) -> int:
    """The calls of the config `key` in a --profile run (KOPT_PROFILE_CALLS, KOPT_PROFILE_CONFIGS;
    else `first`). `input_bytes` (a GPU case's, read only when it matters): past GPU_DRAW_BYTES the
    config takes LARGE_FIRST_CALLS unless kopt asked for more of it, and at most LARGE_PROFILE_CALLS."""
    env = os.environ if environ is None else environ
    exact = exact_calls(env)
    # kopt names each config's calls: exactly those (a config it does not name: the harness's own)
    if exact is not None:
        env = {k: v for k, v in env.items() if k != "KOPT_PROFILE_CALLS"}
        if key in exact:
            return exact[key]
    calls = profile_calls(env, first)
    asked = bool(env.get("KOPT_PROFILE_CALLS", "").strip())
    raw = env.get(PROFILE_CONFIGS_ENV, "").strip()
    if raw:
        try:
            keys = json.loads(raw)
        except ValueError:
            keys = None
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise SystemExit(f"{PROFILE_CONFIGS_ENV}={raw[:80]!r}: a JSON list of config keys")
        if key not in keys:
            calls, asked = first, False
    cap = LARGE_PROFILE_CALLS if asked else LARGE_FIRST_CALLS
    if input_bytes is not None and calls > cap and input_bytes() > GPU_DRAW_BYTES:
        return cap
    return calls


def profile_entry(
    cols: dict[str, Any], atol: float, rtol: float, outputs: list[dict[str, Any]], calls: int
) -> dict[str, Any]:
    """A config's entry in the profile's outputs file: one audit set whose outputs are every
    profiled call's, in order (audit.HostSummaries's summaries), and how many calls it made (the
    baseline's tell kopt the bench's own numbers, which it then asks of every later profile)."""
    return {"config": dict(cols), "sets": 1, "set": 0, "atol": atol, "rtol": rtol, "outputs": outputs, "calls": calls}


class ProfileEntries:
    """A profile's outputs file being made: per config its calls' summaries, made on a host
    thread while the next calls run (audit.HostSummaries); `entries` waits for them. A config
    whose summary failed is left out (logged): kopt then cannot confirm its outputs."""

    def __init__(self, torch: Any) -> None:
        self.summaries = HostSummaries(torch)
        self._later: list[tuple[dict[str, Any], float, float, list[Future[dict[str, Any]]], int]] = []

    def add(
        self, cols: dict[str, Any], atol: float, rtol: float, outputs: list[Future[dict[str, Any]]], calls: int
    ) -> None:
        self._later.append((dict(cols), atol, rtol, outputs, calls))

    def entries(self) -> list[dict[str, Any]]:
        out = []
        try:
            for cols, atol, rtol, outputs, calls in self._later:
                try:
                    out.append(profile_entry(cols, atol, rtol, [f.result() for f in outputs], calls))
                except Exception as exc:
                    log(f"profile outputs of {config_key(cols)}: {type(exc).__name__}: {exc} (left out)")
        finally:
            self.summaries.close()
        return out


def profile_inputs(case: Case, call: int) -> tuple[tuple, dict[str, Any]]:
    """The inputs of a case's profiled call: the case's own for the first, then a draw of their
    own per call (host_draw: no kernel on the GPU), from a seed both trees derive alike. With
    one set of inputs for every call, a tree that computed the first call and handed its
    result back on the others wrote the same outputs as one that computed them all."""
    if call == 0:
        return case.args, case.kwargs
    seed = profile_call_seed(case.seed, case.key, call)
    return case.host_draw(seed) if case.gpu else case.draw(seed)


def profile_call_seed(seed: int, key: str, call: int) -> int:
    """The inputs' seed of a case's profiled call after its first (`profile_inputs`)."""
    return input_seed(seed, key, f"profile/call{call}")


def case_seed(base_seed: int, shape: int, dtype: int, dtypes: int) -> int:
    """The inputs' seed of a run's case (shape and dtype by their positions; Bench.cases)."""
    return base_seed + shape * dtypes + dtype


def chosen_configs(spec: Spec, a: argparse.Namespace, gpu: bool) -> tuple[list[str], list]:
    """(dtypes, shapes) a run of `a` covers: --dtypes (all on a GPU, the first on the CPU),
    --shapes and --only; a name the spec lacks ends the run with a one-line error."""
    dtypes = [d for d in (a.dtypes.split(",") if a.dtypes else spec.all_dtypes()[: None if gpu else 1]) if d]
    bad = [d for d in dtypes if d not in spec.tolerance]
    if bad:
        raise SystemExit(f"--dtypes: {bad[0]!r} is not one of {', '.join(spec.tolerance)}")
    shapes = pick_shapes(spec, a.shapes, gpu)
    if a.only:
        names = a.only.split(",")
        unknown = [n for n in names if n not in {s.name for s in spec.shapes}]
        if unknown:
            raise SystemExit(f"--only: no shape {unknown[0]!r} in {spec.name}'s spec")
        shapes = [s for s in spec.shapes if s.name in names]
    if not shapes:
        raise SystemExit(f"--shapes {a.shapes}: {spec.name}'s spec has no such shape")
    return dtypes, shapes


def profile_draws(
    torch: Any, spec: Spec, a: argparse.Namespace, base_seed: int, *, gpu: bool
) -> list[tuple[str, int, Callable[[], tuple[tuple, dict[str, Any]]]]]:
    """A --profile run's draws, in the order the run makes them: per case (Bench.cases) its first
    call's inputs and each later call's (profile_inputs), each drawn on the host, for every config
    whose inputs a GPU run draws there (Case.host_draw: GPU_DRAW_BYTES at most). What hold.predraw
    runs while held (on a GPU: `gpu` picks the shapes, as the run's own flag does)."""
    dtypes, shapes = chosen_configs(spec, a, gpu)
    draws: list[tuple[str, int, Callable[[], tuple[tuple, dict[str, Any]]]]] = []
    for i, shape in enumerate(shapes):
        for j, dtype in enumerate(dtypes):
            dt = getattr(torch, dtype)
            cols = spec.row_columns(shape, dtype, torch.empty((), dtype=dt).element_size())
            key, seed = config_key(cols), case_seed(base_seed, i, j, len(dtypes))
            nbytes = input_bytes(torch, spec, shape, dt)
            if nbytes > GPU_DRAW_BYTES:
                continue
            calls = profile_calls_for(key, input_bytes=functools.partial(int, nbytes))
            for call_seed in [seed] + [profile_call_seed(seed, key, c) for c in range(1, calls)]:
                draws.append((key, call_seed, functools.partial(host_inputs, torch, spec, shape, dt, call_seed)))
    return draws


SLOW_CHECK_S = 0.2
"""A config's contract check that takes longer (a JIT compile, the first time) is logged with its seconds."""
GPU_DRAW_BYTES = 256 << 20
"""--profile: a case whose inputs pass this many bytes draws them on the GPU (Case.host_draw)."""
SERVE_MEMORY_TREE = 0.2
"""A per-tree served process leaves once its kept buffers pass this share of the GPU's memory.
Two of them share the GPU (best's and the candidate's) and each needs headroom for the next
look's check (the fp64 reference of the largest shape) beside what it keeps: on the H100 two
processes at the former 0.5 held 38.4 and 40.4 GiB of 79 and both ran out of memory
(docs/h100-wave3/part1-first-per-tree-run.md)."""
RELEASE_HEADROOM = 1.5
"""`--release auto`: a served process keeps its cached blocks after a look while the device's
free memory is at least this many times its own peak (room for another process's largest
check beside it); below that it gives them back (Bench.release_cache)."""
FREE_MIN_SHARE = 0.1
"""A served process leaves after a look that left the device less free memory than this share
of it (Bench.memory_full)."""
RELEASE_SETTLE_S = 0.1
"""After giving cached blocks back, the pause before replying: the driver's work on them is
over before the other side measures (0.1 s: 0.39% at most; 0.03 s: 3.9%; none: 9.9%, H200)."""


def setup_device() -> tuple[Any, bool]:
    """(torch, has_gpu); without a GPU, Triton's interpreter is switched on before triton loads."""
    import torch

    gpu = torch.cuda.is_available()
    if gpu:
        use_side_stream(torch)  # before any of the bench's code runs: captures see its streams
    if not gpu:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("no GPU and triton was imported before TRITON_INTERPRET=1 could be set")
        os.environ["TRITON_INTERPRET"] = "1"
    return torch, gpu


def load_solution(spec: Spec, tree: Path, tag: str, which: str = "solution") -> ModuleType:
    """The module that holds the function to time (or the baseline's) in `tree`."""
    return locate(tree, spec.locator(which), f"{tag}_{which}").module


def pick_shapes(spec: Any, which: str, gpu: bool) -> list:
    """The shapes of `which` (auto: production + regression on a GPU, small on the CPU, or
    every shape when the spec declares no small one)."""
    shapes = as_spec(spec).shapes
    if which == "auto" and not gpu and not any(s.kind == SMALL for s in shapes):
        which = "every"
    kinds = {
        "auto": (PRODUCTION, REGRESSION) if gpu else (SMALL,),
        "small": (SMALL,),
        "production": (PRODUCTION,),
        "regression": (REGRESSION,),
        "all": (PRODUCTION, REGRESSION),
        "every": (PRODUCTION, REGRESSION, SMALL),
    }[which]
    return [s for s in shapes if s.kind in kinds]


def kept_outputs(fn: Callable[..., Any], arg_sets: list[tuple], kwargs: dict[str, Any]) -> list[Callable[[], Any]]:
    """Calls of a function that allocates its own output, one per input set, each keeping
    its result until the same set comes round (freed just before, so the allocator hands
    the same block back): as many distinct outputs as input sets, like `out=` rotation.

    A result dropped at once would be freed before the next launch allocates, so inside a
    CUDA graph every launch would write one buffer, still partly dirty in L2 from the launch
    before, and skip those write-backs to DRAM. Measured on the H100 (2026-11-24,
    experiments/rms_vs_compile.py): torch.compile's RMSNorm ran 5-9% faster on the
    20 µs QK-norm shapes that way than with one output per input set, and so did ours."""
    kept: list[Any] = [None] * len(arg_sets)
    return [functools.partial(keep_result, kept, i, fn, args, kwargs) for i, args in enumerate(arg_sets)]


def host_inputs(torch: Any, spec: Spec, shape: Any, dt: Any, seed: int) -> tuple[tuple, dict[str, Any]]:
    """The spec's inputs for `shape` drawn on the CPU from a generator seeded with `seed`."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    args, kwargs = spec.make_inputs(torch, shape.dims, dt, "cpu", gen)
    return tuple(args), dict(kwargs)


def input_bytes(torch: Any, spec: Spec, shape: Any, dt: Any) -> int:
    """The bytes of a shape's inputs, from a draw on the meta device (0: that failed)."""
    try:
        gen = torch.Generator(device="cpu")
        args, kwargs = spec.make_inputs(torch, shape.dims, dt, "meta", gen)
    except Exception:  # a spec that cannot draw on the meta device: drawn as before
        return 0
    return hold.nbytes(tuple(args), dict(kwargs))


class Case:
    """One shape and dtype: its inputs, its reference, and calls over its buffer sets.

    `contract` is a Spec, or a bundled kernel's contract module (with its roofline module)."""

    def __init__(
        self,
        torch: Any,
        contract: Any,
        roofline: Any,
        shape: Any,
        dtype: str,
        seed: int,
        gpu: bool,
        ranges: Ranges | None = None,
        *,
        reference: bool = True,
        look: bool = False,
        host: bool = False,
        predrawn: hold.Draws | None = None,
    ) -> None:
        """`seed`: the inputs' generator seed; with `look`, the look's seed, from which the
        check's inputs are drawn by audit.input_seed (and the timed sets', sets.TimedSets).
        `host` (--profile): inputs drawn on the CPU and copied to the GPU (host_draw), taken from
        `predrawn` (the run's draws while it was held: each once) where they are there."""
        self.predrawn: hold.Draws = {} if predrawn is None else predrawn
        spec = as_spec(contract, roofline)
        self.torch, self.spec, self.shape, self.gpu = torch, spec, shape, gpu
        self.ranges = ranges or no_ranges("")
        self.device = "cuda" if gpu else "cpu"
        self.dt = getattr(torch, dtype)
        esize = torch.empty((), dtype=self.dt).element_size()
        self.cols = spec.row_columns(shape, dtype, esize)
        self.key = config_key(self.cols)
        self.range = range_name(self.cols)
        self.bytes = spec.bytes_of(self.cols)
        self.seed = seed
        first = input_seed(seed, self.key, "check") if look else seed
        self.args, self.kwargs = self.host_draw(first) if host and gpu else self.draw(first)
        self.ref = spec.reference(torch, self.args, self.kwargs) if reference else None
        # None: made without its reference (--profile): neither checked nor given an out buffer
        self.out_shape = tuple(self.ref.shape) if self.ref is not None else ()
        self.out_dtype = (self.dt if spec.same_dtype else self.ref.dtype) if self.ref is not None else self.dt
        self.atol, self.rtol = spec.tolerance[dtype]
        self._sets: list[tuple[tuple, Any]] = []
        self._prepared: dict[int, tuple[ModuleType, Callable[..., Any]]] = {}

    def draw(self, seed: int) -> tuple[tuple, dict[str, Any]]:
        """The spec's inputs for this case from a generator seeded with `seed`."""
        gen = self.torch.Generator(device=self.device).manual_seed(seed)
        args, kwargs = self.spec.make_inputs(self.torch, self.shape.dims, self.dt, self.device, gen)
        return tuple(args), dict(kwargs)

    def host_draw(self, seed: int) -> tuple[tuple, dict[str, Any]]:
        """The spec's inputs drawn on the CPU, then copied to the GPU: no kernel of the draw
        runs on the GPU. For --profile, where every kernel launched outside the config ranges
        is profiled as work a candidate may have moved out of them: on the H100 the RMSNorm
        spec's draws were 99 such launches, 12 s of ncu's 16 s pass per tree
        (docs/h100-wave3/part2-graphs-kept.md). A spec whose draw cannot run on the CPU is
        drawn on the GPU (logged).

        So is an input set larger than GPU_DRAW_BYTES (its size read from a draw on the meta
        device, which allocates and launches nothing): on the H200 (2026-11-30) the host's draw
        of the largest RMSNorm shape's 730 MB took 4.6 s of a 12 s profile and adaLN's 8 s
        of 19 (experiments/profile_cost.py), where the GPU's is a few launches, each some
        tens of ms under ncu. Both trees draw alike, so the launches outside the ranges match."""
        drawn = self.predrawn.pop((self.key, seed), None)  # drawn while the run was held: the same values
        if drawn is not None:
            args, kwargs = drawn
        elif self.input_bytes() > GPU_DRAW_BYTES:
            return self.draw(seed)
        else:
            try:
                args, kwargs = host_inputs(self.torch, self.spec, self.shape, self.dt, seed)
            except Exception as exc:  # a spec that needs the device to draw
                log(f"{self.spec.name} {self.shape.name}: inputs drawn on the GPU ({type(exc).__name__}: {exc})")
                return self.draw(seed)

        def move(v: Any) -> Any:
            return v.to(self.device) if hasattr(v, "to") and hasattr(v, "device") else v

        return tuple(move(a) for a in args), {k: move(v) for k, v in dict(kwargs).items()}

    def input_bytes(self) -> int:
        """The bytes of this case's inputs, from a draw on the meta device (0: that failed)."""
        return input_bytes(self.torch, self.spec, self.shape, self.dt)

    def function(self, module: Any) -> Callable[..., Any]:
        """The callable to check and time: the module's function (or a function given as is),
        through the spec's `prepare` when it has one (once per module and case)."""
        if not isinstance(module, ModuleType):
            return module
        key = id(module)
        if key not in self._prepared:
            obj = getattr(module, self.spec.func_name)
            self._prepared[key] = (module, self.spec.prepare(obj, self) if self.spec.prepare else obj)
        return self._prepared[key][1]

    def check(self, module: Any) -> tuple[float, str]:
        """(err, why) of the module's function (or of a function) on this case; err inf when
        it crashes."""
        spec = self.spec
        try:
            fn = self.function(module)
        except Exception as exc:  # a candidate whose model cannot even be built fails its row
            return math.inf, f"{type(exc).__name__}: {exc}"
        key_fn = getattr(module, "class_key", None) if isinstance(module, ModuleType) else None
        if key_fn is not None and spec.class_args is not None and spec.class_by:
            want = class_key(**{c: self.cols[c] for c in spec.class_by})
            got = key_fn(*spec.class_args(self.shape.dims))
            if got != want:
                return math.inf, f"the solution's class_key is {got!r}, the bench's class is {want!r}"
        try:
            res = check_call(
                self.torch,
                self.ranges.around(fn, self.range),
                self.args,
                self.kwargs,
                self.ref,
                self.atol,
                self.rtol,
                out=spec.out,
                same_dtype=spec.same_dtype,
            )
        except Exception as exc:  # a broken candidate: reported in its row, never fatal
            return math.inf, f"{type(exc).__name__}: {exc}"
        why = res.reason or (
            f"{res.nonfinite} NaN/Inf output element(s)"
            if res.nonfinite
            else ""
            if res.ok
            else f"error {res.err:.3g} x tolerance"
        )
        return res.err, why

    def buffers(self, sets: int) -> list[tuple[tuple, Any]]:
        """`sets` buffer sets (inputs, output), made once and shared by every function timed
        on this case: set 0 holds the checked inputs, the others copies of them."""
        while len(self._sets) < sets:
            args = self.args if not self._sets else tuple(a.clone() if hasattr(a, "clone") else a for a in self.args)
            dst = (
                self.torch.empty(self.out_shape, dtype=self.out_dtype, device=self.device)
                if self.spec.out is not None
                else None
            )  # a function that allocates its own needs none
            self._sets.append((args, dst))
        return self._sets[:sets]

    def calls(self, fn: Callable[..., Any], sets: int, with_out: bool = True) -> list[Callable[[], Any]]:
        """`sets` calls of fn over the case's shared buffer sets (rotation); without
        with_out (or when the spec's function takes no output keyword), fn allocates its own
        output (torch.compile) and that output is kept until the same input set comes round
        (`kept_outputs`)."""
        out = self.spec.out
        if not with_out or out is None:
            return kept_outputs(fn, [args for args, _ in self.buffers(sets)], self.kwargs)
        kwargs = self.kwargs

        def call(args: tuple, dst: Any) -> Any:
            return fn(*args, **kwargs, **{out: dst})

        return [functools.partial(call, args, dst) for args, dst in self.buffers(sets)]

    def copy_calls(self, sets: int) -> list[Callable[[], Any]]:
        n = max(1, self.bytes // 2)
        out: list[Callable[[], Any]] = []
        for _ in range(sets):
            src = self.torch.empty(n, dtype=self.torch.uint8, device=self.device).random_(0, 255)
            dst = self.torch.empty_like(src)
            out.append(functools.partial(dst.copy_, src))
        return out


class Timing:
    """Block timers on this machine (GPU: graphs + L2 flush, the spin before a graph's block; CPU:
    the process's CPU time)."""

    def __init__(self, torch: Any, gpu: bool, block_us: float, max_reps: int, spin_us: float = SPIN_US) -> None:
        self.torch, self.gpu, self.block_us, self.max_reps = torch, gpu, block_us, max_reps
        self.flush = L2Flush(torch, spin_us=spin_us) if gpu else None
        if self.flush is not None and spin_us > 0 and not self.flush.spin_cycles:
            log("this torch has no torch.cuda._sleep: no spin after the L2 flush (timing.SPIN_US)")
        self.l2 = l2_bytes(torch) if gpu else 0
        self.pool: Any = None
        """The memory pool every CUDA graph capture shares (share_pool); None: each its own."""

    def share_pool(self) -> None:
        """Every later capture of these timers allocates from one pool: what a graph freed is
        used again by the next capture instead of staying held by a graph that is kept alive
        but never replayed (timing.LIVE_GRAPHS). Only for a bench none of whose graphs is
        replayed after a later capture (an imported bench makes new timers each look, each
        config's first timer done before its last is captured): a graph replayed after
        another's capture could write into that graph's live outputs. Measured on the H200
        (2026-11-30): the layer-norm tutorial's served processes left for memory every 7
        looks, each restart 5.6-6.3 s of a look (docs/h100-wave3/part10)."""
        if self.gpu:
            self.pool = self.torch.cuda.graph_pool_handle()

    def timer(
        self,
        make: Callable[[int], list[Callable[[], Any]]],
        nbytes: int,
        graph: bool = True,
        span: Callable[[], Any] | None = None,
    ) -> Any:
        """A block timer of the calls `make(n)` returns; graph=False: eager launches between
        events (for what a CUDA graph cannot capture); `span`: the profiler range each block's
        timed launches run in (the flush and the calibration stay outside it)."""
        first = make(1)
        if not self.gpu or self.flush is None:  # the interpreter: one call is milliseconds, a block is one call
            return CpuTimer(first[0], 1, warm_blocks=0, span=span)
        est = one_call_us(self.torch, first[0], self.flush)
        reps = reps_for(est, self.block_us, self.max_reps)
        sets = rotation_sets(nbytes, self.l2, reps)
        fns = first + (make(sets)[1:] if sets > 1 else [])
        return self._block_timer(cycle(fns), reps, self.flush, graph, span)

    def set_count(self, nbytes: int) -> int:
        """How many buffer sets a config's timed calls rotate over (sets.TimedSets), fixed
        before anything is timed so that every tree gets the same count in the same look: on
        a GPU enough for 2 x L2 of distinct data (at most MAX_SETS; 1 when the spec says
        nothing of the bytes a call moves), on the CPU CPU_SETS."""
        if not self.gpu:
            return CPU_SETS
        return rotation_sets(nbytes, self.l2, MAX_SETS)

    def sets_timer(
        self,
        calls: list[Callable[[], Any]],
        nbytes: int,
        graph: bool = True,
        span: Callable[[], Any] | None = None,
        reps: int | None = None,
    ) -> Any:
        """A block timer over one call per buffer set whose every block calls each set at least
        once, the same number of times (so each set's output is what the last block wrote):
        on the CPU one call per set; on a GPU timing.block_launches (a multiple of the sets'
        count, from the bytes a call moves; `reps`: that number, with no calibration); `graph`
        and `span` as in `timer`."""
        fn, sets = cycle(calls), len(calls)
        if not self.gpu or self.flush is None:
            return CpuTimer(fn, sets, warm_blocks=0, span=span)
        for call in calls:  # every set seen once, eagerly, before the capture (sets.TimedSets says why)
            call()
        if reps is None:  # calibrated: one call timed alone
            reps = block_launches(
                nbytes, one_call_us(self.torch, calls[0], self.flush), self.block_us, self.max_reps, sets
            )
        return self._block_timer(fn, reps, self.flush, graph, span)

    def last_timer(self, calls: list[Callable[[], Any]], graphed: bool, span: Callable[[], Any] | None = None) -> Any:
        """The timer of a config's last timed block: one call per set (`calls`), none of them
        called before the block's own (no calibration, no warm block): on the CPU the
        process's CPU time; on a GPU a timing.ColdGraphTimer where the block's regular timer
        was a CUDA graph (`graphed`), else (or where the capture fails) eager launches between
        CUDA events."""
        if not self.gpu or self.flush is None:
            return CpuTimer(cycle(calls), len(calls), warm_blocks=0, span=span)
        if graphed:
            try:
                return ColdGraphTimer(self.torch, calls, self.flush, span=span, pool=self.pool, spin=self.flush.spin)
            except Exception as exc:  # what a graph cannot capture runs eagerly
                self.torch.cuda.synchronize()
                log(f"the last block's CUDA graph capture failed ({type(exc).__name__}: {str(exc)[:120]}): eager")
        return EventTimer(self.torch, cycle(calls), len(calls), self.flush, warm_blocks=0, span=span)

    def _block_timer(
        self, fn: Callable[[], Any], reps: int, flush: L2Flush, graph: bool, span: Callable[[], Any] | None
    ) -> Any:
        """A GPU block timer of `reps` launches of fn: a CUDA graph, or eager launches between
        CUDA events when `graph` is off or the capture fails."""
        if not graph:
            return EventTimer(self.torch, fn, reps, flush, span=span)
        try:
            return GraphTimer(self.torch, fn, reps, flush, span=span, pool=self.pool, spin=flush.spin)
        except Exception as exc:  # what a graph cannot capture (host syncs, allocations...) runs eagerly
            self.torch.cuda.synchronize()
            log(
                f"CUDA graph capture failed ({type(exc).__name__}: {str(exc)[:120]}): "
                "timing eager launches between CUDA events instead"
            )
            return EventTimer(self.torch, fn, reps, flush, span=span)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if math.isinf(v) else f"{v:.6g}")
    return str(v)


def write_csv(rows: list[dict[str, Any]], out: str | None, stdout: bool = True) -> None:
    header = list(rows[0])
    text = "\n".join([",".join(header)] + [",".join(_fmt(r[c]) for c in header) for r in rows]) + "\n"
    if stdout:
        sys.stdout.write(text)
        sys.stdout.flush()
    if out:
        Path(out).write_text(text, encoding="utf-8")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def process_age_s() -> float:
    """Seconds since this process started (Linux /proc; NaN elsewhere): what the interpreter,
    imports and everything before main() cost."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        return time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return math.nan


@dataclass
class Prepared:
    """A case of a look made ready for its timed blocks (Bench._prepare_case): checked, its
    timed sets drawn, its block timer captured (None: still to be made in the look, or it
    cannot be timed: `timeable` False)."""

    case: Case
    where: str
    err: float
    sets: TimedSets
    t: Any
    warm: bool
    """The timer ran no blocks just before its look's (kept, or prepared): warm blocks first."""
    timeable: bool = True


class PhaseClock:
    """Wall seconds per phase of one bench process, logged as one line at the end, so the
    cost of a round (a process) can be read from its log: `bench phases: start 1.9 s, ...`."""

    def __init__(self, since_process_start: bool = True) -> None:
        self.spent: dict[str, float] = {"start": process_age_s()} if since_process_start else {}
        self._t = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.spent[phase] = self.spent.get(phase, 0.0) + now - self._t
        self._t = now

    def line(self) -> str:
        total = sum(v for v in self.spent.values() if not math.isnan(v))
        return "bench phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.spent.items()) + f"; total {total:.2f} s"


def parse_args(argv: list[str] | None, gpu: bool) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="kopt bench: contract check and timing, CSV on stdout")
    ap.add_argument(
        "--serve",
        action="store_true",
        help="answer kopt's requests on stdin: this tree's `prepare N SEED`, `look N SEED PATH`, "
        "`audit N SEED PATH` and `load`",
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the inputs' seed of a run (default: a fresh one); the same seed draws the same inputs "
        "as a served `look N SEED PATH`",
    )
    ap.add_argument(
        "--shapes",
        default="auto",
        choices=["auto", "small", "production", "regression", "all"],
        help="auto: production + regression on a GPU, small on the CPU",
    )
    ap.add_argument(
        "--dtypes",
        default="",
        help="comma-separated subset of the contract's dtypes (default: all on a GPU, the first on the CPU)",
    )
    ap.add_argument(
        "--blocks",
        type=int,
        default=0,
        help="timed blocks per config (default: GPU 25, 9 for --serve; CPU 3)",
    )
    ap.add_argument(
        "--release",
        default="auto",
        choices=["auto", "look", "never"],
        help="--serve: give the allocator's cached blocks back to the driver after a look when the device "
        "is short of memory (auto, the default), after every look, or never",
    )
    ap.add_argument(
        "--warm-blocks",
        type=int,
        default=0,
        help="--serve: untimed blocks per config before its timed ones at every look after the first "
        "(a new timer always runs two); default 0",
    )
    ap.add_argument(
        "--block-us",
        type=float,
        default=300.0,
        help="GPU: target duration of a block (default 300 µs); on the CPU a block is one call",
    )
    ap.add_argument("--only", default="", help="comma-separated shape names (after --shapes)")
    ap.add_argument(
        "--which",
        default="solution",
        choices=["solution", "baseline"],
        help="time the spec's function (default) or its baseline (Spec.baseline)",
    )
    ap.add_argument(
        "--tree",
        default=None,
        help="the tree whose function is timed (default: the bench's own, else the working directory)",
    )
    ap.add_argument(
        "--once", action="store_true", help="no timing: the contract check only (each solution runs twice per shape)"
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="for profilers: each solution called PROFILE_CALLS (4) times per shape in its config's range; no reference, "
        "no check, no timing",
    )
    ap.add_argument("--out", help="also write the CSV to this file")
    ap.add_argument(
        "--spin-us",
        type=float,
        default=SPIN_US,
        help="on a GPU: after a CUDA graph block's L2 flush, keep the GPU busy this long (torch.cuda._sleep) so the "
        f"block's launches are queued before it reaches them (default {SPIN_US:g}; 0: none; timing.SPIN_US)",
    )
    ap.add_argument(
        "--serve-memory",
        type=float,
        default=SERVE_MEMORY_TREE,
        help="--serve: leave after a look once kept buffers take this share of the GPU's memory "
        f"(default {SERVE_MEMORY_TREE}: kopt keeps two such processes on a GPU, best's and the candidate's)",
    )
    a = ap.parse_args(argv)
    if a.profile and (a.serve or a.once):
        ap.error("--profile runs alone: not with --serve or --once")
    if a.profile:  # a bad KOPT_PROFILE_CALLS or KOPT_PROFILE_CONFIGS: its one-line error before anything runs
        profile_calls_for("")
    if a.serve and a.once:
        ap.error("--serve times its looks: not with --once")
    if a.serve and a.seed is not None:
        ap.error("--seed: a served look takes its seed from the request (`look N SEED PATH`)")
    a.blocks = a.blocks or ((9 if a.serve else 25) if gpu else 3)
    return a


class Bench:
    """One bench process: the spec, the tree's module, the shapes and the timers."""

    def __init__(
        self,
        spec: Spec | str | Path,
        a: argparse.Namespace,
        torch: Any,
        gpu: bool,
        clock: PhaseClock,
        tree: str | Path | None = None,
        predrawn: hold.Draws | None = None,
    ) -> None:
        self.a, self.torch, self.gpu, self.clock = a, torch, gpu, clock
        self.predrawn: hold.Draws = {} if predrawn is None else predrawn
        """A --profile run's inputs drawn while it was held (harness/hold.py)."""
        if not isinstance(spec, Spec):  # a bundled kernel's folder
            tree = tree or spec
            spec = spec_from_folder(spec)
        self.spec = spec
        self.tree = Path(tree) if tree is not None else Path.cwd()
        self.ranges = open_ranges(torch, gpu)
        if gpu and self.ranges.why:
            log(f"{spec.name}: no profiler ranges: {self.ranges.why}")
        # the timer's flush (and the spin it looked up) before the tree's code is imported
        self.timing = Timing(torch, gpu, a.block_us, max_reps=1000 if gpu else 50, spin_us=a.spin_us)
        self.reload()
        self.dtypes, self.shapes = chosen_configs(spec, a, gpu)
        self.failed = 0
        self.looked: list[tuple[Case, TimedSets]] = []
        """The last look's cases and timed sets (timed_rows), for `audit`."""
        self.held: dict[str, tuple[TimedSets, Any]] = {}
        """A served tree's timed sets and block timer per config, kept from look to look
        (timed_rows with `keep`) until the tree is loaded again."""
        self.reps: dict[str, int] = {}
        """Per config, the calls per block its timer chose, where they are the bytes rule's
        (calibrated alone in a look, `_calibrated`, or at its first prepare, `_first_capture`;
        `prepare_look` captures with them), until the tree is loaded again."""
        self.first_tried: set[str] = set()
        """Configs `_first_capture` tried since the tree was loaded (once each)."""

    @property
    def contract(self) -> Spec:
        """The spec (the name the bundled kernels' callers knew it by)."""
        return self.spec

    def reload(self) -> None:
        """(Re)import the tree's function: a bundled solution reads its params.json again."""
        self.mod = load_solution(self.spec, self.tree, "this", self.a.which)
        self.held = {}  # timers of the functions imported before (their graphs stay in LIVE_GRAPHS)
        self.reps = {}
        self.first_tried = set()

    def cases(
        self, base_seed: int, *, reference: bool = True, look: bool = False, host: bool = False
    ) -> Iterator[Case]:
        """Every shape and dtype: fresh inputs from consecutive seeds, or with `look` from
        the look's seed and each config's key (Case)."""
        for i, shape in enumerate(self.shapes):
            for j, dtype in enumerate(self.dtypes):
                self.clock.lap("timing")  # the previous case's timed blocks
                yield Case(
                    self.torch,
                    self.spec,
                    None,
                    shape,
                    dtype,
                    base_seed if look else case_seed(base_seed, i, j, len(self.dtypes)),
                    self.gpu,
                    self.ranges,
                    reference=reference,
                    look=look,
                    host=host,
                    predrawn=self.predrawn,
                )

    def once_rows(self, base_seed: int) -> list[dict[str, Any]]:
        """--once: per case the contract check alone, nothing timed."""
        rows = []
        for case in self.cases(base_seed):
            err, why = case.check(self.mod)
            self.clock.lap("check")  # inputs, the reference, the solution (its JIT compile the first time)
            if why:
                self.failed += 1
                log(f"{self.spec.name} {case.shape.name} {case.cols.get('dtype', '')}: FAILS contract: {why}")
            case.ref = None  # checked: the fp64 reference need not outlive the check
            rows.append({**case.cols, "err": err, "prod": prod(case)})
        return rows

    def profile_rows(self, base_seed: int) -> list[dict[str, Any]]:
        """--profile: per case, the tree's function called `profile_calls_for(case.key)` times
        (PROFILE_CALLS unless kopt asks for more) inside the case's range (allocating its own output, as the
        contract check's second call does), each call on inputs of its own (`profile_inputs`);
        no reference, no comparison. Where kopt asks (KOPT_PROFILE_OUTPUTS), every call's
        outputs are summarised, so that a tree which computes once and hands the result back
        on the later calls (the profiler then sees a fraction of the work) is told apart. A
        call that raises is logged and its row's err is inf."""
        rows: list[dict[str, Any]] = []
        where = os.environ.get(PROFILE_OUTPUTS_ENV, "")
        later = ProfileEntries(self.torch)
        warm = bool(os.environ.get(PROFILE_WARM_ENV))  # drawn on the GPU: a warm-up's inputs only need their shapes
        cases = self.cases(base_seed, reference=False, host=not warm)
        while True:
            t0 = time.perf_counter()
            case = next(cases, None)  # its first call's inputs drawn here
            if case is None:
                break
            spent = {"inputs": time.perf_counter() - t0, "calls": 0.0, "outputs": 0.0}
            launched = 0.0  # of the calls' seconds, until each call returned (the rest: the wait for the GPU)
            calls = profile_calls_for(case.key, input_bytes=case.input_bytes if case.gpu else None)
            err = math.nan
            try:
                ranged = self.ranges.around(case.function(self.mod), case.range)
                rng, _ = audit_set(base_seed, case.key, 1)
                outputs: list[Future[dict[str, Any]]] = []
                for k in range(calls):
                    t0 = time.perf_counter()
                    args, kwargs = profile_inputs(case, k)
                    t1 = time.perf_counter()
                    result = ranged(*args, **kwargs)
                    launched += time.perf_counter() - t1
                    if self.gpu:
                        self.torch.cuda.synchronize()
                    t2 = time.perf_counter()
                    if where:  # copied to the host at once: twelve calls' outputs never held together
                        outputs += later.summaries.add(output_tensors(result), rng)
                    del args, kwargs, result
                    t3 = time.perf_counter()
                    spent["inputs"] += t1 - t0
                    spent["calls"] += t2 - t1
                    spent["outputs"] += t3 - t2
                if where:
                    later.add(case.cols, case.atol, case.rtol, outputs, calls)
            except Exception as exc:  # a broken candidate: its row says so, the profile goes on
                log(f"{self.spec.name} {case.shape.name} {case.cols.get('dtype', '')}: {type(exc).__name__}: {exc}")
                err = math.inf
            rows.append({**case.cols, "err": err, "prod": prod(case)})
            self.clock.lap("profile")
            log(
                f"profile {case.shape.name} {case.cols.get('dtype', '')}: "
                + ", ".join(f"{k} {v:.2f} s" for k, v in spent.items())
                + f" (returned {launched:.2f} s, {hold.idle_threads()})"
            )
        entries = later.entries()
        self.clock.lap("summaries")
        if where:
            write_profile_outputs(entries)
        return rows

    def timed_rows(
        self, seed: int, *, copy: bool = True, keep: bool = False, prepared: list[Prepared] | None = None
    ) -> list[dict[str, Any]]:
        """One tree, one look of `seed` (a plain run or a served look): per case, the
        contract check on inputs of its own, then the timed blocks over buffer sets drawn
        from the seed (sets.TimedSets: never the check's inputs, no reference computed for
        them, refreshed before the last block), its statistics over blocks beside a same-size
        copy's (none when the spec says nothing of the bytes a call moves, or without `copy`:
        a served look, whose copy columns kopt never reads; they are NaN then), and `calls`,
        the timed calls the row's `us` is the per-call time of. The sets are kept in
        `self.looked` (until the next look) for `audit`.

        `keep` (a served tree): each config's sets and block timer are made at the process's
        first look and kept (`self.held`); a later look draws its seed's inputs into the same
        buffers (TimedSets.reseed) and replays the CUDA graph captured on them. A look then
        costs its check and its blocks only: on the H100 the capture (a new graph per config
        and look) took 0.9-1.0 s of a 4 s look, and each look's new buffers grew the process
        until it had to leave (docs/h100-wave3/part1-first-per-tree-run.md). Each look's
        `calls` is the same as at the first.

        `prepared` (a served look that `prepare_look` made ready, serve.py's `prepare`): the
        checks, draws and captures are done; only the blocks run here.

        Without `copy` (a served look) each row also reports LAST (`us_last`), the block after
        the refresh; the plain run's CSV keeps the columns `kopt init` knows (LAST says why)."""
        rows = []
        self.looked = []
        if prepared is None:
            for case in self.cases(seed, look=True):
                rows.append(self._time_case(self._prepare_case(case, seed, keep=keep, isolated=True), seed, copy))
            return rows
        for ready in prepared:
            if ready.t is None and ready.timeable:  # no calibration yet in this process: made here, alone
                ready.t = self.tree_timer(ready.case, ready.sets, ready.where)
                self.clock.lap("capture")
                self._calibrated(ready)
                ready.warm = False
            rows.append(self._time_case(ready, seed, copy))
        return rows

    prepares = True
    """`prepare_look` works here (serve.py's `prepare`; a subclass whose looks are whole: False)."""

    def prepare_look(self, seed: int) -> list[Prepared]:
        """Everything of a look of `seed` but its timed blocks (serve.py's `prepare`): per case
        the contract check, the timed sets' draw and its block timer: with the calls per block
        this process found for the config before (the bytes rule's: `_calibrated`), or, the
        first time, calibrated here and kept only at the bytes rule's count (`_first_capture`).
        No timing runs here, so kopt may prepare both trees' processes at once: a config whose
        count a calibration chooses is captured in its look, alone on the device (a calibration
        next to the other tree's work would choose fewer calls per block)."""
        ready = [self._prepare_case(case, seed, keep=False, isolated=False) for case in self.cases(seed, look=True)]
        if self.gpu:  # kopt stops this process once it answers and times the other alone: nothing queued may run beside
            self.torch.cuda.synchronize()  # that look (the draws of a config still to be calibrated are asynchronous)
        return ready

    def _prepare_case(self, case: Case, seed: int, *, keep: bool, isolated: bool) -> Prepared:
        """A case's check, its timed sets and its block timer (with `isolated` False: with the
        calls per block this process found before, or `_first_capture`'s)."""
        where = f"{self.spec.name} {case.shape.name} {case.cols.get('dtype', '')}"
        t_check = time.perf_counter()
        err, why = case.check(self.mod)
        self.clock.lap("check")  # inputs, the reference, the solution (its JIT compile the first time)
        if time.perf_counter() - t_check > SLOW_CHECK_S:
            log(f"{where}: check {time.perf_counter() - t_check:.2f} s")
        case.ref = None  # checked: the fp64 reference need not outlive the check
        if why:
            self.failed += 1
            log(f"{where}: FAILS contract: {why}")
        held = self.held.get(case.key) if keep else None
        if held is not None:
            sets, t = held
            sets.reseed(seed)
            self.clock.lap("inputs")  # this look's first draw, into the kept buffers
            return Prepared(case, where, err, sets, t, warm=True)
        sets = TimedSets(case, seed, self.timing.set_count(case.bytes))
        self.clock.lap("inputs")  # the timed sets' first draw
        reps = self.reps.get(case.key)
        if not isolated and reps is None and self.gpu:
            if case.key in self.first_tried:
                return Prepared(case, where, err, sets, None, warm=False)  # captured in the look, alone
            return self._first_capture(case, where, err, sets)
        t = self.tree_timer(case, sets, where) if isolated else self.tree_timer(case, sets, where, reps=reps)
        self.clock.lap("capture")  # the timer's calibration and CUDA graph
        # a capture that failed while both sides prepared (memory, most likely) is tried again in the look, alone
        ready = Prepared(
            case, where, err, sets, t, warm=not isolated and self.gpu, timeable=t is not None or not isolated
        )
        if isolated:
            self._calibrated(ready)
        if keep and t is not None:
            self.held[case.key] = (sets, t)
        return ready

    def _first_capture(self, case: Case, where: str, err: float, sets: TimedSets) -> Prepared:
        """A config at its first `prepare` since the tree was loaded (`first_tried`: once, so a
        config whose count the calibration chooses is not captured twice a look): calibrated and
        captured here, beside the other side's prepare, and kept only where the calibration chose
        the bytes rule's count (timing.byte_launches), which no disturbance short of a call read
        as LONG_BLOCK_US / count moves; else (no bytes known, a count the calibration chose, a
        capture that failed) made in the look, alone. Made in the look, a new process's first timed
        blocks read slower: on the H200 (2026-12-01, the RMSNorm demo's v7 in three runs) the
        candidate's first look read its largest configs 5-8% slower than its later ones and
        best's, a bias its later looks could not average away in twelve."""
        self.first_tried.add(case.key)
        fixed = byte_launches(case.bytes, self.timing.max_reps, sets.count)
        t = self.tree_timer(case, sets, where) if fixed is not None else None
        self.clock.lap("capture")
        if fixed is None or t is None or getattr(t, "reps", None) != fixed:
            return Prepared(case, where, err, sets, None, warm=False)  # captured in the look, alone
        self.reps[case.key] = fixed
        return Prepared(case, where, err, sets, t, warm=True)

    def _calibrated(self, ready: Prepared) -> None:
        """Remember the calls per block a config's timer chose alone (for `prepare_look`) where
        they are the bytes rule's (timing.byte_launches: the same in every process, whatever the
        calibration read). A count the calibration chose is chosen again, alone, in each look:
        one calibration kept for the process's life (best's serves decision after decision) would
        freeze its noise (a 20 µs kernel read 20-50 µs, H100), or a slowdown by work the other
        side left queued on the device (SIGSTOP stops its threads, not its kernels), into every
        later look's calls per block, where before it moved one look."""
        ready.timeable = ready.t is not None
        reps = getattr(ready.t, "reps", None)
        fixed = byte_launches(ready.case.bytes, self.timing.max_reps, ready.sets.count)
        if isinstance(reps, int) and reps == fixed:
            self.reps[ready.case.key] = reps
        else:
            self.reps.pop(ready.case.key, None)

    def _time_case(self, ready: Prepared, seed: int, copy: bool) -> dict[str, Any]:
        """A prepared case's timed blocks and its row."""
        nan = math.nan
        case, sets, t, err, where = ready.case, ready.sets, ready.t, ready.err, ready.where
        self.looked.append((case, sets))
        t0 = time.perf_counter()
        copy_t = self.timing.timer(case.copy_calls, case.bytes) if copy and case.bytes > 0 else None
        ks, cs = [], []
        launches = 0  # the timed blocks' launches (`calls`)
        warm = self.a.warm_blocks if ready.warm else 0  # a new timer ran its own; a kept or prepared one, long before
        blocks, block = self.a.blocks, -warm
        while block < blocks:  # the kernel's launches in the case's range; the copy's outside
            if block == blocks - 1:
                self.clock.lap("timing")
                sets.refresh()  # the last block computes on inputs no earlier call saw
                self.clock.lap("inputs")
            if t is not None:
                try:
                    timer = self.last_block_timer(case, sets, t) if block == blocks - 1 else t
                    us_block = timer.block()
                    if block >= 0:  # --warm-blocks: untimed, raising as a timed block would
                        ks.append(us_block)
                        launches += timer.reps
                    if block == 0 and self.timing.gpu:  # a long block: fewer of them (timing.look_blocks)
                        blocks = look_blocks(blocks, us_block * t.reps)
                except Exception as exc:  # a candidate whose timed call raises fails its row
                    log(f"{where}: FAILS: a timed call raised {type(exc).__name__}: {exc}")
                    err, t, ks = math.inf, None, []
                    self.held.pop(case.key, None)
                    self.reps.pop(case.key, None)
            if copy_t is not None and block >= 0:
                cs.append(copy_t.block())
            block += 1
        st = summarize(ks) if ks else dict.fromkeys(("median", "mean", "std", "min", "p10", "p90"), nan)
        cu = summarize(cs)["median"] if cs else nan
        us = st["median"]
        gbps = case.bytes / us / 1e3 if case.bytes > 0 else nan
        row = {
            **case.cols,
            "us": us,
            "err": err,
            "calls": launches if t is not None else 0,
            **block_stats(st, ks, copy),
            "gbps": gbps,
            "copy_us": cu,
            "copy_gbps": case.bytes / cu / 1e3 if cs else nan,
            "pct_copy": 100.0 * cu / us if cs else nan,
            "prod": prod(case),
            "seed": seed,
            "model": case.shape.model.replace(",", ";"),
        }
        log(
            f"{self.spec.name} {case.shape.name:24s} {case.cols.get('dtype', ''):9s} {us:10.3f} us  "
            + (f"{gbps:8.1f} GB/s  {100.0 * cu / us:5.1f}% of copy  " if cs else "")
            + f"err {err:.3g}  ({len(ks)} blocks x {t.reps if t is not None else 0} calls: "
            f"{time.perf_counter() - t0:.3f} s)"
        )
        return row

    def last_block_timer(self, case: Case, sets: TimedSets, t: Any) -> Any:
        """The timer of a config's last timed block (after `sets.refresh`): `t` itself where
        its blocks call each set once (the CPU's, and a GPU's whose launches are as many as
        the sets); else, on a GPU, Timing.last_timer's one call per set: a block of `t` calls
        each set reps/sets times, and a kernel that skips the work once its output holds a
        result would compute only the first (the block kopt audits would be cheap too)."""
        if t is None or not self.timing.gpu or t.reps <= sets.count:
            return t
        span = functools.partial(self.ranges.span, case.range)
        return self.timing.last_timer(sets.calls(case.function(self.mod)), isinstance(t, GraphTimer), span)

    def tree_timer(self, case: Case, sets: TimedSets, where: str, reps: int | None = None) -> Any:
        """The block timer of the tree's function over `sets` (None, logged: it cannot be timed);
        `reps`: its calls per block, no calibration (a GPU's)."""
        try:
            fn = case.function(self.mod)
            return self.timing.sets_timer(
                sets.calls(fn),
                case.bytes,
                graph=self.spec.graph,
                span=functools.partial(self.ranges.span, case.range),
                reps=reps,
            )
        except Exception as exc:
            log(f"{where}: cannot be timed: {type(exc).__name__}: {exc}")
            return None

    def audit(self, seed: int) -> dict[str, Any]:
        """The audit of the last look (audit.py's rule and summary): per config, the set the
        audit seed picks and its outputs' summaries, as the JSON `audit N SEED PATH` writes."""
        configs = []
        for case, sets in self.looked:
            rng, i = audit_set(seed, sets.key, sets.count)
            outputs = [summarise(self.torch, t, audit_positions(rng, int(t.numel()))) for t in sets.outputs(i)]
            configs.append(
                {
                    "config": dict(case.cols),
                    "sets": sets.count,
                    "set": i,
                    "atol": case.atol,
                    "rtol": case.rtol,
                    "outputs": outputs,
                }
            )
        return {"version": VERSION, "configs": configs}

    def commitment(self) -> dict[str, Any]:
        """The last look's promise (audit.py): every timed set's output summaries, per config,
        as the JSON `look N SEED PATH` writes to PATH.sets.json before kopt draws the audit seed."""
        return {
            "version": VERSION,
            "configs": [
                {
                    "config": dict(case.cols),
                    "sets": summarise_sets(self.torch, [sets.outputs(i) for i in range(sets.count)]),
                }
                for case, sets in self.looked
            ],
        }

    def release_cache(self) -> None:
        """After a look (`--release`): the allocator's cached blocks (the check's fp64
        temporaries: 18.6 GB a look for the RMSNorm's largest shape) are given back to the
        driver only when the device could not otherwise hold another process's look like this
        one (`auto`: free memory below RELEASE_HEADROOM x this process's peak), and the
        process then waits RELEASE_SETTLE_S before it replies. The driver's work on memory
        given back slows whatever the device runs next: on the H200 the other side's first
        configs, measured right after, read 9.3-9.9% slower at every look; with the blocks
        kept 0.81% at most, 0.39% after a 0.1 s pause (experiments/position_effect.py,
        docs/h100-wave3/part5-position-effect-h200.md). `look`: always give them back (the former default), `never`."""
        if not self.gpu or self.a.release == "never":
            return
        torch = self.torch
        held = torch.cuda.memory_reserved()
        if self.a.release == "auto":
            free, _ = torch.cuda.mem_get_info()
            if free >= RELEASE_HEADROOM * torch.cuda.max_memory_reserved():
                return
        torch.cuda.empty_cache()
        log(f"released {(held - torch.cuda.memory_reserved()) / 1e9:.2f} GB of cached blocks")
        time.sleep(RELEASE_SETTLE_S)

    def memory_full(self, share: float) -> bool:
        """The tensors this process keeps (earlier looks' buffers, held by their graphs) take
        more than `share` of the GPU's memory, or (after `release_cache`) the device has less
        free than the next look may need: max(FREE_MIN_SHARE of it, RELEASE_HEADROOM x this
        process's peak). The second counts what `memory_allocated` does not: the private pools
        of the CUDA graphs kept alive (timing.LIVE_GRAPHS) and the other side's process.
        Measured on the H200 (2026-11-30): best's process serving Triton's layer-norm tutorial
        by import held 72.8 GiB after 28 looks while its allocated tensors stayed under the
        share, and its next look ran out of memory (23 MiB free)."""
        if not self.gpu:
            return False
        cuda = self.torch.cuda
        total = cuda.get_device_properties(0).total_memory
        if cuda.memory_allocated() > share * total:
            return True
        free, _ = cuda.mem_get_info()
        return free < max(FREE_MIN_SHARE * total, RELEASE_HEADROOM * cuda.max_memory_allocated())


def block_stats(st: dict[str, float], ks: list[float], copy: bool) -> dict[str, Any]:
    """A row's statistics over its timed blocks (`summarize`'s `st` of the blocks `ks`), and
    without `copy` (a served look) LAST, the last block's alone (the block after the refresh)."""
    return {
        "us_mean": st["mean"],
        "us_std": st["std"],
        "us_min": st["min"],
        "us_p10": st["p10"],
        "us_p90": st["p90"],
        **({} if copy else {LAST: ks[-1] if ks else math.nan}),
        "samples": len(ks),
    }


def prod(case: Case) -> int:
    """1 for this machine's production shapes (the CPU's small shapes stand in for them)."""
    return int(case.shape.kind in (PRODUCTION, SMALL))


def new_seed() -> int:
    return random.SystemRandom().randrange(1 << 31)


def run_seed(a: argparse.Namespace) -> int:
    """The run's inputs' base seed: --seed, else a fresh one; a profile's, KOPT_PROFILE_SEED first."""
    seed = new_seed() if a.seed is None else a.seed
    return profile_seed(seed) if a.profile else seed


def held(spec: Spec | str | Path, a: argparse.Namespace, clock: PhaseClock) -> tuple[int, Spec, hold.Draws]:
    """A --profile run's work while held (harness/hold.py): torch imported (no CUDA context: no
    stream, no device call), the spec read (the contract, never the tree's solution), and the
    host's draws of its inputs (`profile_draws`) made on HOLD_THREADS threads. Returns the run's
    seed, the spec and the draws, for the run after `go`."""
    import torch

    seed = run_seed(a)
    if not isinstance(spec, Spec):  # a bundled kernel's folder: its contract, from source (loader.load_module)
        spec = spec_from_folder(spec, bytecode=False)
    clock.lap("torch")
    if not torch.cuda.is_available():  # the driver asked, no context made: without a GPU nothing is drawn on the host
        return seed, spec, {}
    threads = torch.get_num_threads()
    torch.set_num_threads(min(threads, hold.HOLD_THREADS))
    try:
        drawn = hold.predraw(profile_draws(torch, spec, a, seed, gpu=True))
    finally:
        torch.set_num_threads(threads)
    clock.lap("inputs")
    mb = sum(hold.nbytes(*inputs) for inputs in drawn.values()) / 1e6
    log(f"profile held: {mb:.0f} MB of inputs drawn on the host ({len(drawn)} calls)")
    return seed, spec, drawn


def why(exc: BaseException) -> str:
    """An exception as one short line for a `fail` reply."""
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}".rstrip()


def main(spec: Spec | str | Path, argv: list[str] | None = None, *, tree: str | Path | None = None) -> int:
    """The bench's command line (parse_args) on `spec` (a Spec, or a bundled kernel's
    folder); `tree` is where the function is found (default: the folder given,
    else the working directory, where kopt runs the bench). Returns the exit status."""
    clock = PhaseClock()
    go = hold.hold_file()
    seed: int | None = None
    drawn: hold.Draws = {}
    if go is not None and parse_args(argv, True).profile:
        if not isinstance(spec, Spec):
            tree = tree or spec  # the bundled kernel's folder is its tree too (Bench)
        early = parse_args(argv, True)
        work = functools.partial(held, spec, early, clock)
        told_go, (seed, spec, drawn) = hold.hold_until_go(go, Path(early.tree or tree or Path.cwd()), work)
        if not told_go:
            log(f"profile held and stopped: {clock.line()}")
            return 0
        clock.lap("held")
    torch, gpu = setup_device()
    clock.lap("torch")  # its import and the driver's
    a = parse_args(argv, gpu)
    bench = Bench(spec, a, torch, gpu, clock, a.tree or tree, predrawn=drawn)
    clock.lap("setup")  # the CUDA context, the contract and the tree's module
    if not gpu:
        log(f"{bench.spec.name}: no GPU: the Triton interpreter on the CPU; timings are CPU timings")
    if a.serve:
        from .serve import serve_tree

        log("serving: " + clock.line())  # what a served process's start cost, before its first look

        def reply(msg: str) -> None:
            sys.stdout.write(msg + "\n")
            sys.stdout.flush()

        return serve_tree(bench, sys.stdin, reply)
    if seed is None:
        seed = run_seed(a)
    rows = bench.profile_rows(seed) if a.profile else bench.once_rows(seed) if a.once else bench.timed_rows(seed)
    clock.lap("timing")
    if a.profile and os.environ.get(PROFILE_WARM_ENV):
        log(f"a profile's warm-up (its kernels compiled, nothing written): {clock.line()}")
        return 0
    write_csv(rows, a.out)
    log(clock.line())
    if bench.failed:
        log(f"{bench.spec.name}: {bench.failed} contract failure(s)")
    return 0
