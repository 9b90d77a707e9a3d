"""kopt.toml: the schema, its defaults, and validation with errors that name the key at fault.

Each section is a frozen dataclass; the field's type and default are the schema. Loading
walks the TOML tables, rejects unknown keys (with a "did you mean" hint: a typo must never
silently change a run), checks every value's type and range, and parses every expression
once so that a bad one is reported at `kopt init`, not hours into a run.

Pure: reads a file or a string, returns a `Config`. No side effects.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import diffscan, expr
from kopt_supervisor.engine.errors import BadInput

FORMATS = ("csv", "table", "perf_report", "pytest-benchmark", "google-benchmark", "torch-benchmark")
"""[target].format: how the bench's output is read (engine/adapters; docs/files.md)."""


@dataclass(frozen=True)
class AdapterConfig:
    """[target.adapter]: options of the adapter [target].format names."""

    table: str = ""
    """Which table, when the output holds several with different columns: its title (a
    perf_report plot name, a torch.utils.benchmark label, the line printed above it) or its
    1-based position. Empty: the only one, or all of them as one when they share their
    columns (a `table` column then says which each row came from)."""
    unit: str = "us"
    """The time unit times are converted to by the adapters whose output carries its own
    unit (pytest-benchmark seconds, Google Benchmark's time_unit, torch.utils.benchmark's
    per-table unit): "ns", "us", "ms" or "s"."""
    stat: str = "median"
    """Google Benchmark run with --benchmark_report_aggregates_only: the aggregate that
    becomes each config's value ("median", "mean" or "min"); with every repetition reported,
    each repetition is a sample and this is unused."""


@dataclass(frozen=True)
class TargetConfig:
    bench: str = ""
    """The fixed benchmark command, run with the worktree as working directory."""
    csv: str = "-"
    """Where the bench writes its CSV: a glob relative to the worktree (newest file written
    during this run wins), or "-" for the bench's stdout."""
    metric: str = ""
    """The per-row metric column (latency by default)."""
    direction: str = "min"
    """"min" (latency) or "max" (throughput)."""
    correct: str = ""
    """A row passes when this expression holds, e.g. "err_x == 0". Empty: only the
    NaN/Inf/missing-metric checks apply."""
    config: list[str] | None = None
    """The config columns; default: every column not used by metric, correct or ignore."""
    class_by: list[str] | None = None
    """Columns that form a config class; default: all config columns."""
    ignore: list[str] = field(default_factory=list)
    """Columns that are neither config nor metric (extra statistics the bench prints)."""
    production: str = ""
    """Rows that are production workloads (for geomean and the roofline stop); default all."""
    protected: list[str] = field(default_factory=list)
    """Globs of files a candidate must not change (the bench, its data, the harness)."""
    sources: list[str] = field(default_factory=list)
    """Globs of the files a candidate is meant to change (the kernel's sources, its tuning
    data): declared, a candidate's change to any other tracked file (not protected: those
    are refused) goes to review with its changed lines quoted. `kopt init` refuses
    uncommitted changes in them. Default: every tracked file (and `kopt init` warns, naming
    the files the bench reads that nothing protects)."""
    allow_untracked: list[str] = field(default_factory=list)
    """Globs of new files a candidate may add that hold code (a new kernel module, a build
    file), untracked or ignored: they join the candidate's diff, are shown in review and
    committed with a keep. Any other new executable content (Python, bytecode, .pth, native
    libraries, scripts) is rejected with its paths."""
    timeout_s: float = 900.0
    max_output_mib: float = 512.0
    """A bench, proposer or formatter writing more than this (stdout, stderr, or any one
    file) is killed: gigabytes of output never fill the disk."""
    ab_command: str = ""
    """Optional: one command that times best and candidate interleaved in one process.
    Placeholders {best} and {cand} are the two worktrees' paths."""
    ab_serve: bool = False
    """The ab_command serves looks: kopt starts it once per decision and asks for each look
    on its stdin (`look N PATH` -> `done N`; docs/files.md), which saves a process start
    per look. The process may leave after any look (`done N last`); kopt starts another."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for the bench and the proposer."""
    compile_flags: str = ""
    """How the target builds (flags that change numerics or code generation), for the report."""
    allow_constructs: list[str] = field(default_factory=list)
    """The diff scan's allow-list: entries "rule-id:path-glob" (rule "*": every rule) for
    the legitimate constructs of this target, e.g. "module-state:solution/*.py" for a
    per-shape kernel cache at module level. Rule ids: engine/diffscan.py RULES, docs/files.md."""
    network: bool = False
    """The bench, profiler, formatter and ab_command may use the network (they run candidate
    code; off, the sandbox gives them only a private loopback)."""
    writable: list[str] = field(default_factory=list)
    """Extra paths (absolute, or starting with ~) those runs may write; everything outside
    their worktree, output folder and per-tree cache is read-only to them."""
    readable: list[str] = field(default_factory=list)
    """Extra paths (absolute, or starting with ~) those runs may read where the sandbox
    hides everything (a private /tmp, /run): data a bench reads from there."""
    format: str = "csv"
    """How the bench's output (the file `csv` finds, or stdout) is read: "csv" (kopt's CSV,
    as always), "table" (a printed table: whitespace-aligned, pandas, markdown), "perf_report"
    (triton.testing.perf_report's CSV or printout), "pytest-benchmark" (--benchmark-json),
    "google-benchmark" (--benchmark_format=json / --benchmark_out), "torch-benchmark"
    (torch.utils.benchmark's printed Compare tables or Measurements). docs/files.md lists
    the columns each one yields."""
    adapter: AdapterConfig = field(default_factory=AdapterConfig)


