"""Measurement: one look of best against candidate for a lane, three ways (DESIGN.md §5).

- `ProcessAbba`: the bench runs once in each tree, in ABBA order across looks (so linear
  drift cancels); each config's metric pairs up.
- `AbCommand`: `[target].ab_command` imports both trees into one process and times them
  interleaved block by block; one process per look.
- `ServedAb`: the same command kept up (`[target].ab_serve`), asked for each look on its
  stdin (`look N PATH` -> `done N`), told to `reload` both trees when a decision starts.

Every look returns a `Look` (its pairs and each side's measurement, for the correctness
check) and leaves both trees as they were: a bench that writes into a tracked file is a
bench failure, and what a bench leaves in the candidate's tree is removed.
"""

from __future__ import annotations

import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kopt_supervisor.engine import bench_output, gitops, metrics, sandbox, treecheck
from kopt_supervisor.engine.decide import Pair
from kopt_supervisor.engine.decide.plausible import BenchRun
from kopt_supervisor.engine.decide.side_cost import SideCost
from kopt_supervisor.engine.loop.context import RunContext, last_line
from kopt_supervisor.engine.loop.jails import tree_of
from kopt_supervisor.engine.loop.lane import Lane
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.runner import Server, ServerError
from kopt_supervisor.engine.sandbox import Confinement, read_output


@dataclass(frozen=True)
class Look:
    pairs: list[Pair]
    best: Measurement
    cand: Measurement
    seconds: float
    """Timed bench seconds (the decision's GPU-second budget counts these)."""
    runs: tuple[BenchRun, ...] = ()
    """Process-level: each side's bench process and its wall time (the plausibility check
    of a reported metric against the time the process took)."""
    gpu: tuple[dict[str, Any] | None, dict[str, Any] | None] | None = None
    """The GPU's state before and after, when the look ran where the lane's own gate cannot
    see (a Ray worker's gate picked the GPU there)."""
    costs: tuple[SideCost, ...] = ()
    """Served per tree (`ServedTrees`): what each side's process spent on the look as the OS
    accounts for it (CPU and wall seconds) beside what its bench claims."""


class Measurer(Protocol):
    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        """Round r of a decision: best and candidate measured together."""
        ...

    def new_decision(self) -> None:
        """A decision starts: the next look measures freshly loaded trees."""
        ...

    def close(self) -> None:
        """Release what is kept between looks (a serving process)."""
        ...


def measurer_for(ctx: RunContext, lane: Lane) -> Measurer:
    t = ctx.cfg.target
    if t.ab_command and t.ab_serve:
        return ServedAb(ctx, lane)
    if t.ab_command:
        return AbCommand(ctx, lane)
    return ProcessAbba(ctx, lane)


def run_bench(ctx: RunContext, it: Iteration, lane: Lane, tree: Path, name: str, env: dict[str, str],
              confine: Confinement | None) -> tuple[Measurement, float]:
    """The bench once in `tree` (confined to it: jails.py): its CSV read by the target's
    rules, then the tree inspected whole and put back (check_after_run)."""
    csv = ctx.cfg.target.csv
    before = bench_output.csv_stamps(tree, csv)
    res = ctx.run(it, ctx.cfg.target.bench, cwd=tree, name=name, timeout_s=ctx.cfg.target.timeout_s, env=env,
                  confine=confine)
    if not res.ok:
        check_after_run(ctx, lane, it, tree)
        raise BenchError(f"bench on {tree.name}/ {res.why()}: {last_line(res)}")
    path = bench_output.find_csv(tree, csv, before, res.stdout_path)
    keep_csv(ctx, it, path, name)
    measurement = bench_output.read_measurement(path, ctx.cfg.target, from_stdout=csv == "-")
    check_after_run(ctx, lane, it, tree)
    return measurement, res.duration_s


def keep_csv(ctx: RunContext, it: Iteration, path: Path, name: str) -> None:
    """A copy of what a run wrote, beside its logs (the tree's copy is cleaned away)."""
    if path.suffix != ".out":
        try:
            (ctx.ws.log_dir(it.version) / f"{name}.csv").write_bytes(read_output(path, 64 * 1024 * 1024))
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
            raise BenchError(f"the bench modified tracked file(s) in {tree.name}/: {', '.join(report.modified[:5])} "
                             "(restored)")
        if problems:
            raise BenchError(f"the bench left what a run must not in {report.reason()} (removed)")
    finally:
        if cand:
            gitops.restore_from_index(tree)
            gitops.remove_untracked(tree)
            gitops.remove_ignored(tree, keep=it.record.get("forced_paths", []))
        else:
            gitops.reset_clean(tree, base or "HEAD")


