"""Serve what kopt can import: a `triton.testing.perf_report` bench timed by kopt's own timer,
answering kopt's served protocol (harness/serve.py) from one confined process per tree.

    python -m kopt_supervisor.kernels.harness.imported BENCH.py --line triton           # one look: CSV on stdout
    python -m kopt_supervisor.kernels.harness.imported BENCH.py --line triton --serve   # kopt's [target].serve
    python -m kopt_supervisor.kernels.harness.imported BENCH.py --probe                 # what `kopt init` reads
    python -m kopt_supervisor.kernels.harness.imported BENCH.py --line triton --profile # [profile].command

The process runs in the tree (kopt's working directory) and imports BENCH.py once (again on
`load`), as a module of its own name with the script's folder first on sys.path: its
`if __name__ == "__main__":` block does not run, and a `Mark.run(...)` it calls at import (the
Triton tutorials run their benchmark at module level) is recorded, not run. What the module runs
at import otherwise runs: a tutorial's own correctness test (`test_layer_norm(...)`) is the
bench's own check, and one that fails fails the import (every look then fails). The
perf_report-decorated functions are the `Mark` objects the module ran, else those among its
globals; each `Benchmark` gives one config per x value (x_names' values) and line value of the
tree's own kernel (`--line`, a line value or line name; kopt init names the line not named as
a reference: engine/onboard, the rule the perf_report adapter's metric choice uses). The CSV's
config columns: `benchmark` (the plot name, only when there are several), the x_names, the
line_arg, and the benchmark's fixed `args` that are numbers, text or dtypes.

A script with no Mark may follow Liger-Kernel's convention instead (liger_convention.py): its
`__main__` block's `run_benchmarks(metric_name="speed", ...)` calls, recorded (not run) when it
runs as `__main__`, give one config per extra config x operation mode x provider (`--line`
picks among kernel_providers) x x value; columns `kernel_operation_mode`, the x_name,
`kernel_provider` and the extra config's numbers, text and dtypes (`benchmark`: the kernel_name,
when there are several calls). A script of neither convention fails in one line naming both.

A look (`look N SEED PATH`, or a plain run with a fresh seed) per config: S buffer sets, set j
drawn by calling the benchmark function once after seeding torch (every device), `random` and
numpy with audit.input_seed(SEED, config, "set<j>/prime"), with `triton.testing.do_bench` and
`do_bench_cudagraph` replaced for that call by a capture (in triton.testing, and where the
bench's globals hold them under another name): the callable the bench passes (and its
`grad_to_none` tensors) is recorded, not run, and the bench gets a placeholder time back.
Whatever the function returns (its GB/s, its own timing) is never read. kopt then times the
captured callables with its own block timer (bench.Timing: on a GPU CUDA graphs, or CUDA events
where a graph cannot capture, the L2 flushed before each block; on the CPU the process's CPU
time under Triton's interpreter), the sets rotating; several do_bench calls in one benchmark
call are timed as one call, in order. Every block but the last runs on those sets. Before the
last, the first draw is let go and S sets are drawn again, set j from "set<j>" (seeds no
earlier call saw: the two draws harness/sets.py makes), and the last block runs on them with
a timer of its own that calls none of them before it and each of them once (bench.Timing's
`last_timer`: on the CPU one call per set; on a GPU one CUDA graph of one call per set,
captured cold and replayed once, timing.ColdGraphTimer: a kernel that skips the work once its
output holds a result finds none at any launch); its outputs are the ones checked, committed
and audited. That costs a look S more calls of the benchmark function per config and, on a GPU, a
capture of S calls (the first draw is freed before: the peak memory stays); the GPU path has
not yet run on a GPU (tested on the CPU only). `us` is the median over blocks of µs per call, `calls` the timed calls (the last
block's included), `err` 0, or inf when the function raised, called no do_bench, or its
last block's outputs hold NaN/Inf; a served look also reports `us_last` (bench.LAST), the
last block's µs per call, which kopt weighs against `us` (plausible.last_block_not_faster),
and a plain run does not (bench.LAST says why). Each set's outputs are what its last timed
call left: the tensors the callable returned, and the `.grad` of its `grad_to_none` tensors
(reset before every call, as do_bench does); a callable that returns none and names no
grad_to_none has its closure's tensors (inputs included) summarised instead. PATH.sets.json
commits to every set's outputs (the last block's S sets: the same count in both trees)
and `audit N SEED PATH` summarises the set the audit seed picks (audit.py), with a tolerance
per the outputs' dtype (TOLERANCE; --atol/--rtol): kopt compares them with best's.

What this path sees, and what it does not (docs/byo-kernel.md, "Served by import"):
- inputs: one input set per call of the benchmark function, drawn by the bench's own code
  after kopt seeds the global generators; several sets are several calls (on the CPU
  bench.CPU_SETS, on a GPU enough for 2 x L2 of the tensors the callable's closure holds).
  kopt cannot redraw into the same buffers as its harness does (harness/sets.py), so it draws
  new sets for the last block instead: a kernel that keeps its result per input (by pointer,
  by content, by counting calls) is cheap in the other blocks and pays in the last, whose
  outputs are the ones audited, and `us_last` shows it (tests/served_import/
  test_last_block_imported.py). The last block calls each set once, on the CPU and on a GPU
  (its graph, captured cold, replayed once; eager launches where it cannot capture): a cache
  in Python answers at the capture, cold, and a kernel that skips work on the device (testing
  its output or a flag it wrote) finds nothing done at any launch. What this does not close:
  the benchmark function is the bench's code (the candidate's, where the kernel shares its file): one that
  computes the timed call's result when it draws the inputs (a cache the callable then
  returns) makes every block cheap, the last included; the work stays in the look (the OS's
  accounting of the process sees it on the CPU), outside the timed blocks.
- correctness: the bench's own check where it has one (at import), and kopt's comparison of
  the last block's outputs with best's on the same inputs, outside both processes. Tensors the
  callable writes but neither returns nor names in grad_to_none (the tutorial's weight and
  bias gradients, which accumulate from call to call) are not compared.
- a benchmark function that draws inputs from a generator of its own (not the global ones)
  draws the same inputs in every look: the audit then compares the same inputs each time.
- a bench that times with anything else than do_bench/do_bench_cudagraph (its own events,
  time.perf_counter) has no callable to capture: every config fails, and `kopt init` keeps
  the process-level path and says why (the probe).

`--probe` imports the bench and, per benchmark and line, captures the first config's callable
and calls it once: one JSON document on stdout (PROBE_VERSION; the benchmarks, lines, config
columns, what failed and why). The bench's own prints go to stderr in every mode: stdout holds
the protocol's replies, the CSV or the probe's JSON only.

Imports torch and triton only when run (triton after TRITON_INTERPRET=1 is set without a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from . import bench as bench_mod
from . import hold
from . import liger_convention as liger
from .audit import (
    VERSION,
    audit_positions,
    audit_set,
    input_seed,
    output_tensors,
    summarise,
    summarise_sets,
)
from .bench import LAST, Bench, PhaseClock, Prepared, Timing, block_stats, log, new_seed, why, write_csv
from .loader import load_module
from .params import config_key
from .ranges import open_ranges, range_name
from .timing import LIVE_GRAPHS, GraphTimer, capturing, summarize

MODULE = "kopt_supervisor.kernels.harness.imported"
"""How kopt's commands run this module (`python -m MODULE ...`)."""
PROBE_VERSION = 1
PLACEHOLDER_MS = 1.0
"""What a captured do_bench returns to the bench (it is never read)."""
RESERVED = ("us", "err", "calls", "us_mean", "us_std", "us_min", "us_p10", "us_p90", LAST, "samples", "seed")
"""The CSV's columns beside the config (LAST in served looks only): a config column of one of
these names is refused."""
IMPORTED_PROFILE_CALLS = 2
"""--profile: each config's calls unless kopt asks for more: two, where kopt's own harness calls
four (bench.PROFILE_CALLS). A call here runs the bench's whole benchmark function, whose other
launches (torch's own kernels beside the tree's) are all profiled: the Triton layer-norm
tutorial's profile at two calls was 972 launches, 130 s under ncu on the H200
(docs/h100-wave3/part11-wild-first-keep-h200.md), and four would double it. A small claim is
then profiled again closer, at the claimed classes' configs only."""
PRIME = "/prime"
"""The first draw's seed purposes end in this (`set<j>/prime`, the sets every block but the last
runs on); the last block's sets are `set<j>`: the names harness/sets.py gives its two draws."""
TOLERANCE = {
    "float64": (1e-8, 1e-8),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1.6e-2),
    "float8_e4m3fn": (1e-1, 1.25e-1),
    "float8_e5m2": (1e-1, 2.5e-1),
}
"""Audit tolerance (atol, rtol) by the outputs' least precise floating dtype: float16's is the
Triton layer-norm tutorial's own check (1e-2), bfloat16's the bundled RMSNorm's. Integer and
bool outputs compare exactly; another dtype takes float32's."""


