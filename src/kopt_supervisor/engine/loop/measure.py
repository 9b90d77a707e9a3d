"""Measurement: one look of best against candidate for a lane (docs/design.md §5).

- `ServedTrees` (`[target].serve`, loop/served_trees.py): best and the candidate each in a
  process of its own, confined to its tree, asked for each look on its stdin in ABBA order
  with one seed for both, then audited: kopt compares the outputs of one timed call per
  config, picked after the look, itself (engine/decide/audit.py). Best's process is kept
  while BEST does not move; the candidate's is new for every decision.
- `ProcessAbba`: the bench runs once in each tree, in ABBA order across looks (so linear
  drift cancels); each config's metric pairs up.
- `AbCommand`: `[target].ab_command` imports both trees into one process and times them
  interleaved block by block; one process per look.
- `ServedAb`: the same command kept up (`[target].ab_serve`), asked for each look on its
  stdin (`look N PATH` -> `done N`), told to `reload` both trees when a decision starts.

Every look returns a `Look` (its pairs and each side's measurement, for the correctness
check) and leaves both trees as they were: a bench that writes into a tracked file is a
bench failure, and what a bench leaves in the candidate's tree is removed (loop/look_files.py).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from kopt_supervisor.engine import bench_output, metrics
from kopt_supervisor.engine.decide.plausible import BenchRun
from kopt_supervisor.engine.loop.context import RunContext, last_line
from kopt_supervisor.engine.loop.lane import Lane, Look, Measurer
from kopt_supervisor.engine.loop.look_files import (
    FreshCaches,
    check_after_run,
    ensure_best_pristine,
    keep_csv,
    tree_hashes,
)
from kopt_supervisor.engine.loop.served_trees import ServedTrees
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.runner.command import Server, ServerError
from kopt_supervisor.engine.sandbox import Confinement


def measurer_for(ctx: RunContext, lane: Lane) -> Measurer:
    t = ctx.cfg.target
    if t.serve:  # wins over an ab_command: never one process holding both trees
        return ServedTrees(ctx, lane)
    if t.ab_command and t.ab_serve:
        return ServedAb(ctx, lane)
    if t.ab_command:
        return AbCommand(ctx, lane)
    return ProcessAbba(ctx, lane)


def run_bench(
    ctx: RunContext, it: Iteration, lane: Lane, tree: Path, name: str, env: dict[str, str], confine: Confinement | None
) -> tuple[Measurement, float]:
    """The bench once in `tree` (confined to it: jails.py): its CSV read by the target's
    rules, then the tree inspected whole and put back (check_after_run)."""
    csv = ctx.cfg.target.csv
    before = bench_output.csv_stamps(tree, csv)
    res = ctx.procs.run(
        it, ctx.cfg.target.bench, cwd=tree, name=name, timeout_s=ctx.cfg.target.timeout_s, env=env, confine=confine
    )
    if not res.ok:
        check_after_run(ctx, lane, it, tree)
        raise BenchError(f"bench on {tree.name}/ {res.why()}: {last_line(res)}")
    path = bench_output.find_csv(tree, csv, before, res.stdout_path)
    keep_csv(ctx, it, path, name)
    measurement = bench_output.read_measurement(path, ctx.cfg.target, from_stdout=csv == "-")
    check_after_run(ctx, lane, it, tree)
    return measurement, res.duration_s


class ProcessAbba:
    """`fresh_caches`: each decision's runs get caches of their own (`FreshCaches`: the
    re-decision)."""

    def __init__(self, ctx: RunContext, lane: Lane, *, fresh_caches: bool = False) -> None:
        self.ctx, self.lane = ctx, lane
        self.caches = FreshCaches(ctx, lane) if fresh_caches else None

    def _cache(self, side: str, tree_hash: str) -> Path | None:
        return self.caches.get(side, tree_hash) if self.caches is not None else None

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        order = ("best", "cand") if r % 2 == 0 else ("cand", "best")
        got: dict[str, Measurement] = {}
        runs: list[BenchRun] = []
        secs = 0.0
        hashes = dict(zip(("best", "cand"), tree_hashes(self.lane, it), strict=True))
        ensure_best_pristine(self.ctx, self.lane, it, r)
        for side in order:
            tree = self.lane.best if side == "best" else self.lane.cand
            cache = self._cache(side, hashes[side])
            jail = self.ctx.jails.bench(tree, side, hashes[side], cache=cache)
            side_env = {**env, **self.ctx.jails.env(side, hashes[side], cache=cache)}
            m, s = run_bench(self.ctx, it, self.lane, tree, f"{stage}_r{r}_{side}", side_env, jail)
            got[side], secs = m, secs + s
            timed_s = None if m.timed is None else m.timed * self.ctx.cfg.roofline.unit_scale
            runs.append(BenchRun(side, r, s, timed_s))
            if side == "cand" and m.failing:
                break
        if "best" not in got:  # the candidate failed first: no pairs, its rows tell why
            return Look([], got["cand"], got["cand"], secs)
        best_m, cand_m = got["best"], got["cand"]
        pairs = metrics.paired(best_m, cand_m, r, "AB" if order[0] == "best" else "BA")
        return Look(pairs, best_m, cand_m, secs, tuple(runs))

    def new_decision(self) -> None:
        if self.caches is not None:
            self.caches.new_decision()

    def close(self) -> None:
        pass


class AbCommand:
    def __init__(self, ctx: RunContext, lane: Lane) -> None:
        self.ctx, self.lane = ctx, lane

    def command(self) -> str:
        return self.ctx.cfg.target.ab_command.replace("{best}", shlex.quote(str(self.lane.best))).replace(
            "{cand}", shlex.quote(str(self.lane.cand))
        )

    def jail(self, it: Iteration, outputs: tuple[Path, ...] = ()) -> Confinement | None:
        best_hash, cand_hash = tree_hashes(self.lane, it)
        return self.ctx.jails.ab(self.lane.best, self.lane.cand, best_hash, cand_hash, outputs=outputs)

    def env(self, it: Iteration, env: dict[str, str]) -> dict[str, str]:
        """The lease's environment, with the pair's cache where the run is unconfined."""
        return {**env, **self.ctx.jails.env("ab", *tree_hashes(self.lane, it))}

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        t = self.ctx.cfg.target
        ensure_best_pristine(self.ctx, self.lane, it, r)
        before = bench_output.csv_stamps(self.lane.best, t.csv)
        res = self.ctx.procs.run(
            it,
            self.command(),
            cwd=self.lane.best,
            name=f"{stage}_r{r}_ab",
            timeout_s=t.timeout_s,
            env=self.env(it, env),
            confine=self.jail(it),
        )
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
            reply = server.ask(
                f"look {r} {path}",
                timeout_s=self.ctx.cfg.target.timeout_s,
                poll=self.ctx.control.pump,
                poll_interval_s=self.ctx.poll_interval_s,
                is_reply=lambda line: line.split()[:2] in (["done", str(r)], ["fail", str(r)]),
            )
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
        env = {**env, **self.ctx.jails.env("ab_serve")}  # unconfined: one cache for the process's life
        full_env = self.ctx.procs.env(env)
        server = self.server
        if server is not None and server.alive and server.env == full_env:
            if self.loaded:
                return server
            with self.ctx.clock(it, "reload_s"):
                try:
                    reply = server.ask(
                        "reload",
                        timeout_s=self.ctx.cfg.target.timeout_s,
                        poll=self.ctx.control.pump,
                        poll_interval_s=self.ctx.poll_interval_s,
                        is_reply=lambda line: line == "reloaded" or line.startswith("fail"),
                    )
                except ServerError:
                    reply = "fail reload"
            if reply == "reloaded":
                self.loaded = True
                return server
        self.close()
        self.started += 1
        try:
            self.looks.mkdir(parents=True, exist_ok=True)
            self.server = self.ctx.procs.server(
                it,
                self.command(),
                cwd=self.lane.best,
                name=f"{stage}_ab_serve{self.started}",
                env=env,
                confine=self.jail(it, outputs=(self.looks,)),
            )
        except ServerError as e:
            raise BenchError(f"ab_command (serving) {e}") from None
        self.loaded = True
        return self.server

    def close(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            server.close()


class StaleBest(Exception):
    """A keep decided against a BEST that another lane's keep has moved since."""

    def __init__(self, best: str, *, tried: bool = False) -> None:
        super().__init__(f"BEST moved to {best[:10]}")
        self.best = best
        self.tried = tried
        """The change was already tried on `best` and does not apply there."""


class OnBest:
    """A lane's measurer that, before each look, checks the iteration is still decided
    against BEST (StaleBest otherwise): a keep another lane makes mid-decision costs this
    lane at most the look in flight, not the rest of a decision that must be taken again.
    (engine/lanes.py wraps every measurer of a run with several lanes in one.)"""

    def __init__(self, ctx: RunContext, inner: Measurer) -> None:
        self.ctx, self.inner = ctx, inner

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        if it.best_commit_before is not None:
            current = self.ctx.history.best_commit()
            if it.best_commit_before != current:
                raise StaleBest(current)
        return self.inner.look(it, stage, r, env)

    def new_decision(self) -> None:
        self.inner.new_decision()

    def close(self) -> None:
        self.inner.close()