def ensure_best_pristine(ctx: RunContext, lane: Lane, it: Iteration, r: int) -> None:
    """Right before a look: best/ exactly at BEST_COMMIT, untracked and ignored files included.
    A difference is restored and recorded; one that appeared between two looks of a decision
    (something wrote into best/ while it was measured) fails the decision."""
    best = it.best_commit_before or ""
    report = treecheck.inspect(lane.best, best, strict=True, modules=(), label=f"{lane.best.name}/")
    if not report.differs:
        return
    gitops.reset_clean(lane.best, best)
    ctx.event("tamper", f"v{it.version}: best/ was not at BEST_COMMIT before look {r + 1}: "
              f"{report.reason() or ', '.join(report.new[:5])} (restored)", it=it, level="warn")
    if r > 0:
        raise BenchError(f"best/ changed during the decision ({report.reason() or 'new files'}): earlier looks may "
                         "have measured a tampered best")


class ProcessAbba:
    """`fresh_caches`: each decision's runs get caches of their own, emptied when the decision
    starts, never the trees' caches the measured runs filled (the re-decision: nothing the
    candidate's earlier processes left in a cache, a compiled kernel or a stored output,
    reaches the processes that verify it)."""

    def __init__(self, ctx: RunContext, lane: Lane, *, fresh_caches: bool = False) -> None:
        self.ctx, self.lane, self.fresh_caches = ctx, lane, fresh_caches
        self._emptied: set[Path] = set()

    def _cache(self, side: str, tree_hash: str) -> Path | None:
        if not self.fresh_caches:
            return None
        path = sandbox.cache_dir(self.ctx.ws.dir, f"fresh_{self.lane.index}_{side}", tree_hash)
        if path not in self._emptied:
            shutil.rmtree(path, ignore_errors=True)
            self._emptied.add(path)
        return path

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        order = ("best", "cand") if r % 2 == 0 else ("cand", "best")
        got: dict[str, Measurement] = {}
        runs: list[BenchRun] = []
        secs = 0.0
        hashes = dict(zip(("best", "cand"), tree_hashes(self.lane, it), strict=True))
        ensure_best_pristine(self.ctx, self.lane, it, r)
        for side in order:
            tree = self.lane.best if side == "best" else self.lane.cand
            jail = self.ctx.jails.bench(tree, side, hashes[side], cache=self._cache(side, hashes[side]))
            m, s = run_bench(self.ctx, it, self.lane, tree, f"{stage}_r{r}_{side}", env, jail)
            got[side], secs = m, secs + s
            timed_s = None if m.timed is None else m.timed * self.ctx.cfg.roofline.unit_scale
            runs.append(BenchRun(side, r, s, timed_s))
            if side == "cand" and m.failing:
                break
        if "best" not in got:  # the candidate failed first: no pairs, its rows tell why
            return Look([], got["cand"], got["cand"], secs)
        best_m, cand_m = got["best"], got["cand"]
        missing = sorted(set(best_m.configs) - set(cand_m.configs))
        if missing:
            raise BenchError(f"the candidate's CSV lacks config(s) {', '.join(missing[:3])}: the bench's shapes changed")
        pairs = [Pair(key, b.cls, b.value, cand_m.configs[key].value, r, "AB" if order[0] == "best" else "BA")
                 for key, b in best_m.configs.items() if b.ok and cand_m.configs[key].ok]
        return Look(pairs, best_m, cand_m, secs, tuple(runs))

    def new_decision(self) -> None:
        self._emptied.clear()

    def close(self) -> None:
        pass