class ImportedError(Exception):
    """The bench cannot be served by import (one line: the file, what is wrong)."""


# -- the capture --------------------------------------------------------------------------------


@dataclass
class Captured:
    """One callable a benchmark function handed to do_bench."""

    fn: Callable[[], Any]
    grads: list[Any]
    """Its grad_to_none tensors: their .grad is reset before each call and read as an output."""


def _placeholder(quantiles: Any, return_mode: str) -> Any:
    if quantiles is not None:
        return [PLACEHOLDER_MS] * len(list(quantiles))
    return [PLACEHOLDER_MS] if return_mode == "all" else PLACEHOLDER_MS


class Capture:
    """Stands in for do_bench and do_bench_cudagraph while a benchmark function runs."""

    def __init__(self) -> None:
        self.captured: list[Captured] = []

    def do_bench(
        self,
        fn: Callable[[], Any],
        warmup: Any = 25,
        rep: Any = 100,
        grad_to_none: Any = None,
        quantiles: Any = None,
        return_mode: str = "mean",
        **_: Any,
    ) -> Any:
        self.captured.append(Captured(fn, list(grad_to_none or [])))
        return _placeholder(quantiles, return_mode)

    def do_bench_cudagraph(
        self,
        fn: Callable[[], Any],
        rep: Any = 20,
        grad_to_none: Any = None,
        quantiles: Any = None,
        return_mode: str = "mean",
        **_: Any,
    ) -> Any:
        self.captured.append(Captured(fn, list(grad_to_none or [])))
        return _placeholder(quantiles, return_mode)

    @contextlib.contextmanager
    def installed(self, testing: ModuleType, *scopes: dict[str, Any] | None) -> Iterator[None]:
        """triton.testing's do_bench and do_bench_cudagraph are this capture's, and so is every
        name of each of `scopes` (the bench's globals) bound to what they were; afterwards each
        is put back unless the bench rebound it meanwhile."""
        names = {"do_bench": self.do_bench, "do_bench_cudagraph": self.do_bench_cudagraph}
        before = {name: getattr(testing, name, None) for name in names}
        swaps: list[tuple[Any, str, Any, Any]] = []
        for name, mine in names.items():
            swaps.append((testing, name, before[name], mine))
            for scope in scopes:
                for key, value in list((scope or {}).items()):
                    if value is not None and value is before[name]:
                        swaps.append((scope, key, value, mine))
        for where, name, _old, mine in swaps:
            _set(where, name, mine)
        try:
            yield
        finally:
            for where, name, old, mine in swaps:
                if _get(where, name) is mine:
                    _set(where, name, old)


