"""Around every look: what it leaves and what is checked.

Each run's CSV and the files kopt read kept beside the iteration's logs, best/ strictly at
BEST_COMMIT before a look, both trees inspected and put back after every run of tree code, and
what a keep's confirmation and every profile run in: fresh caches (process-level), copies that say
neither side (served, profiles). The measurers (measure.py, served_trees.py) and the
evidence (evidence.py, profile_runs.py) call these around every run."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from kopt_supervisor.engine import gitops, sandbox, treecheck
from kopt_supervisor.engine.gitops import tree_of
from kopt_supervisor.engine.loop.context import Lane, RunContext
from kopt_supervisor.engine.metrics import BenchError
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.sandbox import read_output


def keep_csv(ctx: RunContext, it: Iteration, path: Path, name: str, suffix: str = ".csv") -> None:
    """A copy of what a run wrote, beside its logs (the tree's copy is cleaned away)."""
    if path.suffix != ".out":
        try:
            (ctx.ws.log_dir(it.version) / f"{name}{suffix}").write_bytes(read_output(path, 64 * 1024 * 1024))
        except OSError:
            pass


def keep_bytes(ctx: RunContext, it: Iteration, data: bytes, name: str) -> None:
    """What kopt read of a run's file, beside its logs."""
    try:
        (ctx.ws.log_dir(it.version) / name).write_bytes(data)
    except OSError:
        pass


def tree_hashes(lane: Lane, it: Iteration) -> tuple[str, str]:
    """(best's tree, the candidate's staged tree): the keys of their per-tree caches."""
    return tree_of(lane.best, it.best_commit_before or "HEAD"), str(it.record.get("evaluated_tree") or "")


def check_after_run(ctx: RunContext, lane: Lane, it: Iteration, tree: Path) -> None:
    """After a run of candidate (or best) code: the whole tree against what was measured.
    A changed tracked file, or new executable content, links or special files, fail the run
    (the tree is put back); whatever else the run left (its CSV, logs, caches) is removed, so
    nothing a bench wrote ever joins the candidate or runs in the next look."""
    cand = tree == lane.cand
    base = str(it.record.get("evaluated_tree") or "") if cand else it.best_commit_before or ""
    report = treecheck.inspect(tree, base or "HEAD", label=f"{tree.name}/")
    problems = {k: v for k, v in report.problems().items() if k != treecheck.SHADOWING}
    try:
        if report.modified:
            raise BenchError(
                f"the bench modified tracked file(s) in {tree.name}/: {', '.join(report.modified[:5])} (restored)"
            )
        if problems:
            raise BenchError(f"the bench left what a run must not in {report.reason()} (removed)")
    finally:
        if _as_measured(report):
            pass  # nothing to put back: restoring an unchanged tree was 3-4 git processes a run
        elif cand:
            gitops.restore_from_index(tree)
            gitops.remove_untracked(tree)
            gitops.remove_ignored(tree, keep=it.record.get("forced_paths", []))
        else:
            gitops.reset_clean(tree, base or "HEAD")


def _as_measured(report: treecheck.TreeReport) -> bool:
    """The tree is exactly what was measured: no file changed, gone or new (ignored ones
    included), nothing the index hides, and nothing git cannot put back (links, special or
    unreadable files, hard links, nested repositories)."""
    return not (
        report.differs
        or report.symlinks
        or report.special
        or report.unreadable
        or report.hardlinks
        or report.nested_repos
        or report.git_control
    )


def ensure_best_pristine(ctx: RunContext, lane: Lane, it: Iteration, r: int) -> None:
    """Right before a look: best/ exactly at BEST_COMMIT, untracked and ignored files included.
    A difference is restored and recorded; one that appeared between two looks of a decision
    (something wrote into best/ while it was measured) fails the decision."""
    best = it.best_commit_before or ""
    report = treecheck.inspect(lane.best, best, strict=True, modules=(), label=f"{lane.best.name}/")
    if not report.differs:
        return
    gitops.reset_clean(lane.best, best)
    ctx.event(
        "tamper",
        f"v{it.version}: best/ was not at BEST_COMMIT before look {r + 1}: "
        f"{report.reason() or ', '.join(report.new[:5])} (restored)",
        it=it,
        level="warn",
    )
    if r > 0:
        raise BenchError(
            f"best/ changed during the decision ({report.reason() or 'new files'}): earlier looks may "
            "have measured a tampered best"
        )


class FreshCaches:
    """Caches of a decision's own (`fresh_<lane>_<side>-<tree>`), emptied when the decision
    first uses them, never the trees' caches the measured runs filled: nothing the
    candidate's earlier processes left in a cache, a compiled kernel or a stored output,
    reaches the processes that verify it."""

    def __init__(self, ctx: RunContext, lane: Lane) -> None:
        self.ctx, self.lane = ctx, lane
        self._emptied: set[Path] = set()

    def path(self, side: str, tree_hash: str) -> Path:
        """The side's fresh cache folder, as it is (`get` empties it once per decision)."""
        return sandbox.cache_dir(self.ctx.ws.dir, f"fresh_{self.lane.index}_{side}", tree_hash)

    def get(self, side: str, tree_hash: str) -> Path:
        path = self.path(side, tree_hash)
        if path not in self._emptied:
            shutil.rmtree(path, ignore_errors=True)
            self._emptied.add(path)
        return path

    def new_decision(self) -> None:
        """Each folder is emptied again at its first use in the new decision (`get`); within a
        decision, a process started once more finds what the first one left."""
        self._emptied.clear()


NEUTRAL = "tree"
"""What a copy's logs are named after while it runs (`BlindCopy.move_logs` puts the side in)."""


class BlindCopy:
    """One tree's files, at `treeish`, exported without git's files into `<scratch>/<label>/tree`
    under a random label, with a new empty cache (`cache`) and an output folder (`out`) beside
    it: where a process runs that must not tell which side it is (a keep's confirmation, every
    profile). Nothing in its path, its cache or its output's path says best or candidate.

    Why: a tree kept once runs as BEST in every later decision. Code in it that is slow only
    there (told from best/ by its script's folder, its cache's or its output's path, its git
    files, its log's name) made a comment-only candidate 78% faster in the decision and, before
    these copies, in its confirmation too (tests/security/test_hostile_role_e2e.py); under the
    profiler it lent every later timer patch a gain (tests/security/test_review_s30_hostile.py).
    Removed by `drop`."""

    def __init__(self, ctx: RunContext, source: Path, treeish: str) -> None:
        self.dir = ctx.ws.dir / sandbox.SCRATCH / secrets.token_hex(8)
        try:
            gitops.export_tree(source, treeish, self.tree)
            for folder in (self.cache, self.out, self.logs):
                folder.mkdir()
        except BaseException:
            self.drop()
            raise

    @property
    def label(self) -> str:
        return self.dir.name

    @property
    def tree(self) -> Path:
        return self.dir / "tree"

    @property
    def cache(self) -> Path:
        return self.dir / "cache"

    @property
    def out(self) -> Path:
        return self.dir / "out"

    @property
    def logs(self) -> Path:
        """Its processes' logs (`<name>.out|.err`): an open log's path is readable inside the
        sandbox (`readlink /proc/self/fd/2`), and logs/vN/ would tell the iteration, which a
        kept tree can compare with its own (the proposer knows which iteration it writes)."""
        return self.dir / "logs"

    def move_logs(self, dest: Path, side: str) -> None:
        """Its logs moved into `dest`, each name's `_tree` (the neutral word they were written
        under, its first) now the side's."""
        dest.mkdir(parents=True, exist_ok=True)
        for log in sorted(self.logs.glob("*")) if self.logs.is_dir() else ():
            log.replace(dest / log.name.replace(f"_{NEUTRAL}", f"_{side}", 1))

    def hand_over(self, dest: Path) -> None:
        """What the process wrote into `out` moved into `dest` (emptied first), links as links;
        nothing when the copy is gone already."""
        if not self.out.is_dir():
            return
        dest.mkdir(parents=True, exist_ok=True)
        empty_folder(dest)
        for entry in list(self.out.iterdir()):
            entry.rename(dest / entry.name)

    def drop(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class BlindTrees:
    """A keep's confirmation runs copies of both trees that no process can tell apart by where it
    runs (`BlindCopy`): best's at BEST_COMMIT, the candidate's as measured, made in a random
    order, read-only to a confined server, each server's looks written into its copy's `out`,
    removed after the confirmation. A tree that tells its role from the clock is not stopped
    here (docs/security.md, "A kept tree slow as BEST")."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.copies: dict[str, BlindCopy] = {}
        self._made: tuple[str, str] | None = None
        self._log_dir: Path | None = None

    def make(self, lane: Lane, it: Iteration, hashes: dict[str, str]) -> None:
        """The two copies of this decision's trees (made once; again when either tree changes)."""
        key = (hashes["best"], hashes["cand"])
        if self._made == key:
            return
        self.drop()
        self._log_dir = self.ctx.ws.log_dir(it.version)
        sides = ["best", "cand"]
        secrets.SystemRandom().shuffle(sides)
        for side in sides:
            source, treeish = (lane.best, it.best_commit_before or "HEAD") if side == "best" else (lane.cand, key[1])
            self.copies[side] = BlindCopy(self.ctx, source, treeish)
        self._made = key

    def tree(self, side: str) -> Path:
        return self.copies[side].tree

    def cache(self, side: str) -> Path:
        return self.copies[side].cache

    def looks(self, side: str) -> Path:
        return self.copies[side].out

    def label(self, side: str) -> str:
        return self.copies[side].label

    def logs(self, side: str) -> Path:
        return self.copies[side].logs

    def drop(self) -> None:
        """The copies removed, their servers' logs moved into the iteration's first."""
        for side, copy in self.copies.items():
            if self._log_dir is not None:
                copy.move_logs(self._log_dir, side)
            copy.drop()
        self.copies, self._made = {}, None


def empty_folder(folder: Path) -> None:
    """Remove what `folder` holds (links as links, never followed); the folder stays."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
