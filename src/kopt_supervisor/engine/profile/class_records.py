"""What the per-class profile comparison holds: per config, per kernel and per class the
change from best to candidate with its interval, the GPU time no config can claim, and how
all of it prints (the summary line and the markdown table the report and the prompt show).
engine/profile/classes.py fills these; engine/profile/agreement.py judges them against the
bench. Pure: data and text only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

ALL_CLASSES = "(all classes)"
"""The one entry of a comparison without ranges: the whole run stands for every class."""


@dataclass(frozen=True)
class ConfigChange:
    """One config's GPU time inside its ranges, over the whole profile (mean over profiles)."""

    config: str
    best_ns: float
    cand_ns: float
    ratio: float
    best_calls: int
    cand_calls: int
    calls_basis: str
    """"range openings" (counted by the tool) or "least-launched kernel in best's ranges"
    (ncu cannot count openings: both sides use best's count, the bench runs the same calls)."""


@dataclass(frozen=True)
class ClassKernel:
    """One kernel name inside a class's ranges: time per call summed over the class's configs."""

    name: str
    best_ns: float
    cand_ns: float
    best_launches: int
    cand_launches: int
    matches_regex: bool = False


@dataclass(frozen=True)
class ClassChange:
    cls: str
    best_ns: float | None
    """GPU time of one call of each of the class's configs (summed), best."""
    cand_ns: float | None
    ratio: float | None
    """Geometric mean over the class's configs of candidate/best time; below 1: faster."""
    lo: float | None
    hi: float | None
    """The ratio's interval at the comparison's confidence (None: no ratio)."""
    configs: tuple[ConfigChange, ...] = ()
    kernels: tuple[ClassKernel, ...] = ()
    appeared: tuple[str, ...] = ()
    """Kernels in the candidate's ranges of this class and not in best's."""
    disappeared: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    """What makes a gain of this class unconfirmable (a config missing on one side, range
    openings that differ)."""

    @property
    def delta_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    @property
    def hottest(self) -> str:
        ranked = sorted(self.kernels, key=lambda k: (-max(k.best_ns, k.cand_ns), k.name))
        return ranked[0].name if ranked else ""


@dataclass(frozen=True)
class UnattributedGroup:
    side: str
    """"best" or "cand"."""
    kernel: str
    calls: int
    total_ns: float
    """Per profile (mean over the side's profiles)."""
    why: str


@dataclass(frozen=True)
class Unattributed:
    """GPU time no config can claim: outside every kopt range, or in a range that names no
    single config."""

    best_ns: float
    cand_ns: float
    grew: bool
    """The candidate's unattributed time exceeds best's beyond noise."""
    groups: tuple[UnattributedGroup, ...] = ()


@dataclass(frozen=True)
class ClassComparison:
    per_class: bool
    """False: the fallback (no ranges), one entry ALL_CLASSES for the whole run."""
    classes: tuple[ClassChange, ...]
    unattributed: Unattributed
    confidence: float
    noise: str
    """How the intervals were made (launch spread, run-to-run term)."""
    note: str = ""
    """NO_RANGES_NOTE (and why) in the fallback; "" otherwise."""
    problems: tuple[str, ...] = ()
    """Problems that hold for every class (ranges on one side only, unattributed growth)."""
    profiles: tuple[int, int] = (1, 1)
    kernel_regex: str = ""

    def by_class(self) -> dict[str, ClassChange]:
        return {c.cls: c for c in self.classes}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassComparison:
        u = data["unattributed"]
        return cls(
            per_class=bool(data["per_class"]),
            classes=tuple(
                ClassChange(
                    **{k: _tuple(v) for k, v in c.items() if k not in ("configs", "kernels")},
                    configs=tuple(ConfigChange(**x) for x in c.get("configs", ())),
                    kernels=tuple(ClassKernel(**x) for x in c.get("kernels", ())),
                )
                for c in data["classes"]
            ),
            unattributed=Unattributed(
                u["best_ns"],
                u["cand_ns"],
                u["grew"],
                tuple(UnattributedGroup(**g) for g in u.get("groups", ())),
            ),
            confidence=float(data["confidence"]),
            noise=str(data["noise"]),
            note=str(data.get("note", "")),
            problems=tuple(data.get("problems", ())),
            profiles=(int(data.get("profiles", (1, 1))[0]), int(data.get("profiles", (1, 1))[1])),
            kernel_regex=str(data.get("kernel_regex", "")),
        )

    def summary_line(self) -> str:
        parts = [f"{c.cls} {pct_text(c.ratio)} {interval_text(c.lo, c.hi)}" for c in self.classes]
        head = "; ".join(parts) or "no class profiled"
        tail = [self.note] if self.note else []
        if self.unattributed.cand_ns or self.unattributed.best_ns:
            tail.append(
                f"outside ranges {self.unattributed.best_ns / 1e3:.1f} -> {self.unattributed.cand_ns / 1e3:.1f} us"
            )
        return head + ("" if not tail else f" ({'; '.join(tail)})")

    def table(self) -> str:
        """Markdown: per class the change with its interval, then the kernels of each class."""
        conf = f"{self.confidence:.0%}"
        rows = [
            f"| class | best us/call | cand us/call | change | {conf} interval | kernels appeared | disappeared |",
            "|---|---:|---:|---:|---|---|---|",
        ]
        for c in self.classes:
            rows.append(
                f"| {c.cls} | {_us(c.best_ns)} | {_us(c.cand_ns)} | {pct_text(c.ratio)} | {interval_text(c.lo, c.hi)} "
                f"| {', '.join(c.appeared) or '-'} | {', '.join(c.disappeared) or '-'} |"
            )
        out = rows + [""]
        for c in self.classes:
            if not c.kernels:
                continue
            out += [
                f"{c.cls}:",
                "",
                "| kernel | best us/call | cand us/call | launches best/cand |",
                "|---|---:|---:|---:|",
            ]
            for k in sorted(c.kernels, key=lambda k: (-max(k.best_ns, k.cand_ns), k.name)):
                mark = " (regex)" if k.matches_regex else ""
                out.append(
                    f"| {k.name}{mark} | {_us(k.best_ns)} | {_us(k.cand_ns)} | {k.best_launches}/{k.cand_launches} |"
                )
            out.append("")
        u = self.unattributed
        if u.groups:
            out += [
                f"Outside config ranges: {_us(u.best_ns)} -> {_us(u.cand_ns)} us per profile"
                f"{' (grew beyond noise)' if u.grew else ''}:",
                "",
            ]
            out += [f"- {g.side}: {g.kernel} x{g.calls}, {_us(g.total_ns)} us ({g.why})" for g in u.groups]
            out.append("")
        out += [f"- {p}" for p in self.problems]
        if self.note:
            out.append(f"Note: {self.note}.")
        out.append(f"Noise: {self.noise}.")
        return "\n".join(out)


def _tuple(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:.3f}"


def pct_text(ratio: float | None) -> str:
    """A ratio as a signed percent change, +1.00%; "-" for none."""
    return "-" if ratio is None else f"{(ratio - 1.0) * 100.0:+.2f}%"


def interval_text(lo: float | None, hi: float | None) -> str:
    """A ratio interval as percent changes, [-5.00%, -2.40%]; "[-]" for none."""
    if lo is None or hi is None:
        return "[-]"
    return f"[{(lo - 1) * 100:+.2f}%, {(hi - 1) * 100:+.2f}%]"
