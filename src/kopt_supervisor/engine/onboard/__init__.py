"""`kopt init --bench CMD` without a config: run the bench once, find its table, propose a
commented kopt.toml (docs/design.md §14; docs/byo-kernel.md).

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

Modules: detect (where the table is), columns (what each column is), proposal (the steps in
order), steps (each step's rules: the choices and questions), draft (the proposal and its
commented text), imports (the static scan behind protected and sources), cost (what one
decision will cost), scratch (where `kopt init` runs the bench, never the user's checkout, and
the draft that keeps the measured run for the next attempt).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from kopt_supervisor.engine.onboard.cost import DecisionCost, estimate_decision_s, run_noise_pct
from kopt_supervisor.engine.onboard.detect import BenchRun, Candidate, RunBench, candidates
from kopt_supervisor.engine.onboard.imports import scan, unreviewed
from kopt_supervisor.engine.onboard.proposal import (
    Choice,
    Proposal,
    Question,
    answers_from,
    propose,
)
from kopt_supervisor.engine.onboard.scratch import (
    local_run_bench,
    run_once,
    tree_stamps,
    written_since,
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


def settle(
    run: BenchRun, answers: dict[str, str] | None = None, ask: Callable[[Question], str] | None = None
) -> Proposal:
    """The proposal with every question answered: from `answers` (`--answer key=value`),
    then by `ask` (the CLI's prompt, in a terminal) one question at a time; without `ask`
    an open question is a BadInput whose one line names the candidates."""
    from kopt_supervisor.engine.errors import BadInput

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
    from kopt_supervisor.engine.errors import BadInput

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
