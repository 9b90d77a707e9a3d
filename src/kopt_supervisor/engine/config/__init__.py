"""kopt.toml's schema and its defaults: one frozen dataclass per section; a field's type and
default are the key's type and default, its docstring what the key means (docs/files.md lists
them). Its loading, validation with errors that name the key at fault, and the frozen copy
written back are `config.toml_io` (pure: reads a file or a string, returns a `Config`).

Loading (`toml_io.load`) builds these from the TOML tables, `toml_io.validate` checks their
values, `toml_io.dumps` writes them back.

Besides, the agent presets as [propose] is validated against them (`KINDS`): each preset's
name, title, whether its CLI continues a session and whether it reports its cost.
engine/propose/agents builds the presets themselves (argv, usage parsers, executables) on
this table.

Pure: data only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("csv", "table", "perf_report", "pytest-benchmark", "google-benchmark", "torch-benchmark", "long")
"""[target].format: how the bench's output is read (engine/adapters; docs/files.md)."""


@dataclass(frozen=True)
class AgentKind:
    title: str
    resumes: bool
    """Its CLI continues a session by its id ([propose].session = "resume")."""
    reports_cost: bool
    """Its usage report holds a cost in USD ([propose].budget_usd can be kept)."""


KINDS = {
    "claude-code": AgentKind("Claude Code", resumes=True, reports_cost=True),
    "codex": AgentKind("OpenAI Codex CLI", resumes=True, reports_cost=False),
    "gemini": AgentKind("Gemini CLI", resumes=True, reports_cost=False),
    "aider": AgentKind("aider", resumes=False, reports_cost=True),
    "opencode": AgentKind("opencode", resumes=True, reports_cost=True),
    "generic": AgentKind("any CLI ([propose].command)", resumes=False, reports_cost=True),
}
AGENT_NAMES = tuple(KINDS)
"""Every [propose].agent preset, in the order the docs list them."""


