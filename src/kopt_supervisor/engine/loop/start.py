"""A run's start, before its iterations: its lanes, K candidates measured at once (docs/design.md
§13; docs/lanes.md), then v0, the baseline (the machine, loop/__init__.py: recover → baseline
(v0) → ...; the recovery is keep.py's).

`make_lanes(ctx)` builds the run's lanes from [parallel]: each lane has its own candidate
worktree, its own copy of the best tree (with several lanes best/ itself, the branch's
worktree, only ever moves at a keep), its own GPU gate (its claim keeps the GPU its own:
never two lanes on one GPU, best and candidate of a pair always on the lane's GPU), and a
measurer: local processes, or (backend "ray") a Ray actor on a GPU host of a cluster that
gets the candidate as a git bundle and sends the samples back.

With several lanes every measurer checks before each look that its candidate is still
decided against BEST (measure.OnBest): another lane's keep ends a decision at its next look.
With one local lane the run is what it always was: cand/ against best/.

Lanes on a Ray cluster ([parallel] backend = "ray"; the `ray` extra, imported only then):
each lane's measurement runs on a GPU host of an existing cluster.

    head (the engine)                              worker host (a LaneWorker actor)
    ---------------------------------------------  ------------------------------------------
    proposes, polices, keeps the store, decides    gets BEST and the candidate as a git bundle,
    sends a bundle at each decision's first look   checks them out in a folder of its own,
    asks for looks; stores each look's samples     measures each look with kopt's own code:
    only once it came back (a lost worker's look   its own GPU gate and claim pick an idle GPU
    is taken again on another: nothing counts      (Ray's GPU accounting is logical: it does not
    twice)                                         see a foreign process), confined by bwrap

`connect(address, timeout_s)` fails within the timeout with the address named (a `ray.init`
that cannot reach the cluster would otherwise hang). A worker whose Python or kopt version
differs from the head's is refused (a mismatch would look like a regression).

The baseline (v0): the unmodified tree measured `min_rounds` times, correct on every row, its
classes as decisions will vote in them, what one decision will cost with this bench, its
roofline (the README's Step 0) and its profile. A baseline that fails its own correctness
rule or whose bench fails ends the run with the reason (BaselineFailed).
"""

from __future__ import annotations

import dataclasses
import platform
import shutil
import socket
import statistics
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput, KoptFailure, gitops
from kopt_supervisor.engine.decide.estimate import Policy
from kopt_supervisor.engine.doctor import capture_environment
from kopt_supervisor.engine.gitops import tree_of
from kopt_supervisor.engine.gpu.backends import NoGpu, open_backend
from kopt_supervisor.engine.gpu.gate import Gate, NoIdleGpu
from kopt_supervisor.engine.loop.context import Lane, Look, RunContext, acquire, note_gpu, single_lane
from kopt_supervisor.engine.loop.control import Interrupt
from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.loop.keep import Keeper, Recovery
from kopt_supervisor.engine.loop.measure import (
    OnBest,
    ProcessAbba,
    failure_of,
    measurer_for,
    record_baseline,
    run_bench,
    served_trees_of,
)
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.onboard import estimate_decision_s, run_noise_pct
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.store import Sample


def lane_paths(ctx: RunContext, index: int) -> tuple[str, str]:
    """(best copy, candidate worktree) of lane `index` when there are several, relative to
    the workspace: lanes/<i>/best and (lane 0: cand/) lanes/<i>/cand."""
    return f"lanes/{index}/best", "cand" if index == 0 else f"lanes/{index}/cand"