def _set(where: Any, name: str, value: Any) -> None:
    if isinstance(where, dict):
        where[name] = value
    else:
        setattr(where, name, value)


def _get(where: Any, name: str) -> Any:
    return where.get(name) if isinstance(where, dict) else getattr(where, name, None)


class TimedSet:
    """One buffer set: the callables one benchmark call captured, called in order as one timed
    call; what each returned is kept until its next call (as bench.kept_outputs does)."""

    def __init__(self, captured: list[Captured]) -> None:
        self.captured = captured
        self.kept: list[Any] = [None] * len(captured)

    def __call__(self) -> None:
        for i, c in enumerate(self.captured):
            for t in c.grads:
                t.grad = None
            self.kept[i] = None
            self.kept[i] = c.fn()

    def outputs(self) -> list[Any]:
        """The tensors the last call left (see the module docstring)."""
        out: list[Any] = []
        for c, result in zip(self.captured, self.kept, strict=True):
            out += output_tensors(result)
            out += [t.grad for t in c.grads if getattr(t, "grad", None) is not None]
        if not out:
            out = [t for c in self.captured for t in closure_tensors(c.fn)]
        return out

    def nbytes(self) -> int:
        """The bytes of the distinct tensors the callables' closures hold (their inputs, mostly)."""
        seen: dict[tuple[Any, int], int] = {}
        for c in self.captured:
            for t in closure_tensors(c.fn):
                seen[(t.device, t.data_ptr())] = max(
                    seen.get((t.device, t.data_ptr()), 0), t.numel() * t.element_size()
                )
        return sum(seen.values())


def closure_tensors(fn: Any, depth: int = 2) -> list[Any]:
    """The tensors a callable's closure holds: its cells' values, a functools.partial's
    arguments, a bound method's object, and the same of the functions among them (`depth`
    levels down); in order, each once."""
    found: dict[int, Any] = {}

    def visit(obj: Any, level: int) -> None:
        if hasattr(obj, "detach") and hasattr(obj, "numel") and hasattr(obj, "data_ptr"):
            found.setdefault(id(obj), obj)
            return
        if level < 0:
            return
        if isinstance(obj, functools.partial):
            for v in (obj.func, *obj.args, *obj.keywords.values()):
                visit(v, level - 1)
        elif isinstance(obj, list | tuple):
            for v in obj:
                visit(v, level)
        elif callable(obj):
            for cell in getattr(obj, "__closure__", None) or ():
                try:
                    visit(cell.cell_contents, level - 1)
                except ValueError:  # an empty cell
                    continue
            owner = getattr(obj, "__self__", None)
            if owner is not None and not isinstance(owner, ModuleType):
                visit(owner, level - 1)

    visit(fn, depth)
    return list(found.values())


# -- the bench's configs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One benchmark call: the function, its keyword arguments, the CSV's config columns."""

    fn: Callable[..., Any]
    kwargs: dict[str, Any]
    cols: dict[str, Any]
    key: str
    scopes: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    """The globals where the bench may hold do_bench under a name of its own (default: fn's)."""


@dataclass
class Imported:
    """The bench module and its perf_report marks (the ones it ran at import first), or, with
    none, the speed calls of Liger's run_benchmarks its `__main__` block made (liger_convention)."""

    module: ModuleType
    marks: list[Any]
    testing: ModuleType
    ran: bool
    """The marks are those the module ran at import (else: found among its globals); the runs
    are always recorded ones."""
    runs: list[liger.Run] = field(default_factory=list)


