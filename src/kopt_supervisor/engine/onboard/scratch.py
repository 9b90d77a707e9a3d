"""Where `kopt init --bench` runs the bench, and what it keeps of the run.

    run = run_in_scratch(top, commit, bench, run_bench, scratch)   # never in the user's checkout
    run = save_draft(run, draft, commit)                            # outputs kept in the workspace root
    run = load_draft(draft, top, bench, commit)                     # the same run, or None

The bench runs in a copy of the commit's tracked files (gitops.export_tree), as it will run
in the run's worktrees: the user's checkout is never written to, whatever the bench writes.
A tracked file the bench wrote (a results CSV it appends to, with the file's whole history in
it) is taken out and the bench run once more without it, so the file holds this run's rows
only; the proposal then names it in [target].untrack, and every run of the loop starts
without it too (the run's baseline is a commit of kopt's own without the file).

For a perf_report bench, kopt's module then imports it in the same copy (`with_import_probe`,
onboard/served.py): whether the bench can be served by import is measured where it ran.

The draft keeps the measured run (its stdout, the files it wrote, its duration, the probe) beside the
proposed kopt.toml, so `kopt init --bench ... --answer ...` or `--yes` after a first attempt
reuses it instead of running the bench again; a different bench command or HEAD measures
anew.

`run_once` runs the bench once, timed; `local_run_bench` is a plain `run_bench` (its process
group, a log, what it wrote: `tree_stamps` before and `written_since` after) for tests and
as the body to wrap.

Side effects: the copy, the bench runs (through `run_bench`), the draft's files.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from dataclasses import replace
from pathlib import Path

from kopt_supervisor.engine.onboard.detect import BenchRun, RunBench

MAX_KEPT_BYTES = 64 << 20
DRAFT_RUN = "run.json"


def run_in_scratch(top: Path, commit: str, bench: str, run_bench: RunBench, scratch: Path) -> BenchRun:
    """The bench run in `scratch`/tree, a copy of `commit`'s tracked files; again without the
    tracked files it wrote, when it wrote any (see the module docstring)."""
    from kopt_supervisor.engine import gitops

    tree = gitops.export_tree(top, commit, scratch / "tree")
    tracked = set(tree_stamps(tree))
    first = run_once(tree, bench, run_bench)
    first = replace(first, repo=tree)
    rewritten = sorted({first.rel(f) for f in first.files_written} & tracked)
    if first.returncode != 0:
        return first
    if rewritten:
        for rel in rewritten:
            (tree / rel).unlink(missing_ok=True)
        first = replace(run_once(tree, bench, run_bench), repo=tree, untracked=tuple(rewritten))
    return with_import_probe(first, run_bench, scratch)


def with_import_probe(run: BenchRun, run_bench: RunBench, scratch: Path) -> BenchRun:
    """The run with its import probe (onboard/served.py), tried in the same copy after it;
    the run's stdout and stderr are kept aside first (run_bench logs every command under one
    name)."""
    from kopt_supervisor.engine.onboard import served

    if run.returncode != 0:
        return run
    kept = scratch / "bench.out"
    shutil.copyfile(run.stdout_path, kept)
    err = run.stdout_path.with_suffix(".err")
    if err.is_file():
        shutil.copyfile(err, kept.with_suffix(".err"))
    run = replace(run, stdout_path=kept)
    return replace(run, probe=served.import_probe(run, run_bench))


def save_draft(run: BenchRun, draft: Path, commit: str) -> BenchRun:
    """Keep the run's stdout and the files it wrote (regular files up to MAX_KEPT_BYTES;
    never through a link) in `draft`, with run.json; the run as read back from there."""
    out = draft / "outputs"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    kept: list[str] = []
    for f in run.files_written:
        rel = run.rel(f)
        src = run.outputs / rel
        try:
            st = src.lstat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_KEPT_BYTES or rel.startswith(("/", "..")):
            continue
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out / rel)
        kept.append(rel)
    stdout = draft / "stdout.out"
    shutil.copyfile(run.stdout_path, stdout)
    err = run.stdout_path.with_suffix(".err")
    if err.is_file():
        shutil.copyfile(err, stdout.with_suffix(".err"))
    meta = {
        "bench": run.bench,
        "commit": commit,
        "returncode": run.returncode,
        "seconds": run.seconds,
        "files_written": kept,
        "untracked": list(run.untracked),
        "measured_at": time.time(),
        "probe": run.probe,
    }
    (draft / DRAFT_RUN).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return replace(run, stdout_path=stdout, files_written=tuple(Path(k) for k in kept), out_dir=out)


def load_draft(draft: Path, top: Path, bench: str, commit: str) -> BenchRun | None:
    """The run a draft kept, for the same bench command at the same commit; else None."""
    try:
        meta = json.loads((draft / DRAFT_RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("bench") != bench or meta.get("commit") != commit:
        return None
    if meta.get("returncode") != 0 or not (draft / "stdout.out").is_file():
        return None  # a failed run is measured again (it may have been the machine's fault)
    probe = meta.get("probe")
    return BenchRun(
        bench,
        top,
        0,
        draft / "stdout.out",
        tuple(Path(f) for f in meta.get("files_written", [])),
        float(meta.get("seconds", float("nan"))),
        draft / "outputs",
        tuple(str(u) for u in meta.get("untracked", [])),
        probe if isinstance(probe, dict) else None,
    )


def measured_at(draft: Path) -> str:
    """When the draft's run was measured (for the line saying it is reused)."""
    try:
        t = float(json.loads((draft / DRAFT_RUN).read_text(encoding="utf-8"))["measured_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return "earlier"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


# ---------------------------------------------------------------------------------------
# Running the bench once, and what it wrote


Stamps = dict[str, tuple[int, int, int]]
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def tree_stamps(root: Path) -> Stamps:
    """Every regular file under `root` (outside .git, caches and virtualenvs; symbolic links
    skipped): relative path -> (mtime_ns, size, inode), to tell afterwards which files a run
    wrote."""
    out: Stamps = {}
    root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # a link the bench made points anywhere: never read through it
            out[p.relative_to(root).as_posix()] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return out


def written_since(root: Path, before: Stamps) -> list[Path]:
    """Files under `root` created or changed since `before` (tree_stamps), relative paths."""
    after = tree_stamps(root)
    return [Path(k) for k, v in sorted(after.items()) if before.get(k) != v]


def local_run_bench(log_dir: Path, *, timeout_s: float = 900.0, env: dict[str, str] | None = None) -> RunBench:
    """A run_bench that runs the command in its process group (engine.runner), logs to
    `log_dir`, and reports the files it wrote. No gate, no sandbox: wrap it for those."""
    from kopt_supervisor.engine.runner.command import run as run_command

    def run_bench(cmd: str, cwd: Path) -> tuple[int, Path, list[Path]]:
        before = tree_stamps(cwd)
        res = run_command(cmd, cwd=cwd, log_dir=log_dir, name="init_bench", timeout_s=timeout_s, env=env)
        return (res.returncode if res.returncode is not None else -1), res.stdout_path, written_since(cwd, before)

    return run_bench


def run_once(repo: Path, bench: str, run_bench: RunBench) -> BenchRun:
    """Run the bench once in `repo` through `run_bench`, timed."""
    t0 = time.monotonic()
    rc, stdout_path, files = run_bench(bench, repo)
    seconds = time.monotonic() - t0
    return BenchRun(bench, repo, rc, Path(stdout_path), tuple(Path(f) for f in files), seconds)
