"""The idle gate: pick an idle GPU before every timed step, or wait, or stop the run.

Interface used by the loop (keep it stable):

    gate = Gate(cfg.gpu, backend, sleep=loop_sleep, own_pids=ctx.own_pids)
    decision = gate.acquire()      # GateDecision; raises NoIdleGpu after wait_max_s
    decision.env                   # {"CUDA_VISIBLE_DEVICES": "3", ...} for the child processes
    gate.evidence()                # the chosen GPU's state now, JSON-able (before/after)
    round_flags(before, after)     # (engine.gpu) what disturbed a timed step, [] when nothing did
    gate.close()                   # releases the host-wide claim, shuts the backend down

`sleep` is the loop's: it polls the engine's commands and may raise to abort a wait. Every
wait for a busy GPU goes through it. `pause` (default: `sleep`) takes the short pauses that
are part of a check, not a wait: between its samples, before a claim's retry. The loop passes
one that polls the commands as `sleep` does but tells nobody that a GPU is busy: a full check
of an idle GPU (every `quick_recheck_s`) once showed as "no idle GPU: next check in 1 s" in the
progress, the TUI and an MCP agent's notifications, while nothing was busy (docs/agents.md).

How a check decides (see docs/gpu-gate.md): `cfg.samples` readings `cfg.sample_interval_s`
apart; a GPU is idle when, over all of them, no foreign compute process is on it (this run's
own processes and their descendants do not count), utilization stays at or under
`util_max_pct` (from the second sample on: the first may still see this run's own step that
just ended), memory used (less this run's own) stays at or under `mem_used_max_mib` and
grows by no more than `mem_growth_max_mib`, and no other kopt run holds its host-wide claim.
The gate keeps its GPU while it stays idle (sticky), else takes the most idle one (one of
`prefer` first: a Ray actor's, where Ray placed it), claims it, and binds children with
CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES.

The quick recheck (`quick_recheck_s`): between timed steps on the GPU it holds, a gate whose
last full check is recent and whose reading right after the last step (`evidence()`) was
clean checks with one fresh reading instead of `samples` (see `Gate._quick`).

Who a GPU process is (`enrich`, `family`), through psutil: its name and owner, and this run's own processes.

Backends report PIDs (and sometimes names). The gate needs names and owners to explain a
busy GPU, and the set of this run's own processes (the engine and the benchmark children
with all their descendants) so that they never count as foreign. A PID that psutil cannot
see (it ended, or it lives in another PID namespace, as in a container) keeps NA fields.

Host-wide claims, so that kopt runs on one host never time on the same GPU: claims.py.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import psutil

from kopt_supervisor.engine import BadInput, KoptFailure
from kopt_supervisor.engine.config import GpuConfig
from kopt_supervisor.engine.gpu import (
    NA,
    Assessment,
    Backend,
    GpuProcess,
    GpuState,
    assess,
    busyness,
    check_report,
    disturbing,
    gpu_key,
    is_na,
    proc_dict,
    round_flags,
    visible_devices_env,
    why,
)
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.claims import ClaimRegistry, claim_key


class NoIdleGpu(KoptFailure):
    """No GPU became idle within gpu.wait_max_s: a stop condition for the whole run."""


@dataclass
class GateDecision:
    gpu: GpuState | None
    """None when the machine has no GPU (CPU-only targets run)."""
    env: dict[str, str]
    waited_s: float
    assessments: list[Assessment]
    note: str = ""
    """"idle", "kept", "switched from GPU n", or why there is no GPU."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.to_dict() if self.gpu else None,
            "env": dict(self.env),
            "waited_s": self.waited_s,
            "assessments": [a.to_dict() for a in self.assessments],
            "note": self.note,
        }


# ---------------------------------------------------------------------------------------
# The gate (side effects: reads the backend, sleeps through the loop, holds claims)