@dataclass(frozen=True)
class DecideConfig:
    """[decide]: the statistical decision's policy (docs/decision.md). `decide.Policy`
    derives from this class: a key added here reaches the decision as it is."""

    confidence: float = 0.99
    """Joint confidence of each class's interval over all the looks of one decision."""
    min_effect_pct: float = 1.0
    """The smallest gain worth keeping, and loss worth counting."""
    min_rounds: int = 3
    max_rounds: int = 20
    """Looks before an undecided class goes to review: 20 process-level rounds keep a true
    2% gain 95% of the time at 1% per-run noise (docs/decision.md)."""
    budget_gpu_s: float = 1800.0
    """Upper bound on benchmark seconds spent on one decision (both sides together)."""
    max_other_regression_pct: float = 1.0
    """How much slower a class other than the target may get in a keep."""
    suspicious_speedup: float = 3.0
    """A candidate more than this many times faster in any class, or in any single config,
    goes to review."""
    review_timeout_s: float = 1800.0
    review_default: str = "reject"
    two_in_a_row: bool = False
    """Reference policy: a same-direction sub-threshold gain seen twice in a row keeps."""
    futility_confidence: float = 0.8
    """At the final look, a class still undecided is resolved by its interval at this
    (lower) confidence, and only when its estimate lies within ±min_effect_pct: a target
    class counts as tied when that interval rules out a gain of min_effect_pct, another
    class when it rules out a regression beyond max_other_regression_pct. An estimated loss
    beyond min_effect_pct ends as a likely regression instead, never a tie. A true gain of
    exactly min_effect_pct is lost this way at most (1 - futility_confidence)/2 of the time;
    without it nearly every no-change candidate at a noisy bench goes to review. 0 turns it
    off (such classes go to review)."""
    verify_after_format: bool = True
    """Re-run the decision on the formatted tree before the keep commit."""
    production_verdicts: bool = False
    """Class verdicts count only the production configs ([target].production); the other
    rows (a regression grid of odd sizes) become one guard class that can block a keep by
    regressing beyond guard_max_regression_pct but never earns one."""
    guard_max_regression_pct: float = 10.0
    """With production_verdicts: how much slower the guard class (the geometric mean over
    the non-production configs) may get in a keep. Its configs are odd sizes kept for
    correctness and to catch a pathological slowdown; a few percent on a 3 µs one-row case
    must not block a large gain on the shapes models run."""


