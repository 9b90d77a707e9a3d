"""Whether the profiler agrees with the bench, class by class: the bench's verdict (improved,
regressed, tied) against the profiler's interval for the same class (docs/design.md §5 step 5,
§12 layer 3). A class that disagrees sends the candidate to review with both numbers
(`Agreement.reason`). Pure.

    agreement = agrees(verdict.classes, cmp, min_effect_pct=policy.min_effect_pct)
    if agreement.disagrees: ...  # review, with agreement.reason()
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from kopt_supervisor.engine.profile.class_records import (
    ALL_CLASSES,
    ClassComparison,
    interval_text,
    pct_text,
)


class BenchClass(Protocol):
    """What `agrees` reads of the bench's per-class result (decide.ClassResult has it)."""

    @property
    def cls(self) -> str: ...
    @property
    def verdict(self) -> str: ...
    @property
    def ratio(self) -> float: ...
    @property
    def lo(self) -> float: ...
    @property
    def hi(self) -> float: ...


AGREES, DISAGREES, CANNOT_TELL, NOT_JUDGED = "agrees", "disagrees", "cannot_tell", "not_judged"


@dataclass(frozen=True)
class ClassAgreement:
    cls: str
    status: str
    """agrees | disagrees | cannot_tell | not_judged (the bench reached no verdict on it)."""
    bench_verdict: str
    bench_ratio: float | None
    bench_lo: float | None
    bench_hi: float | None
    profiler_ratio: float | None
    profiler_lo: float | None
    profiler_hi: float | None
    reason: str

    def numbers(self) -> str:
        """'bench -3.70% [-5.00%, -2.40%], profiler +1.00% [+0.60%, +1.40%]'"""
        return (
            f"bench {pct_text(self.bench_ratio)} {interval_text(self.bench_lo, self.bench_hi)}, "
            f"profiler {pct_text(self.profiler_ratio)} {interval_text(self.profiler_lo, self.profiler_hi)}"
        )