class Gate:
    def __init__(
        self,
        cfg: GpuConfig,
        backend: Backend,
        *,
        sleep: Callable[[float], None] = time.sleep,
        pause: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        own_pids: Callable[[], Iterable[int]] = set,
        log: Callable[[str], None] = lambda msg: None,
        claims: ClaimRegistry | None = None,
        owner: str = "",
        prefer: Iterable[int] = (),
    ) -> None:
        self.cfg = cfg
        self.backend = backend
        self.sleep = sleep
        self.pause = pause if pause is not None else sleep
        """A check's own pauses (between samples, before a claim's retry): no GPU is busy."""
        self.clock = clock
        self.own_pids = own_pids
        self.log = log
        self.claims = claims if claims is not None else ClaimRegistry(owner=owner)
        self.namespace = str(getattr(backend, "claim_namespace", ""))
        self.prefer = frozenset(prefer)
        """GPU indices taken first among the idle ones (a Ray actor's: where Ray placed it)."""
        self.chosen: GpuState | None = None
        self.chosen_uuid: Any = None
        self.ever_seen = False
        self.last: list[Assessment] = []
        """The last check's assessments (for the dashboard)."""
        self._waited = False
        self._full_check_at: float | None = None
        """When the last full check chose the GPU held now (the quick recheck's time bound)."""
        self._acquired_at: float | None = None
        self._after: tuple[float, GpuState] | None = None
        """The chosen GPU's latest reading by evidence() and when: the reading right after a
        timed step, which the quick recheck needs clean."""
        self._after_own: set[int] = set()
        """This run's processes when that reading was taken."""
        self.waiting: dict[str, Any] | None = None
        """While acquire() waits: {"waited_s", "next_check_in_s", "gives_up_in_s", "reasons"}."""

    # -- reading -------------------------------------------------------------------

    def _read(self) -> list[GpuState]:
        try:
            gpus = list(self.backend.read())
        except Exception as exc:  # a backend must not raise; if one does, it read nothing
            self.log(f"GPU backend {getattr(self.backend, 'name', '?')} failed: {why(exc)}")
            return []
        if gpus:
            self.ever_seen = True
        if self.cfg.devices:
            wanted = [g for g in gpus if g.index in self.cfg.devices]
            if gpus and not wanted and self.chosen is None and not self.last:
                found = ", ".join(str(g.index) for g in gpus)
                raise BadInput(f"[gpu].devices = {self.cfg.devices}: no such GPU (found {found})")
            gpus = wanted
        return gpus

    def _own(self) -> set[int]:
        try:
            return family(self.own_pids())
        except Exception:  # the loop's callback failed: still count this process as own
            return family(())

    def _claimed_by(self, g: GpuState) -> dict[str, Any] | None:
        return self.claims.probe(claim_key(self.namespace, g.uuid, g.index))

    def check(self) -> list[Assessment]:
        """One check: cfg.samples readings, judged together. No claim is taken."""
        samples: list[list[GpuState]] = []
        for i in range(max(1, self.cfg.samples)):
            if i:
                self.pause(self.cfg.sample_interval_s)
            samples.append(self._read())
            if not samples[0] and not self.ever_seen:
                break  # no GPU on this machine: nothing to sample
        self.last = assess(samples, self.cfg, self._own(), claimed_by=self._claimed_by, enrich=enrich)
        return self.last

    # -- acquiring -----------------------------------------------------------------

    def acquire(self) -> GateDecision:
        start = self.clock()
        self._waited = False
        quick = self._quick()
        if quick is not None:
            self._acquired_at = self.clock()
            assert self.chosen is not None
            return GateDecision(self.chosen, visible_devices_env(self.chosen), 0.0, [quick], "kept (quick recheck)")
        while True:
            found = self.check()
            waited = self.clock() - start
            if not found and not self.ever_seen:
                self.waiting = None
                status = getattr(self.backend, "status", "") or "no GPU"
                return GateDecision(None, {}, waited, [], f"no GPU: {status}")
            pick = self._pick([a for a in found if a.idle])
            if pick is not None:
                self.waiting = None
                self._full_check_at = self._acquired_at = self.clock()
                return self._take(pick, found, waited)
            summary = _summary(found) or "no GPU visible: " + str(getattr(self.backend, "status", ""))
            if waited >= self.cfg.wait_max_s:
                self.waiting = None
                raise NoIdleGpu(
                    f"no idle GPU for {_duration(waited)} (gpu.wait_max_s = {self.cfg.wait_max_s:g}): {summary}"
                )
            pause = min(self.cfg.wait_s, self.cfg.wait_max_s - waited)
            self.waiting = {
                "waited_s": waited,
                "next_check_in_s": pause,
                "gives_up_in_s": self.cfg.wait_max_s - waited,
                "reasons": summary,
            }
            self.log(
                f"no idle GPU ({summary}); next check in {_duration(pause)}, "
                f"giving up in {_duration(self.cfg.wait_max_s - waited)}"
            )
            self._waited = True
            self.sleep(pause)

    def _quick(self) -> Assessment | None:
        """The quick recheck: an idle assessment of the GPU held from one fresh reading, or
        None when the full check must run. Taken only when the gate holds a GPU and its claim,
        the last full check chose it at most `quick_recheck_s` ago, and the reading right after
        the step since then (evidence()) could list processes and showed no foreign one and
        no disturbing throttle. The fresh reading is judged with that one as the first sample
        (foreign processes in either, memory used, growth between them, claims); utilization
        is not judged (NVML's window still shows this run's own step). Anything busy: None."""
        c, after = self.chosen, self._after
        if (
            self.cfg.quick_recheck_s <= 0
            or c is None
            or after is None
            or self._full_check_at is None
            or self._acquired_at is None
            or after[0] < self._acquired_at
            or self.clock() - self._full_check_at > self.cfg.quick_recheck_s
        ):
            return None
        seen = after[1]
        if is_na(seen.processes) or disturbing(tuple(() if is_na(seen.throttle) else seen.throttle)):
            return None
        own_then = self._after_own
        if any(p.pid not in own_then for p in seen.processes):
            return None
        # its processes were this run's when read (a serving process since closed is not
        # foreign now): judged then, so only the fresh reading's processes are judged here
        seen = dataclasses.replace(seen, processes=())
        if not self.claims.claim(claim_key(self.namespace, c.uuid, c.index)):
            return None
        now = next((g for g in self._read() if gpu_key(g) == self.chosen_uuid), None)
        if now is None or is_na(now.processes):  # the fresh reading's processes are what is judged
            return None
        found = assess(
            [[seen], [now]], self.cfg, self._own(), claimed_by=self._claimed_by, enrich=enrich, judge_util=False
        )
        if len(found) != 1 or not found[0].idle:
            return None
        self.last = found
        return found[0]

    def _pick(self, idle: list[Assessment]) -> Assessment | None:
        ordered = sorted(idle, key=lambda a: (a.gpu.index not in self.prefer, busyness(a)))
        if self.chosen_uuid is not None:  # sticky: keep the GPU while it stays idle
            ordered.sort(key=lambda a: gpu_key(a.gpu) != self.chosen_uuid)
        for a in ordered:
            if self._claim(a.gpu):
                return a
            a.idle = False
            a.reasons.append("claimed by another kopt run (just now)")
        return None

    def _claim(self, g: GpuState) -> bool:
        key = claim_key(self.namespace, g.uuid, g.index)
        for attempt in range(3):
            if self.claims.claim(key):
                return True
            if self.claims.probe(key):  # a real holder, not a passing probe
                return False
            if attempt < 2:
                self.pause(0.05)
        return False

    def _take(self, pick: Assessment, found: list[Assessment], waited: float) -> GateDecision:
        g = pick.gpu
        previous = self.chosen
        note = "idle"
        if previous is not None:
            if gpu_key(previous) == gpu_key(g):
                note = "kept"
            else:
                note = f"switched from GPU {previous.index}"
                self.claims.release(claim_key(self.namespace, previous.uuid, previous.index))
                self.log(f"GPU {previous.index} is no longer usable; switching to GPU {g.index}")
        self.chosen = g
        self.chosen_uuid = gpu_key(g)
        after = f" after waiting {_duration(waited)}" if self._waited else ""
        if note != "kept":
            self.log(f"using GPU {g.index} ({g.name}, {g.uuid}){after}")
        elif after:
            self.log(f"GPU {g.index} is idle again{after}")
        return GateDecision(g, visible_devices_env(g), waited, found, note)

    # -- evidence ------------------------------------------------------------------

    def evidence(self) -> dict[str, Any] | None:
        """The chosen GPU's state now (one reading), with its foreign processes; None when no
        GPU was chosen; {"missing": True, ...} when the chosen GPU vanished."""
        if self.chosen is None:
            return None
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        gpus = self._read_quietly()
        g = next((x for x in gpus if gpu_key(x) == self.chosen_uuid), None)
        if g is None:
            c = self.chosen
            return {
                "index": c.index,
                "uuid": None if is_na(c.uuid) else c.uuid,
                "name": None if is_na(c.name) else c.name,
                "missing": True,
                "time": now,
            }
        own = self._own()
        self._after, self._after_own = (self.clock(), g), own
        foreign = [] if is_na(g.processes) else [enrich(p) for p in g.processes if p.pid not in own]
        ev = g.to_dict()
        ev["time"] = now
        ev["foreign_processes"] = [proc_dict(p) for p in foreign]
        return ev

    def _read_quietly(self) -> list[GpuState]:
        try:
            return list(self.backend.read())
        except Exception:  # evidence is best effort; a failed read means "not seen"
            return []

    def round_flags(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
        return round_flags(before, after)

    def close(self) -> None:
        self.claims.release_all()
        self.chosen = None
        self.chosen_uuid = None
        self._after = self._full_check_at = None
        try:
            self.backend.close()
        except Exception:  # closing must never fail the run's shutdown
            pass


def gpus_report(cfg: GpuConfig, backend: Backend | None = None, *, sleep=time.sleep) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """`kopt gpus`: one check, no claim taken (gpu.check_report); opens (and closes) a backend when none is given."""
    be = open_backend(cfg.vendor) if backend is None else backend
    gate = Gate(cfg, be, sleep=sleep, owner="kopt gpus")
    try:
        return check_report(cfg, be, gate.check(), gpu_seen=gate.ever_seen, when=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    finally:
        if backend is None:
            be.close()


# ---------------------------------------------------------------------------------------
# Text


def _summary(found: list[Assessment]) -> str:
    return "; ".join(f"GPU {a.gpu.index}: {', '.join(a.reasons)}" for a in found if a.reasons)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def enrich(p: GpuProcess) -> GpuProcess:
    """The process with its name and user filled in from psutil where the backend had none."""
    if not is_na(p.name) and not is_na(p.user):
        return p
    try:
        proc = psutil.Process(p.pid)
        name = p.name if not is_na(p.name) else _safe(proc.name)
        user = p.user if not is_na(p.user) else _safe(proc.username)
    except (psutil.Error, OSError):
        return p
    return dataclasses.replace(p, name=name, user=user)


def _safe(getter) -> object:  # type: ignore[no-untyped-def]
    try:
        return getter() or NA
    except (psutil.Error, OSError):
        return NA


def family(pids: Iterable[int]) -> set[int]:
    """The given PIDs, this process, and all their live descendants: for each PID, what
    psutil's `children(recursive=True)` gives (a descendant no older than that PID's process,
    so a reused PID is no descendant), from one read of the process table for all of them
    (a table per PID made a gate check of a served look ~20 ms)."""
    roots = set(pids) | {os.getpid()}
    out = set(roots)
    try:
        parents: dict[int, int] = psutil._ppid_map()
    except Exception:  # a psutil without it: a table per PID, as psutil reads it
        for pid in roots:
            try:
                out.update(c.pid for c in psutil.Process(pid).children(recursive=True))
            except (psutil.Error, OSError):
                continue
        return out
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    for root in roots:
        try:
            born = psutil.Process(root).create_time()
        except (psutil.Error, OSError):
            continue
        seen: set[int] = set()
        stack = [root]
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            for child in children.get(pid, ()):
                try:
                    if born <= psutil.Process(child).create_time():
                        out.add(child)
                        stack.append(child)
                except (psutil.Error, OSError):
                    continue
    return out