def decide_problems(d: DecideConfig) -> list[tuple[str, str]]:
    """(key, what is wrong) for each [decide] value out of range: the one set of rules, for
    kopt.toml (`validate`) and for every `decide.Policy` built in code."""
    checks = [
        (0.5 < d.confidence < 1, "confidence", f"must be between 0.5 and 1, not {d.confidence}"),
        (d.min_effect_pct > 0, "min_effect_pct", f"must be > 0, not {d.min_effect_pct}"),
        (d.min_rounds >= 2, "min_rounds", f"must be at least 2 (a paired test needs two rounds), not {d.min_rounds}"),
        (d.max_rounds >= d.min_rounds, "max_rounds",
         f"must be >= [decide].min_rounds ({d.min_rounds}), not {d.max_rounds}"),
        (d.budget_gpu_s > 0, "budget_gpu_s", f"must be > 0, not {d.budget_gpu_s}"),
        (d.max_other_regression_pct >= 0, "max_other_regression_pct", f"must be >= 0, not {d.max_other_regression_pct}"),
        (d.guard_max_regression_pct >= 0, "guard_max_regression_pct", f"must be >= 0, not {d.guard_max_regression_pct}"),
        (d.suspicious_speedup > 1, "suspicious_speedup", f"must be > 1, not {d.suspicious_speedup}"),
        (d.review_timeout_s >= 0, "review_timeout_s", f"must be >= 0, not {d.review_timeout_s}"),
        (d.review_default in ("reject", "accept"), "review_default",
         f'must be "reject" or "accept", not {d.review_default!r}'),
        (0 <= d.futility_confidence < d.confidence, "futility_confidence",
         f"must be >= 0 and below [decide].confidence ({d.confidence}), not {d.futility_confidence}"),
    ]
    return [(key, why) for ok, key, why in checks if not ok]


@dataclass(frozen=True)
class GpuConfig:
    vendor: str = "auto"
    """"auto", "nvidia", "amd", or "none" (CPU-only target)."""
    devices: list[int] = field(default_factory=list)
    """GPU indices kopt may use; empty: all."""
    util_max_pct: float = 10.0
    mem_used_max_mib: float = 2048.0
    mem_growth_max_mib: float = 64.0
    samples: int = 3
    sample_interval_s: float = 1.0
    wait_s: float = 600.0
    wait_max_s: float = 3600.0
    quick_recheck_s: float = 30.0
    """Within this many seconds of a full check, a gate that holds its GPU, and whose reading
    right after the last timed step showed no foreign process and no throttle, checks with ONE
    fresh reading (foreign processes, memory and its growth since that reading, claims;
    utilization is not judged, it still shows this run's own step) instead of `samples`
    readings. Anything seen falls back to the full check. 0: the full check every time."""


@dataclass(frozen=True)
class ProfileConfig:
    kind: str = "auto"
    """"auto", "ncu", "rocprofv3" or "none"."""
    kernel: str = ""
    """Regex naming the kernels to show as "the hottest" (display only: with NVTX/roctx ranges
    every kernel launched inside a config's range is compared; without ranges, the target
    kernels of the whole-run comparison). Empty: every kernel."""
    command: str = ""
    """Command to profile; default: the bench."""
    timeout_s: float = 1800.0
    agree_margin_pct: float = 1.0
    """Whole-run rule of `decide.reconcile_profiler` (bench and profiler disagree when the
    profiler's change has the other sign beyond this); the per-class comparison
    (engine.profile.classes) judges by intervals instead."""
    run_noise_pct: float = 0.3
    """Run-to-run spread (CV, %) of a profile's per-class GPU time, added to the
    launch-to-launch spread when each tree is profiled once. Default: five ncu runs of one
    unchanged tree on an H100 spread by CV 0.16-0.27% (issue 17). Measure yours with
    `repeats` >= 2 on an unchanged tree."""
    repeats: int = 1
    """Profiles of each tree per comparison; with 2 or more the run-to-run spread is
    measured from them (Student's t) instead of taken from run_noise_pct."""


