"""What `kopt export` counts as source (pure): a file change is exported unless a rule says why not.

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
from pathlib import PurePosixPath

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