class AbCommand:
    def __init__(self, ctx: RunContext, lane: Lane) -> None:
        self.ctx, self.lane = ctx, lane

    def command(self) -> str:
        return self.ctx.cfg.target.ab_command.replace("{best}", shlex.quote(str(self.lane.best))).replace(
            "{cand}", shlex.quote(str(self.lane.cand)))

    def jail(self, it: Iteration, outputs: tuple[Path, ...] = ()) -> Confinement | None:
        best_hash, cand_hash = tree_hashes(self.lane, it)
        return self.ctx.jails.ab(self.lane.best, self.lane.cand, best_hash, cand_hash, outputs=outputs)

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        t = self.ctx.cfg.target
        ensure_best_pristine(self.ctx, self.lane, it, r)
        before = bench_output.csv_stamps(self.lane.best, t.csv)
        res = self.ctx.run(it, self.command(), cwd=self.lane.best, name=f"{stage}_r{r}_ab", timeout_s=t.timeout_s,
                           env=env, confine=self.jail(it))
        if not res.ok:
            raise BenchError(f"ab_command {res.why()}: {last_line(res)}")
        path = bench_output.find_csv(self.lane.best, t.csv, before, res.stdout_path)
        keep_csv(self.ctx, it, path, f"{stage}_r{r}_ab")
        return self.read(it, path, r, res.duration_s, from_stdout=t.csv == "-")

    def read(self, it: Iteration, path: Path, r: int, seconds: float, *, from_stdout: bool = False) -> Look:
        """A look's A/B table as pairs, once both trees are checked untouched."""
        df = bench_output.read_table(path, metric=self.ctx.cfg.target.metric, from_stdout=from_stdout)
        check_after_run(self.ctx, self.lane, it, self.lane.best)
        check_after_run(self.ctx, self.lane, it, self.lane.cand)
        pairs, best_m, cand_m = metrics.ab_pairs(df, self.ctx.cfg.target, r, path.name)
        return Look(pairs, best_m, cand_m, seconds)

    def new_decision(self) -> None:
        pass

    def close(self) -> None:
        pass


class ServedAb(AbCommand):
    """The serving ab_command, kept across decisions while only the loop's quick steps run
    between them; closed before anything that takes time (an agent, a pause, a review)."""

    def __init__(self, ctx: RunContext, lane: Lane) -> None:
        super().__init__(ctx, lane)
        self.looks = ctx.ws.dir / "looks" / f"lane{lane.index}"
        """Where the served process writes each look's table (the one folder it may write)."""
        self.server: Server | None = None
        self.started = 0
        self.loaded = False
        """The kept process holds the trees of the decision in progress."""

    def new_decision(self) -> None:
        self.loaded = False

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        ensure_best_pristine(self.ctx, self.lane, it, r)
        server = self._server_for(it, stage, env)
        path = self.looks / f"v{it.version}_{stage}_r{r}.csv"
        path.unlink(missing_ok=True)
        t0 = time.monotonic()
        try:
            reply = server.ask(f"look {r} {path}", timeout_s=self.ctx.cfg.target.timeout_s, poll=self.ctx.control.pump,
                               poll_interval_s=self.ctx.poll_interval_s,
                               is_reply=lambda line: line.split()[:2] in (["done", str(r)], ["fail", str(r)]))
        except ServerError as e:
            raise BenchError(f"ab_command (serving) {e}") from None
        secs = time.monotonic() - t0
        words = reply.split()
        if words[0] == "fail":
            self.close()
            raise BenchError(f"ab_command could not measure look {r}: {' '.join(words[2:]) or 'no reason given'}")
        if words[2:3] == ["last"]:  # it leaves after this look; the next look starts a fresh one
            self.close()
        keep_csv(self.ctx, it, path, f"{stage}_r{r}_ab")
        return self.read(it, path, r, secs)

    def _server_for(self, it: Iteration, stage: str, env: dict[str, str]) -> Server:
        """The kept process (told to `reload` at a decision's first look), or a fresh one
        (none kept, it left, it could not reload, or the look's GPU is not the one it runs on)."""
        full_env = self.ctx.env(env)
        server = self.server
        if server is not None and server.alive and server.env == full_env:
            if self.loaded:
                return server
            with self.ctx.clock(it, "reload_s"):
                try:
                    reply = server.ask("reload", timeout_s=self.ctx.cfg.target.timeout_s, poll=self.ctx.control.pump,
                                       poll_interval_s=self.ctx.poll_interval_s,
                                       is_reply=lambda line: line == "reloaded" or line.startswith("fail"))
                except ServerError:
                    reply = "fail reload"
            if reply == "reloaded":
                self.loaded = True
                return server
        self.close()
        self.started += 1
        try:
            self.looks.mkdir(parents=True, exist_ok=True)
            self.server = self.ctx.server(it, self.command(), cwd=self.lane.best, name=f"{stage}_ab_serve{self.started}",
                                          env=env, confine=self.jail(it, outputs=(self.looks,)))
        except ServerError as e:
            raise BenchError(f"ab_command (serving) {e}") from None
        self.loaded = True
        return self.server

    def close(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            server.close()
