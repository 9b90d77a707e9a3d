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
the body to wrap. The decision-cost estimate (`estimate_decision_s`) is here too: the loop
calls it after the baseline.

Modules: detect (where the table is, what each column is), proposal (propose, settle, write:
the steps in order), steps (each step's rules: the choices and questions), draft (the
proposal and its commented text; what one decision will cost), imports (the static scan
behind protected and sources), scratch (where `kopt init` runs the bench, never the user's
checkout, the draft that keeps the measured run, and serving a perf_report bench by import).
"""

from kopt_supervisor.engine.onboard.detect import BenchRun, Candidate, RunBench, candidates
from kopt_supervisor.engine.onboard.draft import (
    Choice,
    DecisionCost,
    Proposal,
    Question,
    estimate_decision_s,
    run_noise_pct,
)
from kopt_supervisor.engine.onboard.proposal import answers_from, propose, settle, sources_warning, write
from kopt_supervisor.engine.onboard.scratch import local_run_bench, run_once, tree_stamps, written_since

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
    "estimate_decision_s",
    "local_run_bench",
    "propose",
    "run_noise_pct",
    "run_once",
    "settle",
    "sources_warning",
    "tree_stamps",
    "write",
    "written_since",
]
