"""Lanes on a Ray cluster ([parallel] backend = "ray"; the `ray` extra, imported only then):
each lane's runs on a GPU host of an existing cluster (docs/lanes.md, "Across hosts on Ray").

    head (the engine)                              worker host (a LaneWorker actor)
    ---------------------------------------------  ------------------------------------------
    proposes, polices, keeps the store, decides    gets BEST and the candidate as a git bundle,
    sends a bundle at each decision's first look   checks them out in a folder of its own,
    asks for looks; stores each look's samples     measures each look with kopt's own code:
    only once it came back (a lost worker's look   its own GPU gate and claim pick an idle GPU
    is taken again on another: nothing counts      (Ray's GPU accounting is logical: it does not
    twice)                                         see a foreign process), confined by bwrap

Everything that needs the lane's GPU runs on its worker, never on the head (which may have
none): the looks, a keep's re-decision in fresh processes (`FreshOnWorker`), the baseline's
runs and the profiler's (`RayMeasurer` is the lane's `context.RemoteTrees`; the profile's
folder comes back to the head, which compares and decides). The worker's gate tries first the
GPU Ray placed its actor on, so that Ray's accounting and kopt's agree; a foreign process on
it, which Ray cannot see, sends the gate to another idle GPU, said in the record.

`connect(address, timeout_s)` fails within the timeout with the address named (a `ray.init`
that cannot reach the cluster would otherwise hang). A worker whose Python or kopt version
differs from the head's is refused (a mismatch would look like a regression).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput, gitops
from kopt_supervisor.engine.gitops import tree_of
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.gate import Gate
from kopt_supervisor.engine.loop.context import GpuPair, Lane, Look, ReleaseCloses, RunContext, acquire
from kopt_supervisor.engine.loop.measure import ProcessAbba, measure_best, measurer_for
from kopt_supervisor.engine.loop.profile_runs import profile_in
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.profile import choose_profiler
from kopt_supervisor.engine.profile.profiler import ProfileCalls, Profiler
from kopt_supervisor.engine.profile.summary import ProfileSummary
from kopt_supervisor.engine.records import Iteration, Status

NAMESPACE = "kopt"
LOOK_ATTEMPTS = 3
"""A look is tried on this many workers before the decision fails (a worker lost mid-look)."""
ROOT_PREFIX = "kopt-ray-"
"""A LaneWorker's folder in its host's temporary directory: `kopt-ray-<tag>-lane<N>-<random>`."""
OWNER_FILE = "owner.pid"
"""In that folder: the worker process's pid and host name, so that a later worker on the host
can tell the folder of a killed one (`sweep_orphans`)."""
CLOSE_WAIT_S = 10.0
"""How long the head waits for an idle worker to remove its folder before it kills it."""


def sweep_orphans(tmp: Path) -> list[Path]:
    """Remove the folders of LaneWorkers no longer alive on this host (killed by a stop mid-look,
    lost with their head, or crashed: `close` never ran). A folder is left when its owner is not
    written yet, still runs, or is another host's (containers sharing one temporary directory
    see each other's folders but not each other's processes). Returns what was removed."""
    removed = []
    for root in tmp.glob(f"{ROOT_PREFIX}*-lane*-*"):
        if root.is_symlink() or not root.is_dir():
            continue  # a worker's folder is a real folder: a link is someone's lure, never followed
        try:
            pid, host = (root / OWNER_FILE).read_text().split()
            if host != socket.gethostname():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
        except (OSError, ValueError):
            continue  # not ours to judge: unreadable, another user's process, no pid yet
    return removed


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


PROFILE_FILE_MAX = 8 << 20
"""A profile folder's files larger than this stay on the worker (a full ncu report): the head
needs the summaries and the outputs' (profile/profiler.py), which are small."""


def ray_gpus() -> tuple[int, ...]:
    """The GPUs Ray placed this actor on (its logical accounting), as the host's indices."""
    try:
        ids = _ray().get_gpu_ids()
    except Exception:  # noqa: BLE001 - not in a Ray worker, or no GPUs asked for
        return ()
    return tuple(int(i) for i in ids if str(i).isdigit())