def column_value(v: Any) -> Any:
    """A value as a CSV config cell: numbers as they are, a dtype by its name, text without
    the commas a config key and the CSV would split on."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float):
        return v
    text = str(v)
    if text.startswith("torch."):
        text = text.removeprefix("torch.")
    return text.replace(",", ";").replace("\n", " ")


def _scalar(v: Any) -> bool:
    return isinstance(v, bool | int | float | str) or type(v).__name__ == "dtype"


def benchmarks(marks: Sequence[Any]) -> list[tuple[Any, Any]]:
    """(mark, Benchmark) pairs in order."""
    out = []
    for mark in marks:
        b = mark.benchmarks
        out += [(mark, x) for x in (b if isinstance(b, list | tuple) else [b])]
    return out


def pick_lines(b: Any, lines: Sequence[str], where: str) -> list[Any]:
    """The line values of `b` that `lines` name (a line value or a line name); with none named,
    the only line there is."""
    vals, names = list(b.line_vals), list(getattr(b, "line_names", None) or [])
    if not lines:
        if len(vals) == 1:
            return vals
        raise ImportedError(
            f"{where}: {len(vals)} lines ({', '.join(map(str, vals))}): name the kernel's with "
            "--line (kopt init names the one that is not a reference)"
        )
    chosen = []
    for i, v in enumerate(vals):
        if str(v) in lines or (i < len(names) and str(names[i]) in lines):
            chosen.append(v)
    if not chosen:
        raise ImportedError(
            f"{where}: --line {', '.join(lines)} names no line (values: "
            f"{', '.join(map(str, vals))}; names: {', '.join(map(str, names)) or 'none'})"
        )
    return chosen


def config_cols(
    plot_name: Any, named: dict[str, Any], fixed: dict[str, Any], several: bool, where: str
) -> dict[str, Any]:
    """A config's CSV columns: `benchmark` (the plot name, when there are several), the `named`
    values (x names and line; a perf_report's, or a Liger run's mode, x and provider), then the
    `fixed` arguments that are numbers, text or dtypes."""
    for name in named:
        if name in RESERVED or (several and name == "benchmark"):
            raise ImportedError(f"{where}: the argument {name!r} has the name of a column kopt writes")
    cols: dict[str, Any] = {"benchmark": column_value(plot_name)} if several else {}
    cols.update({n: column_value(v) for n, v in named.items()})
    cols.update({k: column_value(v) for k, v in fixed.items() if _scalar(v) and k not in cols and k not in RESERVED})
    return cols


def make_config(mark: Any, b: Any, x: Any, line: Any, several: bool, where: str) -> Config:
    """The config of x value `x` and line value `line` of benchmark `b` (of `mark`)."""
    x_names = list(b.x_names)
    xs = list(x) if isinstance(x, list | tuple) else [x] * len(x_names)
    if len(xs) != len(x_names):
        raise ImportedError(f"{where}: x value {x!r} has {len(xs)} values for x_names {x_names}")
    named = {**dict(zip(x_names, xs, strict=True)), b.line_arg: line}
    cols = config_cols(b.plot_name, named, dict(b.args), several, where)
    return Config(mark.fn, {**named, **dict(b.args)}, cols, config_key(cols))


def run_config(run: liger.Run, point: liger.Point, several: bool, where: str) -> Config:
    """The config of one call of a recorded Liger run (liger_convention.points)."""
    cols = config_cols(run.plot_name, point.named, point.extra, several, where)
    return Config(point.fn, {}, cols, config_key(cols), run.scopes)


def each_config(imp: Imported, lines: Sequence[str], where: str) -> list[tuple[Config, str]]:
    """(config, where) of every config in order: per perf_report benchmark its chosen lines x
    its x values; per recorded Liger run (liger_convention.points) its extra configs x modes x
    chosen providers x x values. A list, not a generator (kopt's diff scan reads a generator
    in a bench as a lazy result)."""
    pairs = benchmarks(imp.marks)
    out: list[tuple[Config, str]] = []
    for mark, b in pairs:
        here = f"{where}: benchmark {b.plot_name or '?'}"
        for line in pick_lines(b, lines, here):
            out += [(make_config(mark, b, x, line, len(pairs) > 1, here), here) for x in b.x_vals]
    for run in imp.runs:
        here = f"{where}: {liger.RUNNER} {run.plot_name or '?'}"
        points = liger.points(run, pick_lines(run, lines, here))
        out += [(run_config(run, point, len(imp.runs) > 1, here), here) for point in points]
    return out


def configs(imp: Imported, lines: Sequence[str], where: str) -> list[Config]:
    """Every config (each_config), each once."""
    out: list[Config] = []
    seen: set[str] = set()
    for config, here in each_config(imp, lines, where):
        if config.key in seen:
            raise ImportedError(f"{here}: config {config.key} twice (one row per config)")
        seen.add(config.key)
        out.append(config)
    return out


def config_columns(imp: Imported) -> list[str]:
    """The CSV's config columns, whatever line is chosen (the probe's answer)."""
    pairs = benchmarks(imp.marks)
    several = len(pairs) > 1 or len(imp.runs) > 1
    names: list[tuple[list[Any], dict[str, Any]]] = [([*b.x_names, b.line_arg], dict(b.args)) for _, b in pairs]
    names += [([liger.MODE, run.x_name, liger.PROVIDER], e) for run in imp.runs for e in run.extras]
    cols: dict[str, None] = {"benchmark": None} if several else {}
    for named, fixed in names:
        cols.update(dict.fromkeys(map(str, named)))
        cols.update({k: None for k, v in fixed.items() if _scalar(v) and k not in RESERVED})
    return list(cols)


def import_bench(script: Path, name: str) -> Imported:
    """Import the bench (see the module docstring): its Mark.run calls recorded, not run, and a
    do_bench it calls at import captured and dropped. With no Mark, Liger's convention: the
    run_benchmarks calls of its `__main__` block recorded, not run (liger_runs)."""
    import triton.testing as testing

    mark_cls = getattr(testing, "Mark", None)
    if mark_cls is None:
        raise ImportedError(f"{script}: this triton has no triton.testing.Mark (perf_report)")
    ran: list[Any] = []
    original = mark_cls.run

    def recorded(self: Any, *args: Any, **kwargs: Any) -> None:
        ran.append(self)

    folder = str(script.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)  # as `python script.py` would: its neighbours import
    mark_cls.run = recorded
    try:
        with quiet_capture(testing):
            module = load_module(script, name)
    finally:
        mark_cls.run = original
    marks = list(dict.fromkeys(ran)) or [v for v in vars(module).values() if isinstance(v, mark_cls)]
    if marks:
        return Imported(module, marks, testing, bool(ran))
    return Imported(module, [], testing, True, liger_runs(script, testing))


@contextlib.contextmanager
def quiet_capture(testing: ModuleType) -> Iterator[None]:
    """What the bench runs outside a benchmark call: do_bench captured and dropped, prints to stderr."""
    with Capture().installed(testing), contextlib.redirect_stdout(sys.stderr):
        yield


def liger_runs(script: Path, testing: ModuleType) -> list[liger.Run]:
    """The speed calls of Liger's run_benchmarks the script's `__main__` block makes
    (liger_convention.record_runs); none: the ImportedError that names both conventions."""
    try:
        runner, runs = liger.record_runs(script, functools.partial(quiet_capture, testing))
    except liger.ConventionError as exc:
        raise ImportedError(f"{script}: {exc}") from exc
    if not runs:
        found = f"its __main__ block made no {liger.RUNNER}(metric_name={liger.SPEED!r}) call" if runner else ""
        raise ImportedError(
            f"{script}: no triton.testing.perf_report benchmark (a Mark) among its globals, and it ran none at "
            f"import; nor Liger's convention ({found or f'no `from X import {liger.RUNNER}`'})"
        )
    return runs


def call_benchmark(imp: Imported, config: Config, torch: Any, seed: int) -> TimedSet:
    """One buffer set: the benchmark function called once after seeding the generators, with
    do_bench captured (ImportedError when it calls none); its own prints to stderr."""
    seed_all(torch, seed)
    cap = Capture()
    scopes = config.scopes or (getattr(config.fn, "__globals__", None),)
    with cap.installed(imp.testing, *scopes), contextlib.redirect_stdout(sys.stderr):
        config.fn(**config.kwargs)
    if not cap.captured:
        raise ImportedError(
            "the benchmark function called neither triton.testing.do_bench nor do_bench_cudagraph: "
            "kopt has no callable to time"
        )
    return TimedSet(cap.captured)


# -- the process ---------------------------------------------------------------------------------


def seed_all(torch: Any, seed: int) -> None:
    """Seed the generators a benchmark function draws from: torch's (every device), random's
    and, when loaded, numpy's."""
    torch.manual_seed(seed)
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % (1 << 32))