@dataclass(frozen=True)
class Agreement:
    classes: tuple[ClassAgreement, ...]
    per_class: bool
    note: str = ""
    problems: tuple[str, ...] = ()

    @property
    def disagrees(self) -> bool:
        """True when the candidate must go to review: some class disagrees."""
        return any(c.status == DISAGREES for c in self.classes)

    def reason(self) -> str:
        """One line for the verdict: each disagreeing class with both numbers and why."""
        parts = [f"{c.cls}: {c.numbers()} ({c.reason})" for c in self.classes if c.status == DISAGREES]
        text = "profiler disagrees on " + "; ".join(parts) if parts else "profiler agrees"
        return text + (f" [{self.note}]" if self.note else "")

    def summary_line(self) -> str:
        parts = [
            f"{c.cls} {c.status.replace('_', ' ')} ({pct_text(c.profiler_ratio)})"
            for c in self.classes
            if c.status != NOT_JUDGED
        ]
        return "; ".join(parts) + (f" [{self.note}]" if self.note else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Agreement:
        known = {f.name for f in fields(ClassAgreement)}
        return cls(
            classes=tuple(ClassAgreement(**{k: v for k, v in c.items() if k in known}) for c in data["classes"]),
            per_class=bool(data["per_class"]),
            note=str(data.get("note", "")),
            problems=tuple(data.get("problems", ())),
        )


def agrees(
    bench_classes: Iterable[BenchClass], comparison: ClassComparison, *, min_effect_pct: float = 1.0
) -> Agreement:
    """Per class: does the profiler's change agree with the bench's verdict?

    With e = min_effect_pct, the profiler's interval [lo, hi] for the class's ratio and the
    bench's [b_lo, b_hi]:
    - bench improved: agrees when hi < 1 (the profiler sees a gain); disagrees when lo > 1
      (it sees a loss), lo > 1/(1+e) (it rules out the gain of e the bench claims), or
      lo > b_hi (its interval lies wholly above the bench's: it rules out the gain the bench
      measured, whether it straddles 1 or sees a smaller gain of its own: a lying timer);
    - bench regressed: the mirror image (agrees when lo > 1; disagrees when hi < 1, hi < 1+e
      or hi < b_lo);
    - bench tied: agrees when [lo, hi] lies within [1/(1+e), 1+e]; disagrees when lo > 1+e
      (the profiler sees a loss beyond e the bench missed);
    - otherwise, or with too wide an interval: cannot_tell; no bench verdict: not_judged.
    Only intervals decide, so another class's noise never makes a class disagree. A class
    with problems (a config missing on one side, range openings that differ) and every
    class when a problem holds for all (ranges on one side only, work outside the ranges
    grown beyond noise) cannot be confirmed: an improved class then disagrees, others
    cannot tell. In the fallback (no ranges) the whole-run change stands for every class,
    and it cannot refute a class when the bench's classes did not all move alike."""
    bench = list(bench_classes)
    e = min_effect_pct / 100.0
    up, down = 1.0 + e, 1.0 / (1.0 + e)
    changes = comparison.by_class()
    uniform = len({b.verdict for b in bench}) <= 1
    out = []
    for b in sorted(bench, key=lambda x: x.cls):
        ch = changes.get(ALL_CLASSES) if not comparison.per_class else changes.get(b.cls)
        ratio, lo, hi = (ch.ratio, ch.lo, ch.hi) if ch is not None else (None, None, None)
        problems = list(comparison.problems) + (list(ch.problems) if ch is not None else [])
        status, reason = _judge(b.verdict, lo, hi, up, down, e, bench=(_finite(b.lo), _finite(b.hi)))
        if ch is None:
            status, reason = (
                NOT_JUDGED if b.verdict not in _JUDGED else CANNOT_TELL,
                "not profiled: no kernel in its configs' ranges on either side",
            )
        elif problems and status != NOT_JUDGED:
            status = DISAGREES if b.verdict == "improved" else CANNOT_TELL
            reason = "; ".join(problems)
        elif not comparison.per_class and status == DISAGREES and not uniform:
            status, reason = CANNOT_TELL, f"{reason}, but the whole run cannot judge one class"
        out.append(
            ClassAgreement(
                b.cls, status, b.verdict, _finite(b.ratio), _finite(b.lo), _finite(b.hi), ratio, lo, hi, reason
            )
        )
    return Agreement(tuple(out), comparison.per_class, comparison.note, comparison.problems)


_JUDGED = ("improved", "regressed", "tied")


def _judge(
    verdict: str,
    lo: float | None,
    hi: float | None,
    up: float,
    down: float,
    e: float,
    *,
    bench: tuple[float | None, float | None] = (None, None),
) -> tuple[str, str]:
    """One class's agreement (see `agrees`); bench: the bench's interval (None: not finite)."""
    if verdict not in _JUDGED:
        return NOT_JUDGED, f"the bench's verdict is {verdict!r}"
    if lo is None or hi is None:
        return CANNOT_TELL, "the profiler has no interval"
    effect = f"{e * 100:g}%"
    b_lo, b_hi = bench
    above = b_hi is not None and lo > b_hi
    below = b_lo is not None and hi < b_lo
    smaller_gain = "the profiler's interval lies above the bench's: it rules out the gain the bench measured"
    smaller_loss = "the profiler's interval lies below the bench's: it rules out the loss the bench measured"
    if verdict == "improved":
        if hi < 1.0:
            return (DISAGREES, smaller_gain) if above else (AGREES, "the profiler sees a gain")
        if lo > 1.0:
            return DISAGREES, "the profiler sees a loss"
        if lo > down:
            return DISAGREES, f"the profiler rules out a gain of {effect}"
        if above:
            return DISAGREES, smaller_gain
        return CANNOT_TELL, "the profiler's interval is too wide to tell"
    if verdict == "regressed":
        if lo > 1.0:
            return (DISAGREES, smaller_loss) if below else (AGREES, "the profiler sees a loss")
        if hi < 1.0:
            return DISAGREES, "the profiler sees a gain"
        if hi < up:
            return DISAGREES, f"the profiler rules out a loss of {effect}"
        if below:
            return DISAGREES, smaller_loss
        return CANNOT_TELL, "the profiler's interval is too wide to tell"
    if lo > up:
        return DISAGREES, f"the profiler sees a loss beyond {effect}"
    if down <= lo and hi <= up:
        return AGREES, f"the profiler sees no change beyond {effect}"
    if hi < down:
        return CANNOT_TELL, f"the profiler sees a gain beyond {effect} the bench does not"
    return CANNOT_TELL, "the profiler's interval is too wide to tell"


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