class LaneWorker:
    """A lane's runs on a worker host (a Ray actor): the trees from a bundle; looks, the
    baseline's runs and profiles by kopt's own code with the worker's own GPU gate, confined."""

    def __init__(self, config_text: str, tag: str, lane: int, no_sandbox: bool) -> None:
        from kopt_supervisor.engine.store import Store
        from kopt_supervisor.engine.workspace import Workspace, config_seal, make_secret

        sweep_orphans(Path(tempfile.gettempdir()))
        self.root = Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{tag}-lane{lane}-"))
        (self.root / OWNER_FILE).write_text(f"{os.getpid()} {socket.gethostname()}\n")
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
        """Check out BEST and the candidate (from the head's bundle) for the next runs."""
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
                prefer=ray_gpus(),  # Ray's placement first: its accounting and the gate's agree
            )
        )
        self.lane = Lane(self.lane_index, best_path, cand_path, gate, host=socket.gethostname())
        self.lane.measurer = measurer_for(ctx, self.lane)
        self.fresh = None
        self.loaded = (best, cand)
        return socket.gethostname()

    def _run(self, version: int, logs: str, run: Callable[[RunContext, Lane, dict[str, str]], Any]) -> dict[str, Any]:
        """`run` under the worker's gate (an idle GPU chosen and claimed here), with what the
        head records of it: the GPU before and after, the host, the logs named `logs*`."""
        assert self.ctx is not None and self.lane is not None and self.lane.measurer is not None, "load() first"
        lease = acquire(self.ctx, self.lane)
        t0 = time.monotonic()
        got = run(self.ctx, self.lane, lease.env)
        return {
            "got": got,
            "gpu": (lease.before, self.lane.gate.evidence()),
            "vendor": self.lane.vendor,
            "ray_gpus": list(ray_gpus()),
            "host": self.lane.host,
            "logs": {
                p.name: p.read_bytes()[-65536:].decode("utf-8", "replace")
                for p in self.ws.log_dir(version).glob(f"{logs}*")
                if p.is_file()
            },
            "wall_s": time.monotonic() - t0,
        }

    def look(self, version: int, stage: str, r: int, tree: str, best: str, fresh: bool = False) -> dict[str, Any]:
        """One look, measured here: its pairs, both sides' rows and seconds. `fresh`: in fresh,
        separate processes of the process-level bench (the re-decision of a keep), whatever
        the lane's measurer."""
        it = Iteration(version, Status.RUNNING, best_commit_before=best)
        it.record["evaluated_tree"] = tree

        def run(ctx: RunContext, lane: Lane, env: dict[str, str]) -> Look:
            if fresh and self.fresh is None:
                self.fresh = ProcessAbba(ctx, lane, fresh_caches=True)
            measurer = self.fresh if fresh and self.fresh is not None else lane.measurer
            assert measurer is not None
            return measurer.look(it, stage, r, env)

        return self._run(version, f"{stage}_r{r}_", run)

    def baseline_run(self, version: int, name: str, r: int, best: str) -> dict[str, Any]:
        """One run of the baseline (BEST's tree) here: its measurement and seconds."""
        it = Iteration(version, Status.RUNNING, best_commit_before=best)
        return self._run(version, name, lambda ctx, lane, env: measure_best(ctx, it, lane, name, r, env))

    def profiler(self, version: int, kind: str, outside_ranges: str) -> dict[str, Any]:
        """The profiler for this worker's GPU ([profile].kind), its tool on this host's PATH."""
        return self._run(
            version, "-", lambda ctx, lane, env: choose_profiler(kind, lane.vendor, outside_ranges=outside_ranges)
        )

    def profile(
        self,
        version: int,
        best: str,
        tree: str,
        which: str,
        side: str,
        prof: Profiler,
        calls: ProfileCalls,
        seed: int | None,
    ) -> dict[str, Any]:
        """`which` tree profiled here into the folder `side`: the summary and the folder's files."""
        it = Iteration(version, Status.RUNNING, best_commit_before=best)
        it.record["evaluated_tree"] = tree
        out_dir = self.ws.profiles / f"v{version}" / side
        shutil.rmtree(out_dir, ignore_errors=True)

        def run(ctx: RunContext, lane: Lane, env: dict[str, str]) -> dict[str, Any]:
            path = lane.cand if which == "cand" else lane.best
            summary = profile_in(ctx, it, lane, prof, path, side, calls=calls, seed=seed)
            files = {
                str(f.relative_to(out_dir)): f.read_bytes()
                for f in sorted(out_dir.rglob("*"))
                if f.is_file() and not f.is_symlink() and f.stat().st_size <= PROFILE_FILE_MAX
            }
            return {"summary": summary, "files": files}

        return self._run(version, f"profile_{side}", run)

    def new_decision(self) -> None:
        if self.lane is not None and self.lane.measurer is not None:
            self.lane.measurer.new_decision()
        if self.fresh is not None:
            self.fresh.new_decision()

    def close(self) -> None:
        if self.lane is not None:
            self.lane.close()
        shutil.rmtree(self.root, ignore_errors=True)