def make_lanes(ctxs: list[RunContext]) -> list[Lane]:
    """One lane per context (`RunContext.for_lane`: each lane works from its own thread with
    its own connection to run.db); one local lane: cand/ against best/."""
    par = ctxs[0].cfg.parallel
    if len(ctxs) == 1 and par.backend == "local":
        lanes = [single_lane(ctxs[0])]
    else:
        lanes = []
        for i, ctx in enumerate(ctxs):
            best, cand = lane_paths(ctx, i)
            lanes.append(Lane(i, ctx.ws.dir / best, ctx.ws.dir / cand, lane_gate(ctx, i)))
    if par.backend == "ray":
        connect(par.address, par.connect_timeout_s)
    for lane, ctx in zip(lanes, ctxs, strict=True):
        if par.backend == "ray":
            lane.host = "ray"
            lane.measurer = main = RayMeasurer(ctx, lane)
            lane.fresh = FreshOnWorker(main)  # the re-decision runs on the lane's worker too
        else:
            lane.measurer = measurer_for(ctx, lane)
            if len(lanes) > 1 and not ctx.cfg.target.serve:  # the keep's re-decision in fresh processes,
                lane.fresh = ProcessAbba(ctx, lane, fresh_caches=True)  # made here so it is checked too
    if len(lanes) > 1:  # another lane's keep ends a decision at its next look, not after its last
        for lane, ctx in zip(lanes, ctxs, strict=True):
            assert lane.measurer is not None
            lane.measurer = OnBest(ctx, lane.measurer)
            if lane.fresh is not None:
                lane.fresh = OnBest(ctx, lane.fresh)
    return lanes


def lane_gate(ctx: RunContext, index: int) -> Gate:
    """Lane `index`'s GPU gate: its own claim (the host-wide registry keeps a GPU one lane's)."""

    def sleep(seconds: float) -> None:
        ctx.set_state("waiting_gpu")
        ctx.control.sleep(
            seconds,
            lambda left: ctx.progress(
                None, "waiting_gpu", f"lane {index}: no idle GPU free for it, next check in {left:.0f} s"
            ),
        )

    # a Ray lane's GPU is chosen by the gate on its worker: the head holds none
    backend = (
        NoGpu("a Ray lane: its worker's gate chooses the GPU")
        if ctx.cfg.parallel.backend == "ray"
        else open_backend(ctx.cfg.gpu.vendor)
    )
    return Gate(
        ctx.cfg.gpu,
        backend,
        sleep=sleep,
        pause=lambda seconds: ctx.control.sleep(seconds, lambda _left: None),  # a check's own: no GPU is busy
        own_pids=ctx.procs.own_pids,
        log=lambda m: ctx.event("gpu", f"lane {index}: {m}", level="warn"),
        owner=f"kopt run {ctx.ws.tag} lane {index} ({ctx.ws.dir})",
    )


