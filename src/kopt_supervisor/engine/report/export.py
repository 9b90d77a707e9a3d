"""`kopt export TAG --branch NAME`: a reviewable branch in the target repo.

The branch starts at the run's baseline commit and holds one commit per keep of the final
tree (oldest first), each with only that keep's source changes (`exclusion` says what is
not source) and a message made of its hypothesis and its measured verdict,
then one commit adding results.md. It is built with git plumbing on a private index
(engine.gitops.commit_with_changes) and the branch ref is created last, atomically and
only if the name is still free: nothing is checked out, and no existing branch, HEAD,
index or working tree of the repository is touched, so uncommitted work in it is safe.

Refused, with a one-line reason: an invalid or existing branch name, a run with no keep,
a run with no baseline.

What counts as source (`exclusion`, pure): a file change is exported unless a rule says why
not.

A kept commit holds whatever was in cand/ when kopt committed it: the proposer's edits,
and also what the bench, the profiler or a build wrote into the tree while the candidate
was timed. The rules, in order (the first that matches names the reason):

1. a build, profiler, log or scratch artifact by name (`ARTIFACT_GLOBS`), wherever it is;
2. the bench's CSV output (matches [target].csv);
3. for a file the branch does not hold yet (a new file):
   a. ignored by the target's .gitignore (at the baseline or at the kept commit);
   b. under a build, cache, log, profile or scratch folder (`ARTIFACT_DIRS`, `*.egg-info`);
   c. not among the files the proposer changed (the iteration's recorded `changed_files`,
      taken before any timing): it appeared while the candidate was timed.

A file the branch already holds (tracked at the baseline, or added by an earlier exported
keep) is never dropped by rule 3: the engineer chose to track it, so editing it is a source
change even under a folder called build/ or matching an ignore pattern.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from kopt_supervisor.engine import fmt, gitops
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report.writer import results_for_export
from kopt_supervisor.engine.workspace import Workspace

ARTIFACT_GLOBS: dict[str, tuple[str, ...]] = {
    "a compiled or build output": (
        "*.pyc",
        "*.pyo",
        "*.so",
        "*.o",
        "*.obj",
        "*.a",
        "*.lib",
        "*.dll",
        "*.dylib",
        "*.exe",
        "*.cubin",
        "*.fatbin",
        "*.hsaco",
        "*.whl",
    ),
    "a profiler report or trace": (
        "*.ncu-rep",
        "*.nsys-rep",
        "*.qdrep",
        "*.qdstrm",
        "*.sqlite",
        "*.rpd",
        "*.pftrace",
        "*.otf2",
        "*.pt.trace.json",
        "*_kernel_trace.csv",
        "*_kernel_stats.csv",
        "*_agent_info.csv",
        "*_results.db",
    ),
    "a log or scratch file": (
        "*.log",
        "nohup.out",
        "slurm-*.out",
        "*.tmp",
        "*.temp",
        "*.bak",
        "*.orig",
        "*.rej",
        "*.swp",
        "*.swo",
        "*~",
        ".DS_Store",
        "core",
        "core.[0-9]*",
    ),
}

ARTIFACT_DIRS = frozenset(
    {
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        ".triton",
        ".cache",
        "build",
        "dist",
        ".eggs",
        "logs",
        "profiles",
        "traces",
        "scratch",
        "tmp",
    }
)


def artifact_glob(path: str) -> tuple[str, str] | None:
    """(what it is, the glob) when the file's name marks it as an artifact."""
    name = PurePosixPath(path).name
    for what, globs in ARTIFACT_GLOBS.items():
        for g in globs:
            if fnmatch.fnmatchcase(name, g):
                return what, g
    return None


def artifact_dir(path: str) -> str | None:
    for part in PurePosixPath(path).parts[:-1]:
        if part in ARTIFACT_DIRS or part.endswith(".egg-info"):
            return part
    return None


def exclusion(
    path: str,
    *,
    ignored: bool,
    in_branch: bool,
    proposer_files: set[str] | None,
    bench_csv: str,
) -> str | None:
    """Why `path` is left out of the export, or None when it is source.

    `in_branch`: the export branch already holds the file (tracked since the baseline or
    added by an earlier exported commit). `proposer_files`: the iteration's recorded
    changed_files (None when the iteration recorded none: rule 3c cannot apply)."""
    hit = artifact_glob(path)
    if hit:
        return f"{hit[0]} (`{hit[1]}`)"
    if bench_csv and bench_csv != "-" and fnmatch.fnmatch(path, bench_csv):
        return f"the bench's CSV output ([target].csv = `{bench_csv}`)"
    if not in_branch:
        if ignored:
            return "ignored by the target's .gitignore"
        folder = artifact_dir(path)
        if folder:
            return f"a new file under `{folder}/` (build, cache, log, profile or scratch folder)"
        if proposer_files is not None and path not in proposer_files:
            return "not written by the proposer (it appeared while the candidate was timed)"
    return None


RESULTS_NAME = "results.md"


@dataclass
class ExportedKeep:
    version: int
    commit: str | None
    """The export branch's commit; None when nothing of the keep was source."""
    files: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)