LOST = (
    "RayActorError",
    "WorkerCrashedError",
    "NodeDiedError",
    "ObjectLostError",
    "OwnerDiedError",
    "ActorUnavailableError",
)
"""Ray's exceptions that mean the worker is gone (not that the run on it failed)."""


class RayMeasurer(ReleaseCloses):
    """The head's side of a Ray lane: a Measurer (engine/loop/measure.py) whose looks run on
    a LaneWorker actor, and the lane's `context.RemoteTrees` (the baseline's runs and the
    profiler's go there too)."""

    def __init__(self, ctx: RunContext, lane: Lane) -> None:
        self.ctx, self.lane = ctx, lane
        self.actor: Any = None
        self.loaded: tuple[str, str] | None = None
        self.vendor = "none"
        """The vendor of the GPU the worker's gate chose, as of its last run."""
        self.gpu: GpuPair = (None, None)
        """The worker's GPU before and after its last run."""
        self.busy = False
        """A call on the worker is in flight (`_get`): a close then kills it without waiting."""

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
        self.busy = True
        try:
            while True:
                ready, _ = ray.wait([ref], timeout=self.ctx.poll_interval_s)
                if ready:
                    return ray.get(ready[0])
                try:
                    self.ctx.control.pump()
                except BaseException:
                    self.close()
                    raise
        finally:
            self.busy = False

    def _on_worker(self, it: Iteration, tree: str, what: str, call: Callable[[Any], Any]) -> dict[str, Any]:
        """`call(actor)` on the lane's worker with BEST and `tree` checked out there; a worker lost
        meanwhile is replaced and the call made again (nothing of it was stored), up to
        LOOK_ATTEMPTS workers; a failure of the run itself is a BenchError naming the worker.
        Its logs land in the iteration's log folder (ray_*), its GPU in `gpu`."""
        _ray()
        from ray import exceptions as rx

        lost = tuple(getattr(rx, n) for n in LOST if hasattr(rx, n))
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
                    self.lane.host = self._get(actor.load.remote(bundle, best, cand))
                    self.loaded = (best, tree)
                got: dict[str, Any] = self._get(call(actor))
                break
            except rx.RayTaskError as e:  # the run itself failed on the worker: its own error, not a lost worker
                cause = e.cause if isinstance(e.cause, BaseException) else e
                if isinstance(cause, BenchError):
                    raise BenchError(f"on the Ray worker {self.lane.host}: {cause}", ended=cause.ended) from None
                first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
                raise BenchError(f"on the Ray worker {self.lane.host}: {type(cause).__name__}: {first[:300]}") from None
            except lost as e:  # the worker died: taken again elsewhere, nothing was stored
                last = e
                self.ctx.event(
                    "lanes",
                    f"v{it.version} {self.lane.name}: the Ray worker was lost during {what} "
                    f"({type(e).__name__}); taken again (attempt {attempt + 2}/{LOOK_ATTEMPTS})",
                    it=it,
                    level="warn",
                )
                self.actor, self.loaded = None, None
        else:
            raise BenchError(f"{self.lane.name}: {what} failed on {LOOK_ATTEMPTS} Ray workers: {last}")
        logs = self.ctx.ws.log_dir(it.version)
        if got["logs"]:
            logs.mkdir(parents=True, exist_ok=True)
        for name, text in got["logs"].items():
            (logs / f"ray_{name}").write_text(text)
        self.lane.host, self.vendor, self.gpu = got["host"], got["vendor"], got["gpu"]
        g = it.record.setdefault("gpu", {})
        g["host"] = got["host"]
        chosen = (got["gpu"][0] or {}).get("index")
        if got["ray_gpus"] and chosen is not None and chosen not in got["ray_gpus"]:
            g["ray_gpus"] = got["ray_gpus"]  # Ray placed the actor elsewhere: its accounting cannot see why
        return got

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        return self.measure(it, stage, r, fresh=False)

    def measure(self, it: Iteration, stage: str, r: int, *, fresh: bool) -> Look:
        """A look on the lane's worker (`fresh`: in fresh processes of the process-level bench)."""
        tree = str(it.record.get("evaluated_tree") or "")
        best = it.best_commit_before or ""
        got = self._on_worker(
            it, tree, f"look {r + 1}", lambda actor: actor.look.remote(it.version, stage, r, tree, best, fresh)
        )
        look: Look = got["got"]
        return dataclasses.replace(look, gpu=got["gpu"])

    # -- context.RemoteTrees: the baseline's runs and the profiler's, on the worker

    def baseline_run(self, it: Iteration, name: str, r: int) -> tuple[Measurement, float]:
        best = it.best_commit_before or ""
        tree = tree_of(self.lane.best, best)  # the baseline measures BEST against nothing: both trees BEST's
        got = self._on_worker(
            it, tree, f"baseline run {r + 1}", lambda actor: actor.baseline_run.remote(it.version, name, r, best)
        )
        m, secs = got["got"]
        return m, secs

    def _tree(self, it: Iteration) -> str:
        """The candidate tree the worker holds beside BEST for `it` (the baseline's: BEST's own)."""
        return str(it.record.get("evaluated_tree") or "") or tree_of(self.lane.best, it.best_commit_before or "")

    def profiler(self, it: Iteration, kind: str, outside_ranges: str) -> Profiler | None:
        got = self._on_worker(
            it,
            self._tree(it),
            "the profiler's choice",
            lambda actor: actor.profiler.remote(it.version, kind, outside_ranges),
        )
        prof: Profiler | None = got["got"]
        return prof

    def profile(
        self,
        it: Iteration,
        prof: Profiler,
        which: str,
        side: str,
        calls: ProfileCalls,
        seed: int | None,
        out_dir: Path,
    ) -> ProfileSummary:
        best, cand = it.best_commit_before or "", self._tree(it)
        got = self._on_worker(
            it,
            cand,
            f"the profile of {side}/",
            lambda actor: actor.profile.remote(it.version, best, cand, which, side, prof, calls, seed),
        )
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        root = out_dir.resolve()
        for rel, data in got["got"]["files"].items():
            dest = (out_dir / rel).resolve()
            if not dest.is_relative_to(root):  # the worker names its own files; nothing lands outside
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        summary: ProfileSummary = got["got"]["summary"]
        return summary

    def new_decision(self) -> None:
        self.loaded = None

    def close(self) -> None:
        """End the worker: an idle one first removes its trees and workspace on its host (a busy
        one, stopped mid-look, is killed at once: the next worker there sweeps its folder)."""
        if self.actor is not None:
            actor, self.actor, self.loaded = self.actor, None, None
            if not self.busy:
                try:
                    _ray().get(actor.close.remote(), timeout=CLOSE_WAIT_S)
                except Exception:  # noqa: BLE001 - gone already, or slow: killed all the same
                    pass
            try:
                _ray().kill(actor)
            except Exception:  # noqa: BLE001 - gone already
                pass


class FreshOnWorker(ReleaseCloses):
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
