"""Progress per GPU-hour (docs/lanes.md): a run's best speedup against time, and where each
lane's time went. Pure: iterations in, typed records out (`kopt status --json` `progress`,
results.md's "Progress and where the time went", the TUI's lanes panel).

- The curve: one `SpeedupPoint` per keep, in the order iterations ended, with the wall
  seconds since the first candidate started and the lane-seconds spent by then (the sum of
  every candidate iteration's time that had ended; each lane holds one GPU while its
  iteration runs, so lane-seconds are GPU-seconds), and the best speedup after that keep
  (`projections.best_speedup`'s rule: the geometric mean over classes of baseline / best).
- Per lane (`LaneTime`): the seconds of each bucket of engine/loop/lane.py SPENT (wait,
  propose, measure, confirm, review, stale), what else the iterations spent (kopt's own
  bookkeeping, discards: `other_s`), and how many iterations were rebased, handed back or
  ended stale. An iteration that ended because its change no longer applied on a moved BEST
  (record `stale`) counts whole as stale. Records written before the buckets existed count
  their whole time as `other_s`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.projections import best_speedup
from kopt_supervisor.engine.records import Iteration, Status

BUCKETS = ("wait", "propose", "measure", "confirm", "review", "stale")
"""engine/loop/lane.py SPENT, in the order an iteration passes them (the engine's own list;
kept here so that reading a run loads no part of the loop)."""


@dataclass(frozen=True)
class SpeedupPoint:
    version: int
    """The keep that moved BEST."""
    t_s: float
    """Wall seconds from the first candidate's start to this keep's end."""
    gpu_s: float
    """Lane-seconds (GPU-seconds) of every candidate iteration ended by then, this one included."""
    speedup: float
    """The best speedup over the baseline after this keep (geometric mean over classes)."""


@dataclass(frozen=True)
class LaneTime:
    lane: int
    iterations: int
    busy_s: float
    """Seconds its iterations ran (their total_s)."""
    wait_s: float
    propose_s: float
    measure_s: float
    confirm_s: float
    review_s: float
    stale_s: float
    other_s: float
    """busy_s less the buckets: kopt's own bookkeeping, discards, records without buckets."""
    rebased: int
    """Times BEST moved under one of its candidates and the change was put on the new BEST."""
    handed_back: int
    """Times a change that no longer applied went back to its proposer."""
    stale_iterations: int
    """Iterations that ended because their change no longer applied on a moved BEST."""


@dataclass(frozen=True)
class Progress:
    curve: tuple[SpeedupPoint, ...]
    lanes: tuple[LaneTime, ...]
    elapsed_s: float
    """Wall seconds from the first candidate's start to the last one's end (0: none ended)."""
    gpu_s: float
    """Lane-seconds of every ended candidate iteration (the sum of the lanes' busy_s)."""
    best_speedup: float | None
    stale_s: float

    @property
    def stale_share(self) -> float | None:
        """The share of GPU time thrown away on stale candidates (None before any)."""
        return self.stale_s / self.gpu_s if self.gpu_s > 0 else None

    @property
    def gpu_hours(self) -> float:
        return self.gpu_s / 3600

    def time_to(self, speedup: float) -> SpeedupPoint | None:
        """The first keep that reached `speedup` (None: not reached)."""
        return next((p for p in self.curve if p.speedup >= speedup), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "curve": [asdict(p) for p in self.curve],
            "lanes": [asdict(x) for x in self.lanes],
            "elapsed_s": self.elapsed_s,
            "gpu_s": self.gpu_s,
            "gpu_hours": self.gpu_hours,
            "best_speedup": self.best_speedup,
            "stale_s": self.stale_s,
            "stale_share": self.stale_share,
        }

    def line(self) -> str:
        """One line: "2.73× in 7:02 (0.35 GPU-h) · stale 3%" ("" before any candidate ended)."""
        if not self.gpu_s:
            return ""
        parts = [
            f"{fmt.speedup(self.best_speedup)} in {fmt.clock(self.elapsed_s)} ({self.gpu_hours:.2f} GPU-h)"
            if self.best_speedup
            else f"{fmt.clock(self.elapsed_s)} ({self.gpu_hours:.2f} GPU-h)"
        ]
        if self.stale_share is not None:
            parts.append(f"stale {fmt.share(100 * self.stale_share)}")
        return " · ".join(parts)