def tolerance(outputs: Sequence[Any], atol: float | None, rtol: float | None) -> tuple[float, float]:
    """(atol, rtol) for a config's audit: the least precise floating output's (TOLERANCE),
    exact for integer outputs; --atol/--rtol override."""
    floating = [str(t.dtype).removeprefix("torch.") for t in outputs if t.is_floating_point()]
    if floating:
        a, r = max((TOLERANCE.get(d, TOLERANCE["float32"]) for d in floating), key=lambda tol: tol[1])
    else:
        a, r = (0.0, 0.0) if outputs else TOLERANCE["float32"]
    return (a if atol is None else atol), (r if rtol is None else rtol)


@dataclass
class Drawn:
    """A config's buffer sets in the last look, or why it could not be measured."""

    config: Config
    sets: list[TimedSet] = field(default_factory=list)
    failed: str = ""


class ImportedBench(Bench):
    """A Bench whose configs are an imported perf_report bench's: serve.serve_tree drives it as
    it drives a Spec's (timed_rows, commitment, audit, reload, and Bench's release_cache and
    memory_full). The Spec side of Bench (cases, checks) is not used here and
    not set up: Bench.__init__ is not called."""

    prepares = False  # its looks are whole: `prepare` is answered `unprepared`

    def __init__(self, script: Path, a: argparse.Namespace, torch: Any, gpu: bool, clock: PhaseClock) -> None:
        self.script, self.a, self.torch, self.gpu, self.clock = script, a, torch, gpu, clock
        self.ranges = open_ranges(torch, gpu)
        self.timing = Timing(torch, gpu, a.block_us, max_reps=1000 if gpu else 50, spin_us=a.spin_us)
        self.timing.share_pool()  # no graph of a look is replayed after a later capture (timed_rows)
        self.failed = 0
        self.loads = 0
        self.drawn: list[Drawn] = []
        """The last look's configs and buffer sets, for `commitment` and `audit`."""
        self.reload()

    def reload(self) -> None:
        """(Re)import the bench: a new module object each time (a candidate's edit is read)."""
        self.loads += 1
        self.drawn = []
        self.imp = import_bench(self.script, f"kopt_imported_bench_{self.loads}")
        self.configs = configs(self.imp, self.a.line, str(self.script))

    def draw_sets(self, config: Config, seed: int, suffix: str = "", count: int = 0) -> list[TimedSet]:
        """`count` sets of a config, set j drawn from input_seed(seed, key, f"set{j}{suffix}");
        without a count, set 0 first (its tensors size the count on a GPU; on the CPU it is
        bench.CPU_SETS)."""

        def draw(j: int) -> TimedSet:
            return call_benchmark(self.imp, config, self.torch, input_seed(seed, config.key, f"set{j}{suffix}"))

        first = draw(0)
        return [first] + [draw(j) for j in range(1, count or self.timing.set_count(first.nbytes()))]

    def last_timer(
        self, sets: list[TimedSet], graphed: bool, span: Callable[[], contextlib.AbstractContextManager[Any]]
    ) -> Any:
        """The timer of a config's last block: one call per set of the second draw, none of
        them called before the block's own (bench.Timing.last_timer; `graphed`: the first
        sets' timer was a CUDA graph)."""
        return self.timing.last_timer(list(sets), graphed, span)

    def timed_rows(
        self, seed: int, *, copy: bool = True, keep: bool = False, prepared: list[Prepared] | None = None
    ) -> list[dict[str, Any]]:
        """One look of `seed` (never `prepared`: `prepares` is False): per config its sets drawn twice, the blocks but the last timed
        on the first draw, the last block on the second, whose outputs are checked for NaN/Inf
        and are what `commitment` and `audit` read; one row each (the module docstring).
        Without `copy` (a served look) each row also reports LAST (`us_last`), the last
        block's µs per call; the plain run's CSV keeps the columns `kopt init` knows (as the
        harness's: bench.LAST). `keep` is the Spec path's (nothing is kept from look to look
        here but the CUDA graphs)."""
        rows = []
        self.drawn = []
        nan = math.nan
        for config in self.configs:
            where = f"{self.script.name} {config.key}"
            drawn = Drawn(config)
            self.drawn.append(drawn)
            ks: list[float] = []
            reps = launches = 0  # per block but the last; the timed calls in all
            span = functools.partial(self.ranges.span, range_name(config.cols))
            try:
                drawn.sets = self.draw_sets(config, seed, PRIME)
                self.clock.lap("inputs")
                t = self.timing.sets_timer(list(drawn.sets), drawn.sets[0].nbytes(), graph=self.a.graph, span=span)
                self.clock.lap("capture")
                for _ in range(self.a.blocks - 1):
                    ks.append(t.block())
                self.clock.lap("timing")
                count, reps, graphed = len(drawn.sets), t.reps, isinstance(t, GraphTimer)
                t, drawn.sets = None, []  # the first draw let go before the second: the same peak memory
                drawn.sets = self.draw_sets(config, seed, "", count)
                self.clock.lap("inputs")
                t = self.last_timer(drawn.sets, graphed, span)
                self.clock.lap("capture")
                ks.append(t.block())  # the first calls of the second draw's sets
                launches = reps * (len(ks) - 1) + t.reps
            except Exception as exc:  # a benchmark that raises, or captures nothing, fails its row
                drawn.failed = f"{type(exc).__name__}: {exc}"
                reps, launches, ks = 0, 0, []
            err = math.inf if drawn.failed else 0.0
            if not drawn.failed:
                bad = self.nonfinite(drawn)
                if bad:
                    drawn.failed, err = bad, math.inf
            if drawn.failed:
                self.failed += 1
                log(f"{where}: FAILS: {drawn.failed}")
            st = summarize(ks) if ks else dict.fromkeys(("median", "mean", "std", "min", "p10", "p90"), nan)
            rows.append(
                {
                    **config.cols,
                    "us": st["median"],
                    "err": err,
                    "calls": launches,
                    **block_stats(st, ks, copy),  # LAST: the second draw's block
                    "seed": seed,
                }
            )
            log(f"{where}: {st['median']:10.3f} us  err {err:.3g}  ({len(ks)} blocks x {reps} calls)")
            self.clock.lap("timing")
        return rows

    def nonfinite(self, drawn: Drawn) -> str:
        """Why the sets' outputs fail whatever the bench says ("" when they do not): none at all,
        or NaN/Inf values."""
        for i, s in enumerate(drawn.sets):
            outs = s.outputs()
            if not outs:
                return f"set {i}: the timed callable returns no tensor and reaches none kopt can compare"
            count = sum(int((~self.torch.isfinite(t)).sum().item()) for t in outs if t.is_floating_point())
            if count:
                return f"set {i}: {count} NaN/Inf output element(s)"
        return ""

    def audit(self, seed: int) -> dict[str, Any]:
        """The last look's audit (audit.py's rule and summary), per config."""
        configs = []
        for d in self.drawn:
            if not d.sets:
                configs.append(
                    {"config": dict(d.config.cols), "sets": 1, "set": 0, "atol": 0.0, "rtol": 0.0, "outputs": []}
                )
                continue
            rng, i = audit_set(seed, d.config.key, len(d.sets))
            outs = d.sets[i].outputs()
            atol, rtol = tolerance(outs, self.a.atol, self.a.rtol)
            configs.append(
                {
                    "config": dict(d.config.cols),
                    "sets": len(d.sets),
                    "set": i,
                    "atol": atol,
                    "rtol": rtol,
                    "outputs": [summarise(self.torch, t, audit_positions(rng, int(t.numel()))) for t in outs],
                }
            )
        return {"version": VERSION, "configs": configs}

    def commitment(self) -> dict[str, Any]:
        """The last look's promise: every set's output summaries, per config."""
        return {
            "version": VERSION,
            "configs": [
                {
                    "config": dict(d.config.cols),
                    "sets": summarise_sets(self.torch, [s.outputs() for s in d.sets] or [[]]),
                }
                for d in self.drawn
            ],
        }

    def profile_graph(self, s: TimedSet, key: str) -> Any:
        """A profiled call captured in a CUDA graph (outside the config's range) for the range
        to replay: NVTX push/pop ranges belong to the thread that pushed them, and autograd
        launches a backward from a device thread of its own, so a backward called eagerly inside
        the range launched nothing ncu put in it (the layer-norm tutorial on the H200,
        2026-11-30: no launch in any kopt range). The capture takes every launch onto the
        harness's stream (timing.use_side_stream), and the replay is the harness thread's. One
        capture, never a second: a capture refused is a call that saw the profiled set's
        inputs, and any call after it outside the range (a warm-up, tried first) could compute
        their result there for a second capture to copy (hostile review, 2026-11-30). Refused:
        None, and the call runs eagerly in the range, as before (a backward's launches are then
        in no range, and the profiler cannot speak for its class)."""
        try:
            graph = self.torch.cuda.CUDAGraph()
            LIVE_GRAPHS.append(graph)  # timing.LIVE_GRAPHS says why no graph is destroyed
            with capturing(self.torch, graph, self.timing.pool):
                s()
            self.torch.cuda.synchronize()
            return graph
        except Exception as exc:
            self.torch.cuda.synchronize()
            log(
                f"{self.script.name} {key}: --profile capture refused ({type(exc).__name__}: {str(exc)[:120]}): "
                "called eagerly in its range (a backward's launches are not in it)"
            )
            return None

    def profile_rows(self, base_seed: int) -> list[dict[str, Any]]:
        """--profile: per config its callable called inside the config's range
        IMPORTED_PROFILE_CALLS times (bench.profile_calls_for: more when kopt asks; on a GPU each call a CUDA graph replayed
        there, profile_graph), each call on a set of its own (the
        benchmark function drawn again from a seed per call, outside the range); nothing timed,
        nothing compared here; every call's outputs summarised where kopt asks
        (bench.profile_entry, bench.write_profile_outputs): a tree that computed one call and
        handed its result back on the others would write the wrong outputs."""
        rows = []
        later = bench_mod.ProfileEntries(self.torch)
        where = os.environ.get(bench_mod.PROFILE_OUTPUTS_ENV, "")
        for config in self.configs:
            err = math.nan
            calls = bench_mod.profile_calls_for(config.key, first=IMPORTED_PROFILE_CALLS)
            try:
                rng, _ = audit_set(base_seed, config.key, 1)
                outputs: list[Future[dict[str, Any]]] = []
                tol = (0.0, 0.0)
                for k in range(calls):
                    purpose = "profile" if k == 0 else f"profile/call{k}"
                    s = call_benchmark(self.imp, config, self.torch, input_seed(base_seed, config.key, purpose))
                    graph = self.profile_graph(s, config.key) if self.gpu else None
                    with self.ranges.span(range_name(config.cols)):
                        if graph is not None:
                            graph.replay()
                        else:
                            s()
                    if self.gpu:
                        self.torch.cuda.synchronize()
                    if where:
                        outs = s.outputs()
                        tol = tolerance(outs, self.a.atol, self.a.rtol) if k == 0 else tol
                        outputs += later.summaries.add(outs, rng)
                    del s
                if where:
                    later.add(config.cols, tol[0], tol[1], outputs, calls)
            except Exception as exc:  # the row says it failed; the profile goes on
                log(f"{self.script.name} {config.key}: {type(exc).__name__}: {exc}")
                err = math.inf
            rows.append({**config.cols, "err": err})
        entries = later.entries()
        if where:
            bench_mod.write_profile_outputs(entries)
        return rows