# ---------------------------------------------------------------------------------------
# Lanes on a Ray cluster
NAMESPACE = "kopt"
LOOK_ATTEMPTS = 3
"""A look is tried on this many workers before the decision fails (a worker lost mid-look)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BadInput('[parallel].backend = "ray" needs Ray: pip install "kopt-supervisor[ray]"') from None
    return ray


def versions() -> dict[str, str]:
    """What must be the same on the head and on every worker."""
    try:
        kopt = metadata.version("kopt-supervisor")
    except metadata.PackageNotFoundError:
        kopt = "unknown"
    return {"python": platform.python_version(), "kopt": kopt}


def connect(address: str, timeout_s: float) -> None:
    """Join the cluster at `address` ("auto": the one `ray start` made here), or fail within
    `timeout_s` naming it."""
    ray = _ray()
    if ray.is_initialized():
        return
    outcome: dict[str, BaseException | None] = {}

    def init() -> None:
        try:
            ray.init(
                address=address,
                namespace=NAMESPACE,
                ignore_reinit_error=True,
                log_to_driver=False,
                logging_level="ERROR",
            )
            outcome["error"] = None
        except BaseException as e:  # noqa: BLE001 - reported below, with the address
            outcome["error"] = e

    t = threading.Thread(target=init, name="kopt-ray-connect", daemon=True)
    t.start()
    t.join(timeout_s)
    if "error" not in outcome:
        raise BadInput(
            f"cannot connect to the Ray cluster at {address!r} within {timeout_s:g} s "
            "([parallel].address, [parallel].connect_timeout_s)"
        )
    if outcome["error"] is not None:
        first = (str(outcome["error"]).strip().splitlines() or [type(outcome["error"]).__name__])[0]
        raise BadInput(f"cannot connect to the Ray cluster at {address!r}: {first[:300]}")


class LaneWorker:
    """A lane's measurement on a worker host (a Ray actor): the trees from a bundle, looks
    measured by kopt's own measurer with the worker's own GPU gate, confined."""

    def __init__(self, config_text: str, tag: str, lane: int, no_sandbox: bool) -> None:
        from kopt_supervisor.engine.store import Store
        from kopt_supervisor.engine.workspace import Workspace, config_seal, make_secret

        self.root = Path(tempfile.mkdtemp(prefix=f"kopt-ray-{tag}-lane{lane}-"))
        self.ws = Workspace(self.root, "w")
        for d in (self.ws.dir, self.ws.logs, self.ws.plans, self.ws.memory, self.ws.profiles):
            d.mkdir(parents=True, exist_ok=True)
        self.ws.config_path.write_text(config_text)
        key = make_secret(self.ws.dir)
        with Store.create(self.ws.db_path) as store:
            store.set_many(
                {
                    "tag": "w",
                    "frozen_config": config_text,
                    "repo": "",
                    "chain_sealed": True,
                    "frozen_config_seal": config_seal(key, config_text),
                }
            )
        self.lane_index, self.no_sandbox = lane, no_sandbox
        self.ctx: RunContext | None = None
        self.lane: Lane | None = None
        self.loaded: tuple[str, str] | None = None
        self.fresh: ProcessAbba | None = None
        """The re-decision's measurer (its own caches), made at its first look."""

    def info(self) -> dict[str, str]:
        return {**versions(), "host": socket.gethostname()}

    def load(self, bundle: bytes, best: str, cand: str) -> str:
        """Check out BEST and the candidate (from the head's bundle) for the next looks."""
        from kopt_supervisor.engine.loop.context import open_run

        if self.lane is not None and self.lane.measurer is not None:
            self.lane.measurer.close()
        trees = self.root / "trees"
        shutil.rmtree(trees, ignore_errors=True)
        trees.mkdir()
        (trees / "lane.bundle").write_bytes(bundle)
        best_path, cand_path = gitops.checkout_bundle(trees / "lane.bundle", trees, best, cand)
        if self.ctx is None:
            self.ctx = open_run(
                self.ws, proposer_kind="none", no_sandbox=self.no_sandbox, log=lambda m: None, poll_interval_s=0.2
            )
        ctx = self.ctx
        ctx.store.set("repo", str(trees / "repo"))
        gate = (
            self.lane.gate
            if self.lane
            else Gate(
                ctx.cfg.gpu,
                open_backend(ctx.cfg.gpu.vendor),
                owner=f"kopt lane {self.lane_index} on {socket.gethostname()}",
            )
        )
        self.lane = Lane(self.lane_index, best_path, cand_path, gate, host=socket.gethostname())
        self.lane.measurer = measurer_for(ctx, self.lane)
        self.fresh = None
        self.loaded = (best, cand)
        return socket.gethostname()

    def look(self, version: int, stage: str, r: int, tree: str, best: str, fresh: bool = False) -> dict[str, Any]:
        """One look, measured here: its pairs, both sides' rows, seconds, runs, and the GPU
        before and after (the worker's gate picked it). `fresh`: in fresh, separate processes
        of the process-level bench (the re-decision of a keep), whatever the lane's measurer."""
        from kopt_supervisor.engine.loop.context import acquire

        assert self.ctx is not None and self.lane is not None and self.lane.measurer is not None, "load() first"
        it = Iteration(version, Status.RUNNING, best_commit_before=best)
        it.record["evaluated_tree"] = tree
        lease = acquire(self.ctx, self.lane)
        t0 = time.monotonic()
        if fresh and self.fresh is None:
            self.fresh = ProcessAbba(self.ctx, self.lane, fresh_caches=True)
        measurer = self.fresh if fresh and self.fresh is not None else self.lane.measurer
        look = measurer.look(it, stage, r, lease.env)
        logs = {
            p.name: p.read_bytes()[-65536:].decode("utf-8", "replace")
            for p in self.ws.log_dir(version).glob(f"{stage}_r{r}_*")
            if p.is_file()
        }
        return {
            "look": look,
            "gpu": (lease.before, self.lane.gate.evidence()),
            "host": self.lane.host,
            "logs": logs,
            "wall_s": time.monotonic() - t0,
        }

    def new_decision(self) -> None:
        if self.lane is not None and self.lane.measurer is not None:
            self.lane.measurer.new_decision()
        if self.fresh is not None:
            self.fresh.new_decision()

    def close(self) -> None:
        if self.lane is not None:
            self.lane.close()
        shutil.rmtree(self.root, ignore_errors=True)