def supports_resume(name: str, command: str = "") -> bool:
    """A preset that continues sessions, or a command that takes the `{session}` placeholder."""
    if command and "{session}" in command:
        return True
    return name in KINDS and KINDS[name].resumes and not command


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
    calls: str = ""
    """The column saying how many timed calls each row's latency is the per-call time of
    (e.g. `reps`), in [roofline].unit_scale seconds per unit. With it, a process-level
    decision weighs the seconds the bench says its timed calls took against its process's
    wall time: a claimed saving the wall time cannot explain (work moved outside the timed
    region, a lazy result) goes to review (decide/plausible.py `wall_time_unexplained`).
    Latency metrics only."""
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
    untrack: list[str] = field(default_factory=list)
    """Tracked files the bench writes into the repository (a results CSV it appends to):
    `kopt init` makes the run's baseline a commit of kopt's own, on the run's branch, without
    them, so every bench run in best/ and cand/ starts without the file and writes only its
    own rows, and the user's checkout is never modified. `kopt init --bench` proposes it for
    the files it saw the bench write. They are also protected: a candidate may not add them."""
    timeout_s: float = 900.0
    max_output_mib: float = 512.0
    """A bench, proposer or formatter writing more than this (stdout, stderr, or any one
    file) is killed: gigabytes of output never fill the disk."""
    serve: str = ""
    """A command that serves looks of ONE tree (docs/files.md, "The per-tree serve protocol"),
    run like `bench`: working directory the tree, confined to it (read-only) with a cache of
    its own and one output folder it may write. Set, kopt measures with two such processes
    per lane, best's and the candidate's (never one process holding both trees), alternated
    ABBA on the same GPU, one seed per look for both, and audits one timed call per config
    picked after the look. It writes kopt's CSV ([target].format = "csv"); name its `calls` column
    in [target].calls so the OS's accounting can weigh what the bench claims."""
    serve_prepare: bool = False
    """The `serve` command also answers `prepare N SEED` (kopt's harness does; docs/files.md):
    on a GPU kopt then prepares each look in both processes at once (the checks, the draws,
    the graph captures) and times each alone, and a new pair's warm-up is a `prepare`. A
    command that does not know the request may leave it unanswered: off unless set."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for the bench and the proposer."""
    compile_flags: str = ""
    """How the target builds (flags that change numerics or code generation), for the report."""
    allow_constructs: list[str] = field(default_factory=list)
    """The diff scan's allow-list: entries "rule-id:path-glob" (rule "*": every rule) for
    the legitimate constructs of this target, e.g. "module-state:solution/*.py" for a
    per-shape kernel cache at module level. Rule ids: engine/diffscan/findings.py RULES, docs/files.md."""
    network: bool = False
    """The bench, profiler and formatter may use the network (they run candidate
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
    """A keep more than this many times faster in any class, or in any single config, needs
    the stronger checks (profiler, output audit on fresh inputs) before it is final; it goes
    to review only when they disagree or cannot run (docs/decision.md step 13)."""
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
    pooled_noise: bool = True
    """A class's interval takes its width from the spread of the run's earlier decisions
    (their looks around each decision's order means, pooled: hundreds of degrees of freedom
    instead of the decision's own 2-10), unless the decision's own looks are noisier by an F
    test at 1%, only once its own has 2 degrees of freedom, and only when the run's has more
    than the decision's own; each decision's dropped looks (outliers, the gate's) stay out of
    the pool. On the H200's decisions of
    2026-12-01, replayed, comment-only candidates tied at 4 looks instead of 5-9 and a ~3% step
    was kept in 4-6 instead of 4-7
    (experiments/pooled_noise_replay.py, docs/decision.md). Live on the H200 the same day, on:
    34 comment-only candidates tied, none kept, 31 at 4 looks; the ~3% step kept 18 of 18
    (docs/h100-wave3/part24-pooled-noise-live-h200.md)."""


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
    run_noise_pct: float = 0.3
    """Run-to-run spread (CV, %) of a profile's per-class GPU time, added to the
    launch-to-launch spread when each tree is profiled once. Default: five ncu runs of one
    unchanged tree on an H100 spread by CV 0.16-0.27% (issue 17). Measure yours with
    `repeats` >= 2 on an unchanged tree."""
    repeats: int = 1
    """Profiles of each tree per comparison; with 2 or more the run-to-run spread is
    measured from them (Student's t) instead of taken from run_noise_pct."""
    outside_ranges: str = "time"
    """What ncu records of the kernels launched outside the `kopt:` ranges (the bench's
    reference, inputs, checks): "time" (a second pass with GPU time alone: the comparison
    needs only their time, and replaying them with every metric made the profile ~100x
    slower) or "full" (one pass, every kernel with every metric). rocprofv3 ignores it."""
    keep: str = "time"
    """What a keep's two trees are profiled for: "time" (one pass over the whole run with GPU
    time alone: what the per-class check and the outside-time rule read; ncu's two passes with
    every metric took 48-54 s a keep on the H100) or "full" (the baseline's passes: the
    occupancy and DRAM figures of the kept tree too). The baseline is always profiled "full"
    when `baseline` = "start"."""
    baseline: str = "auto"
    """When the baseline's tree is profiled: "first-keep" (by the run's first keep, beside its
    candidate in the keep's pass: that profile's seed and outputs are the baseline's that every
    later keep is compared with; nothing is profiled before the first verdict, and a run that
    keeps nothing never pays for it; on the H200 the baseline's separate profile took 43-55 s
    before the first proposal), "early" (before the first proposal, the way a keep profiles a
    tree: `keep`'s passes, the bench's own calls; a first keep within `reuse_best_s` of it
    profiles its candidate alone against it, as later keeps do against best's), "start" (every
    metric, before the first proposal: the first context pack and the dashboard show it) or
    "auto" (Config.baseline_profile)."""
    reuse_best_s: float = 900.0
    """With keep = "time": best's tree is not profiled again when the keep that made it BEST
    profiled it (as its candidate) on the same GPU at most this many seconds ago; its summary
    is compared with the new candidate's. 0: best is profiled at every keep."""
    ahead: str = "auto"
    """Start a keep's profile while the decision runs, held by kopt's harness until the
    decision keeps (loop/profile_runs.py `HeldProfile`): "on", "off", or "auto" (on for a
    served target, `[target].serve`, whose profile command is kopt's harness). A command that
    does not hold fails the keep's profile and turns it off for the run."""


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
    """A spec wiki folder; default: the one shipped in the package (kopt_supervisor/gpu_wiki)."""
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

    def baseline_profile(self) -> str:
        """[profile].baseline resolved: "auto" is "start" where someone reads the profile before
        the first verdict (an agent preset's context pack, the person at the manual proposer);
        "early" for the tune proposer where the first keep could reuse it (its proposals take
        seconds, so a first keep comes well within `reuse_best_s`: the profile is moved off that
        keep's path, not added); else "first-keep" (a plain command, whose first keep may come
        after the early profile has aged out)."""
        if self.profile.baseline != "auto":
            return self.profile.baseline
        reads = self.propose.kind == "manual" or (self.propose.kind == "command" and bool(self.propose.agent))
        if reads:
            return "start"
        prof = self.profile
        reusable = prof.keep == "time" and prof.reuse_best_s > 0 and prof.repeats == 1
        return "early" if self.propose.kind == "tune" and reusable else "first-keep"

    def replace(self, section: str, **changes: Any) -> Config:
        """A copy with some keys of one section changed (CLI overrides)."""
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})