Target = tuple[Any, Any, Callable[[], Config]]
"""A probed line: its value, its name, and its first config (made when probed: it may raise)."""


def probe_targets(imp: Imported, where: str) -> list[tuple[dict[str, Any], list[Target]]]:
    """Per perf_report benchmark, or recorded Liger run (its lines: the providers, its x name
    the one x_name, its line_arg `kernel_provider`), what the probe says of it and its lines."""
    pairs = benchmarks(imp.marks)
    out: list[tuple[dict[str, Any], list[Target]]] = []
    for mark, b in pairs:
        names = list(getattr(b, "line_names", None) or [])
        head: dict[str, Any] = {
            "plot_name": str(b.plot_name),
            "x_names": [str(x) for x in b.x_names],
            "line_arg": str(b.line_arg),
            "configs": len(list(b.x_vals)),
        }
        first = functools.partial(make_config, mark, b, b.x_vals[0])
        targets: list[Target] = [
            (v, names[i] if i < len(names) else v, functools.partial(first, v, len(pairs) > 1, where))
            for i, v in enumerate(b.line_vals)
        ]
        out.append((head, targets))
    for run in imp.runs:
        head = {
            "plot_name": run.plot_name,
            "x_names": [run.x_name],
            "line_arg": liger.PROVIDER,
            "configs": len(run.extras) * len(run.modes) * len(run.x_values),
        }
        targets = [(p, p, functools.partial(first_run_config, run, p, len(imp.runs) > 1, where)) for p in run.line_vals]
        out.append((head, targets))
    return out