def export_branch(ws: Workspace, branch: str) -> str:
    """Create `branch` in the run's target repo; returns a one-paragraph summary."""
    text, data = results_for_export(ws)
    repo = data.meta.get("repo")
    if not repo:
        raise BadInput(f"run {ws.tag!r}: its store names no target repository")
    gitops.check_branch_name(repo, branch)
    if gitops.branch_sha(repo, branch) is not None:
        raise BadInput(f"{repo}: branch {branch!r} already exists; choose another name (export never moves a branch)")
    if not data.chain:
        raise BadInput(f"run {ws.tag!r} has no kept iteration: there is nothing to export")
    cfg = ws.load_config()
    baseline = data.baseline.commit or ""
    in_branch = gitops.tree_files(repo, baseline)
    head = baseline
    exported: list[ExportedKeep] = []
    for it in data.chain:
        keep = export_keep(repo, it, head, in_branch, baseline, ws.tag, cfg.target.csv)
        exported.append(keep)
        if keep.commit:
            head = keep.commit
    results_path = RESULTS_NAME if RESULTS_NAME not in in_branch else f"results-kopt-{ws.tag}.md"
    blob = gitops.hash_blob(repo, text.encode("utf-8"))
    head = gitops.commit_with_changes(
        repo,
        head,
        [(results_path, "100644", blob)],
        f"kopt results of run {ws.tag}\n\nPer-config baseline and final latency, speedups, the kept iterations, "
        f"the commands, the environment and the GPU evidence, written by `kopt export {ws.tag}`.\n",
    )
    gitops.create_branch(repo, branch, head)
    return summary(branch, repo, baseline, exported, results_path)


def export_keep(
    repo: str, it: Iteration, head: str, in_branch: set[str], baseline: str, tag: str, bench_csv: str
) -> ExportedKeep:
    """Commit the source part of one keep on top of `head`; updates `in_branch`."""
    parents, _ = gitops.commit_info(repo, it.commit or "")
    parent = parents[0] if parents else (it.best_commit_before or baseline)
    diff = gitops.diff_paths(repo, parent, it.commit or "")
    paths = [p for _, p in diff]
    ignored = gitops.ignored_paths(repo, baseline, paths) | gitops.ignored_paths(repo, it.commit or "", paths)
    entries = gitops.tree_entries(repo, it.commit or "", paths)
    recorded = it.record.get("changed_files")
    proposer_files = set(recorded) if isinstance(recorded, list) else None
    keep = ExportedKeep(it.version, None)
    changes: list[tuple[str, str | None, str | None]] = []
    for status, path in diff:
        why = exclusion(
            path,
            ignored=path in ignored,
            in_branch=path in in_branch,
            proposer_files=proposer_files,
            bench_csv=bench_csv,
        )
        if why:
            keep.left_out.append((path, why))
            continue
        entry = entries.get(path)
        if status == "D" or entry is None:
            if path in in_branch:
                changes.append((path, None, None))
                in_branch.discard(path)
                keep.files.append(path)
            continue
        changes.append((path, entry[0], entry[1]))
        in_branch.add(path)
        keep.files.append(path)
    if changes:
        keep.commit = gitops.commit_with_changes(
            repo, head, changes, keep_message(it, tag, keep), author_date=it.finished_at
        )
    return keep


def keep_message(it: Iteration, tag: str, keep: ExportedKeep) -> str:
    dec = it.record.get("decision") or {}
    lines = [
        (it.hypothesis or f"kopt v{it.version}").splitlines()[0][:72],
        "",
        f"kopt run {tag}, iteration v{it.version}: {it.status} ({dec.get('by', 'engine')}): {dec.get('reason', '')}",
        "",
    ]
    for cls, c in sorted((it.record.get("classes") or {}).items()):
        if c.get("best") is None or c.get("cand") is None:
            continue
        interval = f" {fmt.interval(c['lo'], c['hi'])}" if fmt.is_num(c.get("lo")) and fmt.is_num(c.get("hi")) else ""
        lines.append(
            f"  {cls}: {fmt.num(c['best'])} -> {fmt.num(c['cand'])} "
            f"({fmt.change(c.get('delta_pct', 0.0))}{interval}, {c.get('verdict', '')})"
        )
    if dec.get("rounds"):
        lines += [
            "",
            f"Measured paired with the best of that moment over {dec['rounds']} rounds "
            f"({fmt.num(float(dec.get('gpu_seconds') or 0))} GPU-s).",
        ]
    if it.target_class:
        lines.append(f"Target class: {it.target_class}.")
    lines.append(f"kopt commit: {it.commit}")
    if keep.left_out:
        lines += ["", "Left out of this commit (not source):"]
        lines += [f"  {p}: {why}" for p, why in keep.left_out]
    return "\n".join(lines) + "\n"


def summary(branch: str, repo: str, baseline: str, exported: list[ExportedKeep], results_path: str) -> str:
    made = [k for k in exported if k.commit]
    empty = [k for k in exported if not k.commit]
    left = [(k.version, p, why) for k in exported for p, why in k.left_out]
    text = (
        f"created branch {branch} in {repo} from the baseline {baseline[:10]}: "
        f"{len(made)} commit(s) for {', '.join(f'v{k.version}' for k in made) or 'no keep'} "
        f"and one adding {results_path}; nothing was checked out"
    )
    if empty:
        text += f"; no source change in {', '.join(f'v{k.version}' for k in empty)}"
    if left:
        shown = "; ".join(f"{p} (v{v}: {why})" for v, p, why in left[:8])
        text += f"; left out {len(left)} file change(s): {shown}" + (" ..." if len(left) > 8 else "")
    return text