@dataclass(frozen=True)
class FormatConfig:
    command: str = ""
    """Run in cand/ before every keep commit, e.g. "ruff format ."."""
    timeout_s: float = 300.0


@dataclass(frozen=True)
class TuneConfig:
    params: str = ""
    """The params file the tune proposer edits (JSON), relative to the repo root."""
    space: dict[str, list[Any]] = field(default_factory=dict)
    """Parameter name -> the values to try."""
    per_class: bool = False
    """Tune each config class's entry of the params file on its own (class-targeted)."""
    shared_first: bool = False
    """With per_class: while every class runs the same value of a param, step it for all
    classes at once (one keep instead of one per class); per class once they differ."""
    order: list[str] = field(default_factory=list)
    """The params to try first, in this order (the rest follow the built-in prior: warps,
    rows per program, block sizes, stages)."""
    seed: int = 0
    alike: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    """Class key -> param -> values of the space that launch the same kernel for that class
    (e.g. {"dclass=narrow": {"BLOCK_D": [64, 128, 0]}} when every narrow row fits in 64): the
    search never proposes a change between them and counts them as one point."""


@dataclass(frozen=True)
class ProposeConfig:
    kind: str = "manual"
    """"manual", "command" or "tune"."""
    command: str = ""
    """The agent command for kind = "command"; {prompt}, {prompt_json}, {plan}, {worktree},
    {agent_dir}, {session} and {message} are filled in (docs/agents.md). With an agent preset it
    replaces the preset's command line."""
    agent: str = ""
    """An agent CLI preset for kind = "command": "claude-code", "codex", "gemini", "aider",
    "opencode" or "generic" (docs/agents.md): its command line, permissions, writable
    folders and how to read its cost, tokens and session id."""
    model: str = ""
    """Passed to the preset's --model flag; empty: the CLI's own default."""
    args: list[str] = field(default_factory=list)
    """Extra arguments appended to the preset's command line."""
    session: str = "fresh"
    """"fresh": a new agent session each iteration; "resume": one continued conversation
    (the context pack is still given each time; a masked iteration breaks the chain)."""
    timeout_s: float = 0.0
    """Seconds a proposal may take; 0: the preset's (3600 s without one)."""
    repair_attempts: int = 3
    budget_usd: float = 0.0
    """Stop the run once the agent runs have cost this many dollars (as the CLI reports
    them); 0: no limit."""
    budget_tokens: int = 0
    """Stop the run once the agent runs have used this many tokens (input + output); 0: no limit."""
    writable: list[str] = field(default_factory=list)
    """More paths the sandbox leaves writable for the proposer (absolute, or starting with ~),
    besides cand/, its plan and output folder and the folders its agent preset names."""
    transcript_max_kib: int = 4096
    """Each agent transcript kept in logs/vN/ is cut to this size (head and tail kept)."""
    prompt_max_kib: int = 64
    """The size budget of the context pack (KOPT_PROMPT): the oldest history is summarised
    first; the rules and the current evidence are never cut."""
    network: bool = True
    """The `command` proposer may use the network (an agent calls its API); false removes it."""
    readable: list[str] = field(default_factory=list)
    """Extra paths (absolute, or starting with ~) the proposer may read where the sandbox
    hides everything (a private /tmp, /run)."""
    tune: TuneConfig = field(default_factory=TuneConfig)


@dataclass(frozen=True)
class StopConfig:
    consecutive_regressions: int = 5
    consecutive_failures: int = 10
    """Stop after this many failed proposals in a row (a broken proposer)."""
    max_iters: int = 0
    """0: no limit."""
    max_hours: float = 0.0
    """0: no limit."""
    target_pct_of_peak: float = 90.0