class RayMeasurer:
    """The head's side of a Ray lane: a Measurer (engine/loop/measure.py) whose looks run on
    a LaneWorker actor."""

    def __init__(self, ctx: RunContext, lane: Lane) -> None:
        self.ctx, self.lane = ctx, lane
        self.actor: Any = None
        self.loaded: tuple[str, str] | None = None
        self.want: tuple[str, str] | None = None

    def _actor(self) -> Any:
        if self.actor is None:
            ray = _ray()
            gpus = 0 if self.ctx.cfg.gpu.vendor == "none" else 1
            remote = ray.remote(LaneWorker).options(num_gpus=gpus, num_cpus=1, max_restarts=0)
            self.actor = remote.remote(
                str(self.ctx.store.get("frozen_config")), self.ctx.ws.tag, self.lane.index, not self.ctx.jails.confined
            )
            info = self._get(self.actor.info.remote())
            if {k: info[k] for k in ("python", "kopt")} != versions():
                self.close()
                raise BenchError(
                    f"the Ray worker {info.get('host')} runs Python {info.get('python')} / kopt "
                    f"{info.get('kopt')}, the head {versions()}: refused (a mismatch reads as a change)"
                )
            self.loaded = None
        return self.actor

    def _get(self, ref: Any) -> Any:
        """The result of `ref`, the pump running meanwhile (a stop kills the worker's look)."""
        ray = _ray()
        while True:
            ready, _ = ray.wait([ref], timeout=self.ctx.poll_interval_s)
            if ready:
                return ray.get(ready[0])
            try:
                self.ctx.control.pump()
            except BaseException:
                self.close()
                raise

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        return self.measure(it, stage, r, fresh=False)

    def measure(self, it: Iteration, stage: str, r: int, *, fresh: bool) -> Look:
        """A look on the lane's worker (`fresh`: in fresh processes of the process-level bench)."""
        _ray()
        from ray import exceptions as rx

        lost = tuple(
            getattr(rx, n)
            for n in (
                "RayActorError",
                "WorkerCrashedError",
                "NodeDiedError",
                "ObjectLostError",
                "OwnerDiedError",
                "ActorUnavailableError",
            )
            if hasattr(rx, n)
        )
        tree = str(it.record.get("evaluated_tree") or "")
        best = it.best_commit_before or ""
        last: BaseException | None = None
        for attempt in range(LOOK_ATTEMPTS):
            try:
                actor = self._actor()
                if self.loaded != (best, tree):
                    bundle, cand = gitops.bundle_pair(
                        self.ctx.store.get("repo"),
                        best,
                        tree,
                        ref=f"refs/kopt-lanes/{self.ctx.ws.tag}/{self.lane.index}",
                    )
                    host = self._get(actor.load.remote(bundle, best, cand))
                    self.lane.host = host
                    self.loaded = (best, tree)
                got = self._get(actor.look.remote(it.version, stage, r, tree, best, fresh))
                break
            except rx.RayTaskError as e:  # the look itself failed on the worker: its own error, not a lost worker
                cause = e.cause if isinstance(e.cause, BaseException) else e
                if isinstance(cause, BenchError):
                    raise BenchError(f"on the Ray worker {self.lane.host}: {cause}") from None
                first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
                raise BenchError(f"on the Ray worker {self.lane.host}: {type(cause).__name__}: {first[:300]}") from None
            except lost as e:  # the worker died: the look is taken again elsewhere, nothing was stored
                last = e
                self.ctx.event(
                    "lanes",
                    f"v{it.version} {self.lane.name}: the Ray worker was lost during look {r + 1} "
                    f"({type(e).__name__}); taken again (attempt {attempt + 2}/{LOOK_ATTEMPTS})",
                    it=it,
                    level="warn",
                )
                self.actor, self.loaded = None, None
        else:
            raise BenchError(f"{self.lane.name}: the Ray look failed on {LOOK_ATTEMPTS} workers: {last}")
        for name, text in got["logs"].items():
            (self.ctx.ws.log_dir(it.version) / f"ray_{name}").write_text(text)
        look: Look = got["look"]
        it.record.setdefault("gpu", {})["host"] = got["host"]
        return dataclasses.replace(look, gpu=got["gpu"])

    def new_decision(self) -> None:
        self.loaded = None

    def close(self) -> None:
        if self.actor is not None:
            actor, self.actor, self.loaded = self.actor, None, None
            try:
                _ray().kill(actor)
            except Exception:  # noqa: BLE001 - gone already
                pass