def _num(v: Any) -> float:
    return float(v) if fmt.is_num(v) else 0.0


def _spent(it: Iteration) -> dict[str, float]:
    timings = it.record.get("timings")
    spent = timings.get("spent") if isinstance(timings, dict) else None
    return {b: _num(spent.get(b)) for b in BUCKETS} if isinstance(spent, dict) else dict.fromkeys(BUCKETS, 0.0)


def _total(it: Iteration) -> float:
    timings = it.record.get("timings")
    total = _num(timings.get("total_s")) if isinstance(timings, dict) else 0.0
    if not total and it.finished_at and it.started_at:
        total = max(0.0, it.finished_at - it.started_at)
    return total


def _lane(it: Iteration) -> int:
    lane = it.record.get("lane", 0)
    return lane if isinstance(lane, int) and not isinstance(lane, bool) and lane >= 0 else 0


def progress(iterations: Sequence[Iteration], direction: str = "min") -> Progress:
    """The run's Progress from its iterations (the trusted history: a forged keep counts for
    nothing; masked iterations spent their time but moved nothing)."""
    base = [it for it in iterations if it.status == Status.BASELINE and not it.masked]
    ended = sorted(
        (it for it in iterations if it.final and it.status != Status.BASELINE), key=lambda it: (it.order, it.version)
    )
    t0 = min((it.started_at for it in ended if it.started_at), default=0.0)
    curve: list[SpeedupPoint] = []
    lanes: dict[int, dict[str, float]] = {}
    gpu_s = stale_s = last_end = 0.0
    seen: list[Iteration] = list(base)
    for it in ended:
        total = _total(it)
        gpu_s += total
        last_end = max(last_end, it.finished_at or 0.0)
        spent = _spent(it)
        if it.record.get("stale"):
            spent = {**dict.fromkeys(BUCKETS, 0.0), "stale": total}
        lane = lanes.setdefault(
            _lane(it),
            {
                "iterations": 0.0,
                "busy_s": 0.0,
                "rebased": 0.0,
                "handed_back": 0.0,
                "stale_iterations": 0.0,
                **{b: 0.0 for b in BUCKETS},
            },
        )
        lane["iterations"] += 1
        lane["busy_s"] += total
        lane["rebased"] += len(it.record.get("rebased") or [])
        lane["handed_back"] += len(it.record.get("handed_back") or [])
        lane["stale_iterations"] += bool(it.record.get("stale"))
        for b in BUCKETS:
            lane[b] += spent[b]
        stale_s += spent["stale"]
        seen.append(it)
        if it.kept and not it.masked:
            s = best_speedup(seen, direction)
            if s is not None:
                curve.append(
                    SpeedupPoint(it.version, round(max(0.0, (it.finished_at or t0) - t0), 3), round(gpu_s, 3), s)
                )
    out = tuple(
        LaneTime(
            lane=i,
            iterations=int(v["iterations"]),
            busy_s=round(v["busy_s"], 3),
            wait_s=round(v["wait"], 3),
            propose_s=round(v["propose"], 3),
            measure_s=round(v["measure"], 3),
            confirm_s=round(v["confirm"], 3),
            review_s=round(v["review"], 3),
            stale_s=round(v["stale"], 3),
            other_s=round(max(0.0, v["busy_s"] - sum(v[b] for b in BUCKETS)), 3),
            rebased=int(v["rebased"]),
            handed_back=int(v["handed_back"]),
            stale_iterations=int(v["stale_iterations"]),
        )
        for i, v in sorted(lanes.items())
    )
    return Progress(
        tuple(curve),
        out,
        round(max(0.0, last_end - t0), 3) if ended else 0.0,
        round(gpu_s, 3),
        best_speedup(list(iterations), direction) if base else None,
        round(stale_s, 3),
    )