@dataclass(frozen=True)
class RooflineConfig:
    flops: str = ""
    """Expression over config columns: useful FLOPs per call."""
    bytes: str = ""
    """Expression over config columns: the fewest bytes per call (inputs read once,
    outputs written once)."""
    specs: str = ""
    """A spec wiki folder; default: the one shipped in docs/gpu-wiki."""
    gpu: str = ""
    """The GPU's spec page name; default: detected from the GPU's name."""
    peak_flops_metric: str = "bf16_dense_tflops"
    """The spec wiki metric used as peak compute (a page's `<metric>: <value> TFLOPS` line)."""
    bandwidth_metric: str = "hbm_bandwidth"
    """The spec wiki metric used as peak bandwidth."""
    unit_scale: float = 1e-6
    """Seconds per unit of the metric (1e-6 for microseconds)."""


@dataclass(frozen=True)
class ParallelConfig:
    lanes: int = 1
    """Candidates measured at once, each in its own candidate worktree, paired against best on
    its own idle GPU (docs/lanes.md). 1: one at a time."""
    backend: str = "local"
    """"local": every lane on this host; "ray": each lane's measurement a Ray task pinned to
    one GPU of a worker host of an existing Ray cluster (the `ray` extra)."""
    address: str = "auto"
    """The Ray cluster to connect to ("auto": the one `ray start` made on this host)."""
    connect_timeout_s: float = 30.0
    """How long connecting to the Ray cluster may take before the run refuses to start."""


@dataclass(frozen=True)
class Config:
    target: TargetConfig = field(default_factory=TargetConfig)
    decide: DecideConfig = field(default_factory=DecideConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    format: FormatConfig = field(default_factory=FormatConfig)
    propose: ProposeConfig = field(default_factory=ProposeConfig)
    stop: StopConfig = field(default_factory=StopConfig)
    roofline: RooflineConfig = field(default_factory=RooflineConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)

    def replace(self, section: str, **changes: Any) -> Config:
        """A copy with some keys of one section changed (CLI overrides)."""
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})


# ---------------------------------------------------------------------------------------
# Loading


def load(path: str | Path) -> Config:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    return loads(text, source=str(path))


def loads(text: str, *, source: str = "kopt.toml") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: not valid TOML: {exc}") from None
    cfg = _build(Config, data, source, "")
    validate(cfg, source)
    return cfg


def _build(cls: type, data: Any, source: str, where: str) -> Any:
    if not isinstance(data, dict):
        raise BadInput(f"{source}: [{where}] must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{where}.{key}" if where else key
        if key not in fields:
            hint = difflib.get_close_matches(key, fields, n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(fields)})"
            raise BadInput(f"{source}: unknown key {_show(dotted)}{more}")
        typ = hints[key]
        if isinstance(typ, type) and dataclasses.is_dataclass(typ):
            kwargs[key] = _build(typ, value, source, dotted)
        else:
            kwargs[key] = _coerce(value, typ, source, dotted)
    return cls(**kwargs)


def _show(dotted: str) -> str:
    section, _, key = dotted.rpartition(".")
    return f"[{section}].{key}" if section else key