class FreshOnWorker:
    """The re-decision of a keep for a Ray lane: looks in fresh, separate processes of the
    process-level bench, on the lane's own worker (and so its GPU), never on the head."""

    def __init__(self, main: RayMeasurer) -> None:
        self.main = main

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        return self.main.measure(it, stage, r, fresh=True)

    def new_decision(self) -> None:
        pass

    def close(self) -> None:
        pass  # the worker is the lane's: its measurer ends it


# ---------------------------------------------------------------------------------------
# The baseline (v0)


class BaselineFailed(KoptFailure):
    """The unmodified baseline cannot be measured: the run stops with this reason."""


BASELINE_TRIES = 3
"""Attempts at each baseline run before the run stops. The baseline is the user's unmodified
code, so a run that fails and then passes is the bench's own flakiness, said in the record and
on the dashboard, not a reason to stop the night. Measured on the H200 (2026-11-30): Triton's
layer-norm tutorial asserts its backward against torch's at import with a fixed fp16 tolerance
on fresh random data, accumulated with atomics; it failed 1 baseline run in 3 (and one `kopt
init` in 3), passing on the next. A candidate's run is never tried again (its failure is its
verdict), nor is a baseline run that timed out or flooded its output (BenchError.ended)."""


class Baseline:
    def __init__(self, ctx: RunContext, evidence: Evidence, keeper: Keeper, recovery: Recovery) -> None:
        self.ctx, self.evidence, self.keeper, self.recovery = ctx, evidence, keeper, recovery

    def measure(self, lane: Lane) -> None:
        ctx = self.ctx
        commit = str(ctx.store.get("baseline_commit"))
        it = Iteration(
            0,
            Status.RUNNING,
            phase=Phase.BASELINE,
            hypothesis="baseline (unmodified)",
            scope="global",
            best_commit_before=commit,
            started_at=time.time(),
        )
        ctx.save(it)
        ctx.store.delete_samples(0, Stage.BASELINE)  # a baseline cut short by a crash starts over
        ctx.projections.write_memory(it)
        self.recovery.sync(lane)
        ctx.event("baseline", "measuring the unmodified baseline", it=it)
        n = ctx.cfg.decide.min_rounds
        runs: list[Measurement] = []
        seconds: list[float] = []
        flaky: list[str] = []
        tries = 0
        try:
            while len(runs) < n:
                r = len(runs)
                ctx.progress(it, "baseline", f"baseline run {r + 1}/{n}", r, n)
                lease = acquire(ctx, lane, it)
                name = f"baseline_r{r}" + (f"_again{tries}" if tries else "")
                tries += 1
                try:
                    m, secs = ctx.control.preemptible(
                        lambda: self.run(it, lane, name, r, lease.env)  # noqa: B023 - run now
                    )
                except BenchError as e:
                    note_gpu(it, lane, lease.before, lane.gate.evidence())
                    if tries >= BASELINE_TRIES or not e.ended:  # a hang or a flood is not tried again
                        raise
                    self.again(it, flaky, r, f"the bench failed: {e}")
                    continue
                note_gpu(it, lane, lease.before, lane.gate.evidence())
                if m.failing:
                    fail = failure_of(m).summary()
                    if tries < BASELINE_TRIES:
                        self.again(it, flaky, r, f"it fails correctness: {fail}")
                        continue
                    self.keeper.discard(it, lane, Status.FAIL_CORRECTNESS, f"baseline fails correctness: {fail}")
                    raise BaselineFailed(f"the unmodified baseline fails correctness: {fail}")
                tries = 0
                runs.append(m)
                seconds.append(secs)
                ctx.store.add_samples(
                    Sample(0, Stage.BASELINE, r, 0, "best", c.key, c.cls, c.value, mean=c.mean, last=c.last)
                    for c in m.configs.values()
                )
        except BenchError as e:
            self.keeper.discard(it, lane, Status.FAIL_BENCH, f"baseline bench failed: {e}")
            raise BaselineFailed(f"the baseline bench failed: {e}") from None
        except (Interrupt, NoIdleGpu) as e:
            self.keeper.discard(it, lane, Status.INTERRUPTED, str(e))
            raise
        record_baseline(ctx, it, runs)
        self.estimate_decision_cost(it, lane, runs, seconds)
        it.commit = commit
        values = {k: statistics.median([m.configs[k].value for m in runs if k in m.configs]) for k in runs[-1].configs}
        self.evidence.baseline(it, lane, values)
        ctx.store.set_many(
            {
                "config_columns": list(runs[-1].config_columns),
                "classes": runs[-1].classes(),
                "environment": capture_environment(ctx.cfg, lane.best),
            }
        )
        flakes = f"; {len(flaky)} run(s) failed and passed when run again: the bench is flaky" if flaky else ""
        ctx.close(
            it,
            Status.BASELINE,
            f"baseline over {len(runs[-1].configs)} configs in {len(it.record['classes'])} classes{flakes}",
        )

    def run(self, it: Iteration, lane: Lane, name: str, r: int, env: dict[str, str]) -> tuple[Measurement, float]:
        """One baseline measurement of best's tree and its seconds: a served target's through
        best's own served process, the one its first decision then finds started and warm;
        any other target's by a process-level run of its bench."""
        served = served_trees_of(lane.measurer)
        if served is not None:
            return served.look_best(it, Stage.BASELINE, r, env)
        ctx, best_tree = self.ctx, tree_of(lane.best, str(it.best_commit_before))
        jail = ctx.jails.bench(lane.best, "best", best_tree)
        return run_bench(ctx, it, lane, lane.best, name, {**env, **ctx.jails.env("best", best_tree)}, jail)

    def again(self, it: Iteration, flaky: list[str], r: int, what: str) -> None:
        """A baseline run failed with tries left: said, recorded, and run again."""
        flaky.append(f"run {r + 1}: {what}")
        it.record["baseline_flaky"] = list(flaky)
        self.ctx.event(
            "baseline",
            f"baseline run {r + 1} failed ({what}); running it again: the unmodified code failing only "
            f"sometimes is the bench's own flakiness (candidates' runs are never retried)",
            it=it,
            level="warn",
        )

    def estimate_decision_cost(self, it: Iteration, lane: Lane, runs: list[Measurement], seconds: list[float]) -> None:
        """What one decision will cost with this bench (from the baseline's runs and the
        policy): said on the dashboard and in `kopt status` when it is minutes, with the way
        to make it seconds (the public harness's served looks, one process per tree)."""
        ctx, t = self.ctx, self.ctx.cfg.target
        mode = "served" if t.serve or t.ab_serve else "ab" if t.ab_command else "process"
        noise = run_noise_pct([{k: c.value for k, c in m.configs.items()} for m in runs])
        policy = Policy.from_config(ctx.cfg.decide, t.direction)
        if served_trees_of(lane.measurer) is not None and len(seconds) > 1:  # best's served looks: a start, then looks
            look_s = statistics.median(seconds[1:])
            cost = estimate_decision_s(seconds[:1], policy, mode, noise_pct=noise, look_s=look_s)
        else:
            cost = estimate_decision_s(seconds, policy, mode, noise_pct=noise)
        it.record["decision_cost"] = cost.to_dict()
        ctx.store.set("decision_cost", cost.to_dict())
        ctx.event("decision_cost", cost.text(), it=it, level="warn" if cost.slow else "info")