def first_run_config(run: liger.Run, provider: Any, several: bool, where: str) -> Config:
    """The first config of a Liger run's provider (its first extra config, mode and x value)."""
    return run_config(run, liger.points(run, [provider])[0], several, where)


def probe(script: Path, torch: Any, seed: int) -> dict[str, Any]:
    """Import the bench and, per benchmark and line, capture the first config's callable and
    call it once: what `kopt init` reads to propose this path (PROBE_VERSION)."""
    t0 = time.monotonic()
    imp = import_bench(script, "kopt_imported_bench_probe")
    import_s = time.monotonic() - t0
    out: list[dict[str, Any]] = []
    for head, targets in probe_targets(imp, str(script)):
        lines = []
        for value, name, first in targets:
            entry: dict[str, Any] = {"value": str(value), "name": str(name)}
            t1 = time.monotonic()
            try:
                s = call_benchmark(imp, first(), torch, seed)
                s()
                outs = s.outputs()
                entry.update(
                    captured=bool(outs),
                    outputs=len(outs),
                    why="" if outs else "the timed callable returns no tensor and reaches none kopt can compare",
                )
            except Exception as exc:  # one line that cannot be captured: said, the others go on
                entry.update(captured=False, outputs=0, why=f"{type(exc).__name__}: {str(exc)[:300]}")
            entry["seconds"] = round(time.monotonic() - t1, 3)
            lines.append(entry)
        out.append({**head, "lines": lines})
    return {
        "version": PROBE_VERSION,
        "script": script.as_posix(),
        "convention": "liger" if imp.runs else "perf_report",
        "ran_at_import": imp.ran,
        "import_s": round(import_s, 3),
        "config_columns": config_columns(imp),
        "benchmarks": out,
    }


