"""`kopt init --bench CMD` without a config: run the bench once, find its table, propose a
commented kopt.toml (docs/design.md §14; docs/byo-kernel.md). This façade names what callers use.

    run = run_once(repo, bench, run_bench)        # the one side effect: the bench, through run_bench
    proposal = propose(run, answers)              # pure apart from reading what the run wrote
    proposal.questions                            # [] or what the CLI must ask (Question.choices)
    proposal = settle(run, answers, ask)          # asks them one by one (ask=None: one-line error)
    write(proposal, repo / "kopt.toml")           # the commented file (loads with engine.config)

`run_bench(cmd, cwd) -> (returncode, stdout_path, files_written)` is the caller's: the CLI runs
the bench through the GPU gate and the sandbox, as candidate code runs; `local_run_bench`
is a plain implementation (runner.command.run plus a before/after look at the tree) for tests and as
the body to wrap. The decision-cost estimate (`estimate_decision_s`) is here too, at the end of
this module: the loop calls it after the baseline. It gives wall seconds
from the baseline's runs, their noise and the decision policy (docs/design.md §5;
docs/decision.md). Process-level (the bench run as it is): a round is two runs, best and
candidate (ABBA across rounds), each as long as a baseline run. The policy looks after every
round from `min_rounds` on and stops when the interval of the mean log ratio settles the
class; at a per-run noise σ (the baseline's spread between runs) a round's paired sample
varies by about √2·σ, so look k settles a no-change candidate (tie) once t(α_k, k−1)·√2σ/√k <
log(1 + min_effect) and a true change of twice min_effect once it is below log(1 +
2·min_effect). `ab` (one process per look, both trees in it) and `served` (one process
start, then looks) cost a start plus `look_s` per look. The estimate ignores the gate's waits
and the proposer; it is what the bench itself costs. Above `SLOW_S` it says so, and points
to the harness (docs/byo-kernel.md): on the H100 the served bench decided an A/A in 5-9
looks of 0.35 s where process-level rounds took 17 s each.

Modules: this one (propose, settle, write: the steps in order, below), detect (where the table
is, what each column is), steps (each step's rules: the choices and questions), draft (the
proposal and its commented text; what one decision will cost; the static scan of the bench's
imports behind protected and sources), scratch (where `kopt init` runs the bench, never the user's
checkout, the draft that keeps the measured run, and serving a perf_report bench by import).

A kopt.toml proposed from one run of a bench: every choice with its reason, questions
where the output does not say.

    propose(run, answers) -> Proposal
    Proposal.text()         the commented kopt.toml (loads with engine.config)
    Proposal.questions      what must be answered first (the CLI asks, or fails in one line)
    settle(run, answers, ask) -> Proposal   every question answered (ask=None: a one-line error)
    write(proposal, path)   the commented file, never over an existing one unless told
    sources_warning(...)    `kopt init`'s warning for a config that declares no [target].sources

The choices, in order (docs/byo-kernel.md explains them for the user):
1. the table: a file the bench wrote over a table printed on stdout (read exactly, not by
   layout); several files, or several stdout tables with different columns: a question;
2. kopt's own harness output (`us`, `err`, `prod`, `seed`...): its known kopt.toml, with the
   served mode, one process per tree (`serve`, with `calls`);
3. the metric: the columns that are times or rates (by unit and name); a format's convention
   (pytest-benchmark's median, Google Benchmark's real time) or a reference implementation's
   name (torch_ms, cuBLAS) narrows them; a time over a rate of the same run; any other tie is
   a question (never a guess);
4. direction from the unit (a time: min; a rate: max; a time of unknown unit: min, said);
5. correctness: error columns (`err`, `max_abs_err`, `diff`...) with a tolerance (0 when the
   run's values were all 0, else 10x the worst value seen: CHECK), pass/ok/correct columns,
   failure flags and counts; none: a warning that only NaN/Inf/missing values can fail a row;
6. config columns: the format's, else text and whole-number columns; everything else ignored;
7. classes: dtype columns and text columns of 2-4 values (a different dtype or mode runs
   other code), a dimension of 2-3 values shared by several configs; at most 8 classes;
8. protected and sources: a static scan of the bench's imports (onboard/draft.py);
9. timeout: 10x the run, at least 2 minutes; the cost of one decision (below).

A perf_report bench that kopt's module could import in the scratch copy (onboard/scratch.py,
the run's probe) is served by import once the metric (its kernel's line) is chosen: the
harness's [target] (`bench`, `serve`, `us`, `err <= 1`, `calls`) replaces steps 5-6, the
classes still from step 7's rule over the perf_report table; where it could not, the
process-level proposal stays and its header says why.

Every proposal says whether its looks are served (`Proposal.served`, `Proposal.serving`): a
process-level one says why, and names the repo's scripts on kopt's harness that would be served
(`kopt_bench.py` beside examples/softmax's own `bench.py`) with the `kopt init --bench` command
for them.

Pure apart from reading the bench's outputs and source files.

draft holds the Proposal, its questions, the commented kopt.toml it renders to; steps each
step's rules; this module runs the steps in order, and settles and writes the result.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide import t_quantile
from kopt_supervisor.engine.decide.estimate import Policy, alpha_at_look
from kopt_supervisor.engine.onboard.detect import CONFIG, BenchRun, Candidate, RunBench, candidates, classify
from kopt_supervisor.engine.onboard.draft import (
    ANSWER_KEYS,
    DEFAULT_NOISE_PCT,
    HARNESS_HINT,
    MODES,
    Choice,
    DecisionCost,
    Proposal,
    Question,
    _dur,
    scan,
    unreviewed,
)
from kopt_supervisor.engine.onboard.scratch import (
    PROBED,
    kind_of,
    local_run_bench,
    not_served,
    plan,
    propose_served,
    reword_checks,
    run_once,
    tree_stamps,
    written_since,
)
from kopt_supervisor.engine.onboard.steps import (
    _choose_table,
    _classes,
    _is_harness,
    _propose_configs,
    _propose_correctness,
    _propose_files,
    _propose_harness,
    _propose_metric,
)


def run_noise_pct(runs: list[dict[str, float]]) -> float | None:
    """The per-run noise of a bench, in %: per config the standard deviation of log(value)
    across the runs, the median over configs. None with fewer than two runs in common."""
    if len(runs) < 2:
        return None
    common = set(runs[0]).intersection(*runs[1:])
    spreads = []
    for key in common:
        vals = [r[key] for r in runs]
        if all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in vals):
            spreads.append(statistics.stdev(math.log(v) for v in vals))
    if not spreads:
        return None
    return 100.0 * statistics.median(spreads)


def rounds_to_settle(effect: float, noise_pct: float, policy: Policy) -> tuple[int, bool]:
    """(looks, settled) for an interval half-width to fall below log(1 + effect) at noise
    √2·noise per look (the policy's alpha spending); (max_rounds, False) when it never does."""
    sigma = math.sqrt(2.0) * max(noise_pct, 1e-6) / 100.0
    target = math.log1p(effect)
    for k in range(max(policy.min_rounds, 2), policy.max_rounds + 1):
        alpha = alpha_at_look(k, policy, final=k == policy.max_rounds)
        half = t_quantile(1.0 - alpha / 2.0, k - 1) * sigma / math.sqrt(k)
        if half < target:
            return k, True
    return policy.max_rounds, False


def estimate_decision_s(
    baseline_run_seconds: list[float],
    policy: Policy,
    mode: str = "process",
    *,
    noise_pct: float | None = None,
    look_s: float | None = None,
) -> DecisionCost:
    """The cost of one decision (see the module docstring). `baseline_run_seconds`: the wall
    time of each baseline run (process-level bench runs); `noise_pct`: their run-to-run noise
    (run_noise_pct), DEFAULT_NOISE_PCT when None; `look_s`: for served, the seconds of one
    look when known (else a run's seconds stand in: an upper bound)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    runs = [s for s in baseline_run_seconds if isinstance(s, int | float) and math.isfinite(s) and s >= 0]
    if not runs:
        raise ValueError("estimate_decision_s: no baseline run seconds")
    run_s = statistics.median(runs)
    noise = noise_pct if noise_pct is not None and math.isfinite(noise_pct) else DEFAULT_NOISE_PCT
    eff = policy.min_effect_pct / 100.0
    tie, settled = rounds_to_settle(eff, noise, policy)
    change, _ = rounds_to_settle(2 * eff, noise, policy)
    change = min(change, tie)
    if mode == "process":
        round_s, start_s = 2.0 * run_s, 0.0
    else:
        round_s, start_s = (look_s if look_s is not None else run_s), run_s
    measured = noise_pct is not None and math.isfinite(noise_pct)
    return DecisionCost(
        mode,
        round_s,
        start_s,
        noise,
        tie,
        change,
        policy.max_rounds,
        not settled,
        noise_runs=max(len(runs), 2) if measured else 0,
    )


def _tail(path: Path, limit: int = 8192) -> str | None:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def propose(run: BenchRun, answers: Mapping[str, str] | None = None, *, policy: Policy | None = None) -> Proposal:
    """A kopt.toml for the bench of `run` (see the module docstring). `answers` settles the
    questions of an earlier proposal ({"table": key, "metric": column, "direction": "min"|"max"})."""
    answers = dict(answers or {})
    p = Proposal(run)
    if run.returncode != 0:
        err = run.stdout_path.with_suffix(".err")
        last = [ln for ln in (_tail(err) or "").splitlines() if ln.strip()][-1:]
        raise BadInput(
            f"kopt init --bench: the bench exited {run.returncode}"
            + (f" ({last[0][:200]})" if last else "")
            + f"; kopt proposes a config only from a run that succeeds (see its output: {run.stdout_path} "
            f"and {err.name})"
        )
    found = candidates(run)
    cand, question, table_why = _choose_table(run, found, answers)
    if question is not None:
        p.questions.append(question)
        return p
    if cand is None:
        listed = "; ".join(c.label() for c in found) or "none"
        raise BadInput(
            f"kopt init --bench: no table with a time or rate column in the bench's output "
            f"(stdout and the files it wrote; tables found: {listed}); name the table and its metric "
            f"with --answer table=KEY --answer metric=COLUMN (and --answer direction=min|max), print "
            f"a table with a time column such as `time_us`, or use kopt's harness (docs/byo-kernel.md)"
        )
    p.candidate = cand
    table = cand.table
    cols = classify(table)
    t = p.target
    t["bench"] = run.bench
    t["csv"] = cand.csv
    p.comments["target.csv"] = f"the table: {cand.label()}; {table_why}." + (
        " A timestamp in the file's name became *." if "*" in cand.csv else ""
    )
    if cand.format != "csv":
        t["format"] = cand.format
        p.comments["target.format"] = f"read by kopt's {cand.format} adapter (docs/files.md)"
    if cand.adapter_table:
        p.adapter["table"] = cand.adapter_table
        p.comments["target.adapter.table"] = "which of the output's tables"
    for note in table.notes:
        p.checks.append(f"the reader: {note}")

    harness = _is_harness(table)
    serving = None
    if harness:
        _propose_harness(p, table, cols)
    else:
        if not _propose_metric(p, table, cols, answers):
            return p
        serving = plan(run, p.target["metric"]) if table.format in PROBED else None
        if serving is not None and serving.lines:
            class_by, class_why = _classes([c for c in cols if c.role == CONFIG], table)
            propose_served(p, table, cols, serving, class_by, class_why)
        else:
            _propose_correctness(p, table, cols)
            _propose_configs(p, table, cols)
            if serving is not None:
                p.checks.append(
                    f"kopt cannot serve this {kind_of(table.format)} bench by import: {serving.why}. It is measured "
                    "process-level (each look a whole run, do_bench's time budget); docs/byo-kernel.md, "
                    '"Served by import", says what that path needs'
                )
    _propose_files(p)
    by_import = serving is not None and bool(serving.lines)
    if by_import:
        reword_checks(p)
    if harness:
        p.served, p.serving = True, "served: the bench prints kopt's harness CSV; [target].serve runs it once per tree"
    elif by_import:
        p.served, p.serving = True, "served by import: kopt's module imports the bench's benchmark function"
    else:
        p.serving = not_served(run, table, serving)
        if serving is None:  # a perf_report bench's failed probe has its own check above
            p.checks.append(p.serving)
    timeout = max(120, int(math.ceil(10 * run.seconds))) if math.isfinite(run.seconds) else 900
    t["timeout_s"] = timeout
    p.comments["target.timeout_s"] = (
        f"10x this run ({run.seconds:.1f} s), at least 2 minutes" if math.isfinite(run.seconds) else "the default"
    )
    pol = policy or Policy()
    seconds = serving.seconds if by_import and serving is not None and math.isfinite(serving.seconds) else run.seconds
    if math.isfinite(seconds):
        mode = "served" if harness or by_import else "process"
        p.cost = estimate_decision_s([seconds], pol, mode)
        if p.cost.slow and mode == "process":
            p.checks.append(f"one decision will take about {_dur(p.cost.seconds_tie)}: {HARNESS_HINT}")
    return p


def answers_from(pairs: list[str]) -> dict[str, str]:
    """`--answer key=value` arguments as a dict (BadInput naming a malformed one)."""
    out: dict[str, str] = {}
    for a in pairs:
        key, sep, value = a.partition("=")
        if not sep or key not in ("table", "metric", "direction"):
            raise BadInput(f"--answer {a!r}: expected one of {ANSWER_KEYS}")
        out[key] = value
    return out


def settle(
    run: BenchRun, answers: dict[str, str] | None = None, ask: Callable[[Question], str] | None = None
) -> Proposal:
    """The proposal with every question answered: from `answers` (`--answer key=value`),
    then by `ask` (the CLI's prompt, in a terminal) one question at a time; without `ask`
    an open question is a BadInput whose one line names the candidates."""
    given = dict(answers or {})
    for _ in range(8):  # at most table, metric, direction: a loop that does not settle is a bug
        p = propose(run, given)
        if p.complete:
            return p
        if ask is None:
            raise BadInput(p.error_line())
        q = p.questions[0]
        answer = ask(q).strip() or (q.default or "")
        if answer not in {c.value for c in q.choices}:
            raise BadInput(f"kopt init --bench: {answer!r} is not one of {', '.join(c.value for c in q.choices)}")
        given[q.key] = answer
    raise BadInput("kopt init --bench: the questions did not settle")


def write(proposal: Proposal, path: Path, *, overwrite: bool = False) -> Path:
    """Write the proposal's kopt.toml to `path` (never over an existing file unless told)."""
    if path.exists() and not overwrite:
        raise BadInput(f"{path}: exists already; kopt init --bench proposes a config only where there is none")
    text = proposal.text()
    path.write_text(text, encoding="utf-8")
    return path


def sources_warning(
    repo: Path, bench: str, tracked: Collection[str], protected: Sequence[str], sources: Sequence[str]
) -> str | None:
    """`kopt init`'s warning for a config that declares no [target].sources: the tracked files
    the bench reaches (imports.scan) that are not protected, named; None when sources are
    declared or nothing is left out."""
    if sources:
        return None
    left = unreviewed(scan(bench, repo), tracked, protected)
    if not left:
        return None
    shown = ", ".join(left[:8]) + (f" (+{len(left) - 8} more)" if len(left) > 8 else "")
    return (
        f"[target].sources is not declared, and the bench reads {shown}, which [target].protected does not "
        "cover: a candidate's change to any of them is measured as it is (a smaller input looks like a faster "
        "kernel). Declare [target].sources (the files a candidate is meant to change: a change to any other "
        "tracked file then goes to review with its lines quoted) and protect the rest"
    )


def config_warnings(
    workspace: Path, repo: Path, tracked: Collection[str], cfg: Config, *, always_protected: Sequence[str]
) -> list[str]:
    """`kopt init`'s warnings: with no [target].sources, the files the bench reads that nothing
    covers (`sources_warning`); a workspace inside the repository (`inside_repo_warning`); a
    [target].protected pattern that matches no tracked file (`unmatched_protected`)."""
    t = cfg.target
    found = (
        sources_warning(repo, t.bench, tracked, [*t.protected, *always_protected], t.sources),
        inside_repo_warning(workspace, repo),
        unmatched_protected(t.protected, tracked),
    )
    return [w for w in found if w]


def unmatched_protected(protected: Sequence[str], tracked: Collection[str]) -> str | None:
    """The protected patterns that match no tracked file, as the police match them
    (gitops.matching): right for a file a candidate must not add, but a typo (`kernel.pyy`,
    `src/kernels/` for `src/kernel/`) leaves what was meant unprotected, without a word."""
    from kopt_supervisor.engine import gitops

    paths = sorted(tracked)
    unmatched = [g for g in protected if not gitops.matching(paths, [g])]
    if not unmatched:
        return None
    return (
        f"[target].protected: {', '.join(repr(g) for g in unmatched)} match no tracked file (right for a "
        "file a candidate must not add; a typo leaves the file you meant unprotected)"
    )


def config_problem(repo: Path, cfg: Config) -> str | None:
    """`kopt init`'s refusal, in one line, of a config its run could not start: a proposer whose
    program is not on PATH (propose.agents.check_agent), or the tune proposer's params file not
    tracked in the repository (its first iteration failed with it, after the baseline)."""
    from kopt_supervisor.engine import gitops
    from kopt_supervisor.engine.propose.agents import check_agent

    missing = check_agent(cfg)
    params = cfg.propose.tune.params if cfg.propose.kind == "tune" else ""
    if missing or not params:
        return missing
    if Path(params).as_posix() not in gitops.tree_files(repo, "HEAD"):
        return f"[propose.tune].params = {params!r}: no such file tracked in {repo} (the tune proposer edits it)"
    return None


def inside_repo_warning(workspace: Path, repo: Path) -> str | None:
    """`kopt init`'s warning for a workspace made inside the repository it runs on (the default
    root `./workspaces` of a shell in the repo): git there then lists it as untracked, and
    `git add -A` would take kopt's worktrees in as embedded repositories. None elsewhere."""
    try:
        inside = workspace.resolve().is_relative_to(repo.resolve())
    except OSError:
        return None
    if not inside:
        return None
    return (
        f"the workspace {workspace} lies inside the repository {repo}: `git status` there lists it, and "
        "`git add -A` would take its worktrees in; pass --root (or set KOPT_ROOT) to a folder outside it"
    )


__all__ = [
    "BenchRun",
    "Candidate",
    "Choice",
    "DecisionCost",
    "Proposal",
    "Question",
    "RunBench",
    "answers_from",
    "candidates",
    "config_problem",
    "config_warnings",
    "estimate_decision_s",
    "inside_repo_warning",
    "local_run_bench",
    "propose",
    "run_noise_pct",
    "run_once",
    "settle",
    "sources_warning",
    "tree_stamps",
    "unmatched_protected",
    "write",
    "written_since",
]