def _coerce(value: Any, typ: Any, source: str, dotted: str) -> Any:
    origin = typing.get_origin(typ)
    args = typing.get_args(typ)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], source, dotted)
    bad = BadInput(f"{source}: {_show(dotted)} must be {_type_name(typ)}, not {value!r}")
    if typ is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        return value
    if typ is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            raise bad
        return value
    if origin is list:
        if not isinstance(value, list):
            raise bad
        (item,) = args
        return [_coerce(v, item, source, f"{dotted}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise bad
        _, item = args
        return {str(k): _coerce(v, item, source, f"{dotted}.{k}") for k, v in value.items()}
    if typ is Any:
        return value
    raise bad  # pragma: no cover - a schema type this function does not know


def _type_name(typ: Any) -> str:
    origin = typing.get_origin(typ)
    if origin is list:
        return "a list"
    if origin is dict:
        return "a table"
    if origin in (types.UnionType, typing.Union):
        return _type_name([a for a in typing.get_args(typ) if a is not type(None)][0])
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        typ, str(typ)
    )


# ---------------------------------------------------------------------------------------
# Validation of values (ranges, choices, expressions)


def validate(cfg: Config, source: str = "kopt.toml") -> None:
    def need(ok: bool, key: str, msg: str) -> None:
        if not ok:
            raise BadInput(f"{source}: {key} {msg}")

    t = cfg.target
    need(bool(t.bench.strip()), "[target].bench", "is required (the fixed benchmark command)")
    need(bool(t.metric.strip()), "[target].metric", "is required (the CSV column to optimise)")
    need(t.direction in ("min", "max"), "[target].direction", f'must be "min" or "max", not {t.direction!r}')
    need(t.timeout_s > 0, "[target].timeout_s", "must be > 0")
    need(t.max_output_mib > 0, "[target].max_output_mib", "must be > 0")
    need(t.csv == "-" or _inside(t.csv), "[target].csv",
         f'must be "-" or a glob relative to the worktree (no absolute path, no ".."), not {t.csv!r}')
    for key in ("correct", "production"):
        if getattr(t, key):
            expr.parse_rule(getattr(t, key), where=f"{source}: [target].{key}")
    if t.ab_command:
        need("{best}" in t.ab_command and "{cand}" in t.ab_command, "[target].ab_command",
             "must contain both {best} and {cand}")
    need(not t.ab_serve or bool(t.ab_command.strip()), "[target].ab_serve",
         "needs [target].ab_command (the command that serves the looks)")
    diffscan.parse_allow(t.allow_constructs, where=f"{source}: [target].allow_constructs")
    need(t.format in FORMATS, "[target].format", f"must be one of {', '.join(map(repr, FORMATS))}, not {t.format!r}")
    need(t.adapter.unit in ("ns", "us", "ms", "s"), "[target.adapter].unit",
         f'must be "ns", "us", "ms" or "s", not {t.adapter.unit!r}')
    need(t.adapter.stat in ("median", "mean", "min"), "[target.adapter].stat",
         f'must be "median", "mean" or "min", not {t.adapter.stat!r}')

    for key, paths in (("[target].writable", t.writable), ("[propose].writable", cfg.propose.writable),
                       ("[target].readable", t.readable), ("[propose].readable", cfg.propose.readable)):
        for i, path in enumerate(paths):
            p = path.rstrip("/")
            parts = p.split("/")[1:]
            need(p.startswith(("/", "~/")) and all(x not in ("", ".", "..") for x in parts), f"{key}[{i}]",
                 f'must be an absolute path or one under ~/ (no "..", "." or "//"), not {path!r}')
            need(len(parts) >= (1 if p.startswith("~/") else 2), f"{key}[{i}]",
                 f"must name a folder below the home or below a top-level folder, not {path!r} (the sandbox "
                 f"would leave too much writable)")

    d = cfg.decide
    for key, why in decide_problems(d):
        need(False, f"[decide].{key}", why)
    need(not d.production_verdicts or bool(t.production.strip()), "[decide].production_verdicts",
         "needs [target].production (the rule that marks the production rows)")

    g = cfg.gpu
    need(g.vendor in ("auto", "nvidia", "amd", "none"), "[gpu].vendor",
         f'must be "auto", "nvidia", "amd" or "none", not {g.vendor!r}')
    need(0 <= g.util_max_pct <= 100, "[gpu].util_max_pct", "must be between 0 and 100")
    need(g.mem_used_max_mib >= 0, "[gpu].mem_used_max_mib", "must be >= 0")
    need(g.mem_growth_max_mib >= 0, "[gpu].mem_growth_max_mib", "must be >= 0")
    need(all(d >= 0 for d in g.devices), "[gpu].devices", "must list GPU indices >= 0")
    need(g.samples >= 1, "[gpu].samples", "must be >= 1")
    need(g.sample_interval_s >= 0, "[gpu].sample_interval_s", "must be >= 0")
    need(g.wait_s > 0, "[gpu].wait_s", "must be > 0")
    need(g.wait_max_s >= 0, "[gpu].wait_max_s", "must be >= 0")
    need(g.quick_recheck_s >= 0, "[gpu].quick_recheck_s", "must be >= 0")

    prof = cfg.profile
    need(prof.kind in ("auto", "ncu", "rocprofv3", "none"), "[profile].kind",
         f'must be "auto", "ncu", "rocprofv3" or "none", not {prof.kind!r}')
    need(0 <= prof.run_noise_pct <= 50, "[profile].run_noise_pct", "must be between 0 and 50")
    need(1 <= prof.repeats <= 20, "[profile].repeats", "must be between 1 and 20")
    if prof.kernel:
        import re

        try:
            re.compile(prof.kernel)
        except re.error as exc:
            raise BadInput(f"{source}: [profile].kernel is not a valid regex: {exc}") from None

    pr = cfg.propose
    need(pr.kind in ("manual", "command", "tune"), "[propose].kind",
         f'must be "manual", "command" or "tune", not {pr.kind!r}')
    _validate_agent(pr, need)
    need(pr.timeout_s >= 0, "[propose].timeout_s", "must be >= 0 (0: the agent preset's)")
    need(0 <= pr.repair_attempts <= 10, "[propose].repair_attempts", "must be between 0 and 10")
    if pr.kind == "tune":
        need(bool(pr.tune.params), "[propose.tune].params", 'is required when [propose].kind = "tune"')
        need(bool(pr.tune.space), "[propose.tune].space", 'is required when [propose].kind = "tune"')
    need(not pr.tune.params or _inside(pr.tune.params), "[propose.tune].params",
         f'must be a path relative to the repo root (no absolute path, no ".."), not {pr.tune.params!r}')
    for name in pr.tune.order:
        need(name in pr.tune.space, "[propose.tune].order", f"names {name!r}, which is not in [propose.tune].space")
    need(not pr.tune.shared_first or pr.tune.per_class, "[propose.tune].shared_first",
         "needs per_class = true (it steps every class at once before tuning each on its own)")
    for name, values in pr.tune.space.items():
        need(len(values) > 0, f"[propose.tune].space.{name}", "must list at least one value")
    for cls, groups in pr.tune.alike.items():
        for name, values in groups.items():
            key = f"[propose.tune].alike.{cls!r}.{name}"
            need(name in pr.tune.space, key, f"names {name!r}, which is not in [propose.tune].space")
            listed = {repr(v) for v in pr.tune.space.get(name, [])}
            off = [v for v in values if repr(v) not in listed]
            need(not off, key, f"lists {off[0]!r}, which is not among [propose.tune].space.{name}" if off else "")
            need(len(values) > 1, key, "must list at least two values (the ones that launch the same kernel)")

    par = cfg.parallel
    need(1 <= par.lanes <= 64, "[parallel].lanes", f"must be between 1 and 64, not {par.lanes}")
    need(par.backend in ("local", "ray"), "[parallel].backend", f'must be "local" or "ray", not {par.backend!r}')
    need(bool(par.address.strip()), "[parallel].address", 'must name the Ray cluster ("auto" or host:port)')
    need(par.connect_timeout_s > 0, "[parallel].connect_timeout_s", "must be > 0")

    s = cfg.stop
    need(s.consecutive_regressions >= 1, "[stop].consecutive_regressions", "must be >= 1")
    need(s.consecutive_failures >= 1, "[stop].consecutive_failures", "must be >= 1")
    need(s.max_iters >= 0, "[stop].max_iters", "must be >= 0")
    need(s.max_hours >= 0, "[stop].max_hours", "must be >= 0")
    need(0 < s.target_pct_of_peak <= 100, "[stop].target_pct_of_peak", "must be in (0, 100]")

    r = cfg.roofline
    for key in ("flops", "bytes"):
        if getattr(r, key):
            expr.parse(getattr(r, key), where=f"{source}: [roofline].{key}")
    need(r.unit_scale > 0, "[roofline].unit_scale", "must be > 0")


def _validate_agent(pr: ProposeConfig, need: Any) -> None:
    """[propose] keys of the command proposer and its agent preset."""
    from kopt_supervisor.engine.propose import agents

    command = pr.command.strip()
    need(pr.kind != "command" or bool(command) or bool(pr.agent), "[propose].command",
         'is required when [propose].kind = "command" (or name an agent preset: [propose].agent)')
    need(not pr.agent or pr.agent in agents.PRESETS, "[propose].agent",
         f"must be one of {', '.join(repr(a) for a in agents.AGENT_NAMES)}, not {pr.agent!r}")
    need(not pr.agent or pr.kind == "command", "[propose].agent",
         f'needs [propose].kind = "command" (an agent is a command proposer), not {pr.kind!r}')
    need(pr.agent != "generic" or bool(command), "[propose].command",
         'is required with [propose].agent = "generic" (a CLI without a preset)')
    need(pr.session in ("fresh", "resume"), "[propose].session", f'must be "fresh" or "resume", not {pr.session!r}')
    if pr.session == "resume":
        need(pr.kind == "command", "[propose].session", '= "resume" needs an agent ([propose].kind = "command")')
        need(agents.supports_resume(pr.agent, command), "[propose].session",
             f'= "resume": {_agent_name(pr)} cannot continue a session'
             + (" (aider has no session id)" if pr.agent == "aider" else "")
             + (" (put {session} in [propose].command where the CLI takes the session id)"
                if command or pr.agent in ("", "generic") else ""))
    need(not pr.model or bool(pr.agent) and pr.agent != "generic" and not command, "[propose].model",
         "needs an agent preset without [propose].command (put the model in the command instead)")
    need(not pr.args or bool(pr.agent) and pr.agent != "generic" and not command, "[propose].args",
         "needs an agent preset without [propose].command (put the arguments in the command instead)")
    for key in ("budget_usd", "budget_tokens"):
        value = getattr(pr, key)
        need(value >= 0, f"[propose].{key}", "must be >= 0 (0: no limit)")
        need(value == 0 or pr.kind == "command", f"[propose].{key}",
             'counts agent runs: it needs [propose].kind = "command"')
    if pr.budget_usd > 0 and pr.agent:
        pre = agents.PRESETS[pr.agent]
        need(pre.reports_cost, "[propose].budget_usd",
             f"cannot be kept: {pre.title} reports no cost (use [propose].budget_tokens)")
    need(pr.transcript_max_kib >= 16, "[propose].transcript_max_kib", "must be >= 16")
    need(8 <= pr.prompt_max_kib <= 1024, "[propose].prompt_max_kib", "must be between 8 and 1024")


def _agent_name(pr: ProposeConfig) -> str:
    if pr.command.strip():
        return "[propose].command without {session}"
    return f'the "{pr.agent}" agent' if pr.agent else "a plain command"


def _inside(path: str) -> bool:
    """A relative path or glob that stays inside the folder it is resolved in."""
    from pathlib import PurePosixPath

    p = PurePosixPath(path)
    return bool(path.strip()) and not p.is_absolute() and ".." not in p.parts and not path.startswith("~")


# ---------------------------------------------------------------------------------------
# Writing (the frozen copy in a workspace shows every effective value)


def dumps(cfg: Config) -> str:
    """TOML text for a Config: every section and key, defaults included."""
    out: list[str] = []
    for f in dataclasses.fields(cfg):
        _dump_table(getattr(cfg, f.name), f.name, out)
    return "\n".join(out).strip() + "\n"


def _dump_table(obj: Any, name: str, out: list[str]) -> None:
    out.append(f"[{name}]")
    nested = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            nested.append((f.name, value))
        elif value is not None:
            out.append(f"{f.name} = {_toml_value(value)}")
    out.append("")
    for key, value in nested:
        _dump_table(value, f"{name}.{key}", out)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def _toml_key(k: str) -> str:
    import re

    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_value(k)