def parse_args(argv: list[str] | None, gpu: bool) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="a triton.testing.perf_report bench served by import: kopt's timer, "
        "kopt's served protocol (docs/byo-kernel.md)"
    )
    ap.add_argument("script", help="the bench's Python file, relative to the working directory (the tree)")
    ap.add_argument(
        "--line", action="append", default=[], help="the line value (or line name) of the tree's own kernel; repeatable"
    )
    ap.add_argument(
        "--serve",
        action="store_true",
        help="answer kopt's `look N SEED PATH`, `audit N SEED PATH` and `load` on stdin (harness/serve.py)",
    )
    ap.add_argument(
        "--probe",
        action="store_true",
        help="import, capture each line's first config once, print JSON (what kopt init reads)",
    )
    ap.add_argument("--profile", action="store_true", help="each config's callable twice in its range, untimed")
    ap.add_argument("--seed", type=int, default=None, help="the look's seed of a plain run (default: a fresh one)")
    ap.add_argument("--blocks", type=int, default=0, help="timed blocks per config (default: the harness's)")
    ap.add_argument("--block-us", type=float, default=300.0, help="GPU: target duration of a block")
    ap.add_argument(
        "--serve-memory",
        type=float,
        default=None,
        help="--serve: leave after a look once kept buffers take this share of the GPU's memory",
    )
    ap.add_argument(
        "--no-graph",
        dest="graph",
        action="store_false",
        help="GPU: time eager launches between CUDA events, not CUDA graphs",
    )
    ap.add_argument("--atol", type=float, default=None, help="the audit's atol (default: by the outputs' dtype)")
    ap.add_argument("--rtol", type=float, default=None, help="the audit's rtol (default: by the outputs' dtype)")
    ap.add_argument("--out", help="also write the CSV to this file")
    a = ap.parse_args(argv)
    if sum((a.serve, a.probe, a.profile)) > 1:
        ap.error("--serve, --probe and --profile run alone")
    if a.serve and a.seed is not None:
        ap.error("--seed: a served look takes its seed from the request (`look N SEED PATH`)")
    for opt, value in (("--atol", a.atol), ("--rtol", a.rtol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            ap.error(f"{opt} must be a finite number >= 0, not {value}")
    path = Path(a.script)
    if path.is_absolute() or ".." in path.parts or path.suffix != ".py":
        ap.error(f"{a.script}: give the bench's .py file relative to the tree")
    shared = bench_mod.parse_args(["--serve"] if a.serve else [], gpu)  # the harness's defaults, one rule
    a.blocks = a.blocks or shared.blocks
    a.serve_memory = a.serve_memory if a.serve_memory is not None else shared.serve_memory
    a.release = shared.release
    a.spin_us = shared.spin_us  # the spec harness's default (timing.SPIN_US)
    return a


def held_torch() -> Any:
    """What a held --profile run does before kopt's go (harness/hold.py): torch imported, no
    CUDA context. The bench's module is the tree's code: it is imported only after go, so
    nothing of the candidate runs while the decision's looks are measured."""
    import torch

    return torch


def main(argv: list[str] | None = None) -> int:
    clock = PhaseClock()
    go = hold.hold_file()
    if go is not None and parse_args(argv, True).profile:
        told_go, _ = hold.hold_until_go(go, hold.tree_root(Path.cwd()), held_torch)
        if not told_go:
            log(f"profile held and stopped: {clock.line()}")
            return 0
        clock.lap("held")
    torch, gpu = bench_mod.setup_device()  # before the bench imports triton
    a = parse_args(argv, gpu)
    script = Path.cwd() / a.script
    if not script.is_file():
        log(f"{a.script}: no such file in {Path.cwd()}")
        return 2
    try:
        if a.probe:
            doc = probe(Path(a.script), torch, new_seed() if a.seed is None else a.seed)
            sys.stdout.write(json.dumps(doc) + "\n")
            return 0
        bench = ImportedBench(Path(a.script), a, torch, gpu, clock)
    except ImportedError as exc:
        log(str(exc))
        return 1
    except Exception as exc:  # the bench's own import (its own check included) failed
        log(f"{a.script}: the import failed: {why(exc)}")
        return 1
    clock.lap("setup")
    if not gpu:
        log(f"{a.script}: no GPU: Triton's interpreter on the CPU; timings are CPU timings")
    if a.serve:
        from .serve import serve_tree

        def reply(msg: str) -> None:
            sys.stdout.write(msg + "\n")
            sys.stdout.flush()

        return serve_tree(bench, sys.stdin, reply)
    seed = new_seed() if a.seed is None else a.seed
    rows = bench.profile_rows(bench_mod.profile_seed(seed)) if a.profile else bench.timed_rows(seed)
    clock.lap("timing")
    write_csv(rows, a.out)
    log(clock.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
