"""What an iteration's record (memory/vN.json, engine.records.IterationRecord) holds, read
into typed records for the clients (the TUI, `kopt memory`): one function per part of the
record. Pure and tolerant: a record is data, written by whichever kopt ran the iteration, so
a missing key or a value of the wrong type reads as None, "" or empty, never as an error
(the rules and the reader: engine.records). Where the engine has a type for what a part
holds, the part is read into it (Confirmation, ExternalTruth, AgentRun, Finding, Citation,
ProfilerEvidence); where a record holds less than the engine's type needs (a baseline has no
candidate, an older record no interval), a `Recorded*` type says what it holds.

- `recorded_classes(record)` -> `RecordedClass`es, by class name; `roofline_pct(record)`:
  each class's share of its roofline; `regression_summary(entry)` -> `RegressionSummary`
  (an entry of the counters' recent regressions);
- `recorded_decision(record)` -> `RecordedDecision`; `recorded_review(record)` -> `RecordedReview`;
- `gpu_ref(value)` -> `GpuRef`; `recorded_gpu(record)` -> `GpuEvidence`;
- `recorded_reverify(record)` -> `RecordedReverify`; `recorded_confirmation(record)` ->
  `Confirmation`; `recorded_truth(record)` -> `ExternalTruth`; `recorded_profile(record)` ->
  `ProfilerEvidence` (`profiler_evidence`: the profiler's per-class word beside the bench's,
  which results.md reads the same); `diff_findings(record)` -> `Finding`s;
- `recorded_plan(record)` -> `RecordedPlan` (its `Citation`s);
- `recorded_timings(record)`, `iteration_timings(record["timings"])` -> `IterationTimings`
  (`timing_rows`: its phases in order);
- `agent_runs(record)` -> `LabelledRun`s (the proposal's agent run, then each repair's);
- `changed_files(record)`, `recorded_origin(record)` -> `ProposalOrigin`.

Where a proposal came from (`ProposalOrigin`): an agent through `kopt mcp`, the engineer
through `kopt submit` or the TUI, an agent CLI that kopt ran (the `command` proposer), or the
`tune` search. One rule both ways: `mcp_source` names an MCP client in a submit command's
source (the manual proposer records it as `submitted_by`), and `proposal_origin` reads a
record's `proposal` back. A client's name is the client's claim: it is read as text, cut and
stripped of anything but printable characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.decide.confirmation import ClassCheck, Confirmation
from kopt_supervisor.engine.decide.external_truth import ExternalTruth
from kopt_supervisor.engine.diffscan.findings import Finding
from kopt_supervisor.engine.projections import profile_ns_per_call
from kopt_supervisor.engine.propose.proposer import Citation
from kopt_supervisor.engine.records import AgentRun, from_mapping, mapping, mappings, number, source, text, texts

__all__ = [
    "GpuEvidence",
    "GpuRef",
    "IterationTimings",
    "LabelledRun",
    "RecordedClass",
    "RecordedDecision",
    "RecordedPlan",
    "RecordedReverify",
    "RecordedReview",
    "RegressionSummary",
    "agent_runs",
    "changed_files",
    "diff_findings",
    "gpu_ref",
    "iteration_timings",
    "recorded_classes",
    "recorded_confirmation",
    "recorded_decision",
    "recorded_gpu",
    "recorded_origin",
    "recorded_plan",
    "recorded_profile",
    "recorded_reverify",
    "recorded_review",
    "recorded_timings",
    "recorded_truth",
    "regression_summary",
    "roofline_pct",
    "ProposalOrigin",
    "mcp_source",
    "proposal_origin",
]  # what engine.api exports from here

Via = Literal["mcp", "cli", "tui", "command", "tune", "unknown"]

MCP_PREFIX = "mcp:"
NAME_MAX = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9 ._@+/()\-]")


def clean_name(text: str, limit: int = NAME_MAX) -> str:
    """A client's self-given name as kopt shows it: printable ASCII letters, digits and
    `._@+/()-`, spaces collapsed, at most `limit` characters ("" when nothing is left)."""
    return " ".join(_UNSAFE.sub("", text).split())[:limit].strip()


def mcp_source(client: str | None, version: str | None = None) -> str:
    """The source of a submit sent by `kopt mcp` for this MCP client ("mcp:claude-code 2.1.3";
    "mcp:unnamed client" when the client gave no usable name)."""
    name = clean_name(f"{client or ''} {version or ''}") or "unnamed client"
    return f"{MCP_PREFIX}{name}"


@dataclass(frozen=True)
class ProposalOrigin:
    via: Via
    """"mcp" (an agent through `kopt mcp`), "cli" (`kopt submit`), "tui", "command" (an agent
    CLI kopt ran), "tune" (kopt's own search) or "unknown"."""
    agent: str = ""
    """The agent's name where one is known (the MCP client's, the command proposer's preset)."""

    @property
    def text(self) -> str:
        """One line for a screen: "MCP · claude-code 2.1.3", "kopt submit (CLI)", ..."""
        if self.via == "mcp":
            return f"MCP · {self.agent or 'unnamed client'} (the agent drove; kopt judged)"
        if self.via == "command":
            return (
                f"command · {self.agent} (kopt ran the agent)" if self.agent else "the command proposer (kopt ran it)"
            )
        return {
            "cli": "kopt submit (CLI)",
            "tui": "submitted from the TUI",
            "tune": "tune (kopt's own search)",
            "unknown": "unknown",
        }.get(self.via, "unknown")


def proposal_origin(proposal: Any) -> ProposalOrigin:
    """Where a record's `proposal` (memory/vN.json) came from."""
    if not isinstance(proposal, Mapping):
        return ProposalOrigin("unknown")
    by = proposal.get("submitted_by")
    if isinstance(by, str):
        if by.startswith(MCP_PREFIX):
            return ProposalOrigin("mcp", clean_name(by[len(MCP_PREFIX) :]))
        if by.startswith("cli:"):
            return ProposalOrigin("cli")
        if by.startswith("tui:"):
            return ProposalOrigin("tui")
        return ProposalOrigin("unknown", clean_name(by))
    agent = proposal.get("agent")
    if isinstance(agent, Mapping) or "command" in proposal:
        name = agent.get("agent") if isinstance(agent, Mapping) else None
        name = clean_name(name) if isinstance(name, str) else ""
        return ProposalOrigin("command", "" if name in ("command", "generic") else name)
    if proposal.get("proposer") == "tune":
        return ProposalOrigin("tune")
    return ProposalOrigin("unknown")


Record = Mapping[str, Any]
"""An iteration's record (Iteration.record), or a memory record that holds the same keys."""


# ---------------------------------------------------------------------------------------
# Per class


@dataclass(frozen=True)
class RecordedClass:
    """One class of record["classes"] (decide.estimate.ClassResult.to_dict(), with roofline's
    `pct_of_peak`): every number optional (a baseline has no candidate side)."""

    cls: str
    best: float | None = None
    cand: float | None = None
    ratio: float | None = None
    """Cost ratio candidate/best (below 1: the candidate is better)."""
    lo: float | None = None
    hi: float | None = None
    rounds: int | None = None
    verdict: str = ""
    pct_of_peak: float | None = None


def recorded_classes(record: Record) -> tuple[RecordedClass, ...]:
    """record["classes"] by class name (or a verdict's: Verdict.to_dict() holds them under
    the same key)."""
    classes = sorted(mapping(record.get("classes")).items(), key=lambda kv: str(kv[0]))
    return tuple(from_mapping(RecordedClass, {**mapping(c), "cls": str(name)}) for name, c in classes)


def roofline_pct(record: Record) -> dict[str, float]:
    """Per class its share of the roofline (engine.profile.roofline: record["roofline"]
    ["classes"][cls]["pct_geomean"]); a class without a finite one is left out."""
    out = {}
    for name, c in mapping(mapping(record.get("roofline")).get("classes")).items():
        pct = number(mapping(c).get("pct_geomean"))
        if pct is not None:
            out[str(name)] = pct
    return out


@dataclass(frozen=True)
class RegressionSummary:
    """An entry of projections.Counters.recent_regressions (projections.regression_summary)."""

    version: int
    cls: str = field(default="", metadata=source("class"))
    """The class it regressed ("" when it names none: a global change)."""
    delta_pct: float | None = None
    hypothesis: str = ""


def regression_summary(value: Any) -> RegressionSummary:
    return from_mapping(RegressionSummary, value)


# ---------------------------------------------------------------------------------------
# The decision and its review


@dataclass(frozen=True)
class RecordedDecision:
    """record["decision"]: decide.Verdict.to_dict() as the loop closed it, with who decided
    (`by`). Unlike a Verdict, what an older record lacks stays unknown (None, "")."""

    verdict: str = ""
    reason: str = ""
    by: str = ""
    """"engine", or the engineer's answer ("" when not recorded)."""
    rounds: int | None = None
    gpu_seconds: float | None = None
    flags: tuple[str, ...] = ()
    focus: str = ""
    """The class the reason is about."""


def recorded_decision(record: Record) -> RecordedDecision:
    return from_mapping(RecordedDecision, record.get("decision"))


@dataclass(frozen=True)
class RecordedReview:
    """record["review"]: when the review opened, when the policy decides, and why."""

    opened_at: float | None = None
    deadline: float | None = None
    reason: str = ""


def recorded_review(record: Record) -> RecordedReview:
    return from_mapping(RecordedReview, record.get("review"))


# ---------------------------------------------------------------------------------------
# The GPU


@dataclass(frozen=True)
class GpuRef:
    """Which GPU: its index, UUID and name as the backend reported them, and its host."""

    index: int | None = None
    uuid: str | None = None
    name: str = ""
    host: str = ""
    """"local", a Ray worker's host, or "" when not known."""


def gpu_ref(value: Any) -> GpuRef | None:
    """A GPU record ({"index", "uuid", "name", "host"}: record["gpu"], a lane's lease, a
    review's GPU); None when `value` is not a mapping."""
    return from_mapping(GpuRef, value) if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class GpuEvidence:
    """record["gpu"]: the GPU the iteration was measured on and the rounds its gate flagged."""

    gpu: GpuRef | None = None
    flagged_rounds: tuple[tuple[str, ...], ...] = ()
    """Per flagged round, its flags."""


def recorded_gpu(record: Record) -> GpuEvidence:
    g = record.get("gpu")
    return GpuEvidence(gpu_ref(g), tuple(texts(f.get("flags")) for f in mappings(mapping(g).get("flagged_rounds"))))


# ---------------------------------------------------------------------------------------
# The keep's evidence


@dataclass(frozen=True)
class RecordedReverify:
    """record["reverify"]: the keep decided again in fresh processes (process-level bench)."""

    agrees: bool = field(metadata=source(read=lambda v: v is True))
    verdict: str = ""
    reason: str = ""
    seconds: float | None = None


def recorded_reverify(record: Record) -> RecordedReverify | None:
    """None when the iteration was not decided again."""
    r = mapping(record.get("reverify"))
    return from_mapping(RecordedReverify, r) if r else None


def recorded_confirmation(record: Record) -> Confirmation | None:
    """record["confirmation"] (Confirmation.to_dict()); None when there is none. `path` is
    "" when the record does not say (not "served", the type's default)."""
    c = mapping(record.get("confirmation"))
    if not c:
        return None
    checks = (
        from_mapping(ClassCheck, {**mapping(x), "cls": text(mapping(x).get("cls")) or str(name)})
        for name, x in mapping(c.get("classes")).items()
    )  # by class name; a ratio, lo or hi not recorded: nan
    return replace(from_mapping(Confirmation, c), classes=tuple(checks), path=text(c.get("path")))


def recorded_truth(record: Record) -> ExternalTruth | None:
    """record["external_truth"] (ExternalTruth.to_dict()); None when there is none."""
    t = mapping(record.get("external_truth"))
    return from_mapping(ExternalTruth, t) if t else None


@dataclass(frozen=True)
class ProfiledClass:
    """One class of record["profile"]: the profiler's change per call and whether it agrees
    with the bench's verdict (engine/profile/classes.py ClassChange and ClassAgreement)."""

    cls: str
    best_ns: float | None
    """GPU time of one call of each of the class's configs (summed), best."""
    cand_ns: float | None
    ratio: float | None
    lo: float | None
    hi: float | None
    appeared: tuple[str, ...] = ()
    disappeared: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    agreement: str = ""
    """agrees | disagrees | cannot_tell | not_judged; "" when no agreement was recorded."""
    agreement_reason: str = ""
    bench_verdict: str = ""
    bench_ratio: float | None = None
    bench_lo: float | None = None
    bench_hi: float | None = None


@dataclass(frozen=True)
class ProfilerEvidence:
    classes: tuple[ProfiledClass, ...] = ()
    per_class: bool = True
    """False: no NVTX ranges; one entry for the whole run (`note` says so)."""
    note: str = ""
    problems: tuple[str, ...] = ()
    """Problems that hold for every class (ranges on one side only, work outside the ranges)."""
    outside_best_ns: float | None = None
    outside_cand_ns: float | None = None
    """GPU time outside every config's range, per profile (None: none recorded)."""
    outside_grew: bool = False
    noise: str = ""
    confidence: float | None = None
    error: str = ""
    """The profiler's run failed (then nothing else is set)."""


def profiler_evidence(profile: Any) -> ProfilerEvidence | None:
    """record["profile"] as per-class evidence: its `comparison` (ClassComparison.to_dict())
    beside its `agreement` (Agreement.to_dict()); a record of an older kopt (one whole-run
    `comparison` with best_per_call_ns) becomes one entry for all classes. None when the
    iteration was not profiled as best vs candidate."""
    if not isinstance(profile, Mapping):
        return None
    if profile.get("error"):
        return ProfilerEvidence(error=fmt.one_line(profile["error"], 600))
    cmp = profile.get("comparison")
    if not isinstance(cmp, Mapping):  # both sides profiled, never compared (an older kopt): their target kernels
        cmp = {
            "best_per_call_ns": profile_ns_per_call(mapping(profile.get("best"))),
            "cand_per_call_ns": profile_ns_per_call(mapping(profile.get("cand"))),
        }
    agreement = mapping(profile.get("agreement"))
    judged = {str(a.get("cls")): a for a in agreement.get("classes") or () if isinstance(a, Mapping)}
    if not isinstance(cmp.get("classes"), list | tuple):  # a whole-run comparison of an older kopt
        best, cand = number(cmp.get("best_per_call_ns")), number(cmp.get("cand_per_call_ns"))
        if best is None or cand is None:
            return None
        ratio = cand / best if best and cand is not None else None
        return ProfilerEvidence(
            (ProfiledClass("(all classes)", best, cand, ratio, None, None),),
            per_class=False,
            note="the whole run's target kernels, not per class (recorded by an older kopt)",
        )
    classes = []
    for c in cmp["classes"]:
        if not isinstance(c, Mapping):
            continue
        a = judged.get(str(c.get("cls")), {})
        classes.append(
            ProfiledClass(
                str(c.get("cls")),
                number(c.get("best_ns")),
                number(c.get("cand_ns")),
                number(c.get("ratio")),
                number(c.get("lo")),
                number(c.get("hi")),
                _names(c.get("appeared")),
                _names(c.get("disappeared")),
                _names(c.get("problems")),
                str(a.get("status") or ""),
                str(a.get("reason") or ""),
                str(a.get("bench_verdict") or ""),
                number(a.get("bench_ratio")),
                number(a.get("bench_lo")),
                number(a.get("bench_hi")),
            )
        )
    outside = mapping(cmp.get("unattributed"))
    return ProfilerEvidence(
        tuple(classes),
        bool(cmp.get("per_class", True)),
        str(cmp.get("note") or ""),
        _names(cmp.get("problems")),
        number(outside.get("best_ns")),
        number(outside.get("cand_ns")),
        bool(outside.get("grew")),
        str(cmp.get("noise") or ""),
        number(cmp.get("confidence")),
    )


def _names(v: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in v) if isinstance(v, list | tuple) else ()


def recorded_profile(record: Record) -> ProfilerEvidence | None:
    """record["profile"] as per-class evidence (`profiler_evidence`)."""
    return profiler_evidence(record.get("profile"))


def diff_findings(record: Record) -> tuple[Finding, ...]:
    """record["diff_scan"]["findings"]: what the diff scan quoted (line 0: the file as a whole)."""
    return tuple(from_mapping(Finding, f) for f in mappings(mapping(record.get("diff_scan")).get("findings")))


# ---------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class RecordedPlan:
    """record["plan"] (propose.proposer.PlanAssessment.to_dict()): the plan read against the
    context pack."""

    hypothesis: str = ""
    citations: tuple[Citation, ...] = ()
    flags: tuple[str, ...] = ()
    reason: str = ""


def recorded_plan(record: Record) -> RecordedPlan | None:
    """None when the plan was never read against a pack (a failed proposal, an older kopt)."""
    p = mapping(record.get("plan"))
    return from_mapping(RecordedPlan, p) if p else None


# ---------------------------------------------------------------------------------------
# Where the time went


TIMED_PHASES = (
    "gate_wait_s",
    "proposer_s",
    "police_s",
    "reload_s",
    "looks_s",
    "profiler_s",
    "reverify_s",
    "review_s",
    "format_s",
    "commit_s",
)
"""record["timings"]'s phases in the order an iteration passes them (engine/loop/context.py
TIMED_KEYS, and `looks_s`: one entry per look); then `total_s` and `engine_s`. A phase the
record does not hold is left out (`review_s`, the wait for the engineer, is shown when the
loop records it)."""


PHASE_NOTES = {
    "reverify_s": "the keep's confirmation in fresh processes; its looks and gate waits also count in theirs"
}
"""What a phase's seconds hold beyond their name."""


def timing_rows(timings: Mapping[str, Any]) -> list[tuple[str, float, str]]:
    """(phase, seconds, note) for every phase a record["timings"] holds, in the order an
    iteration passes them, then total and kopt's own share; looks are summed (the note says
    how many and the slowest). Values that are not numbers are left out."""
    rows: list[tuple[str, float, str]] = []
    for key in TIMED_PHASES:
        value = timings.get(key)
        if key == "looks_s":
            looks = [float(x) for x in value if fmt.is_num(x)] if isinstance(value, list) else []
            if looks:
                rows.append(
                    (
                        "looks",
                        sum(looks),
                        f"{len(looks)} look{'s' if len(looks) != 1 else ''}, slowest {fmt.seconds(max(looks), 2)}",
                    )
                )
        elif (v := number(value)) is not None:
            rows.append((key.removesuffix("_s").replace("_", " "), v, PHASE_NOTES.get(key, "")))
    for key, label, note in (
        ("total_s", "total", ""),
        ("engine_s", "kopt itself", "all but gate wait, proposer, looks, profiler"),
    ):
        if (v := number(timings.get(key))) is not None:
            rows.append((label, v, note))
    return rows


@dataclass(frozen=True)
class IterationTimings:
    total_s: float | None = None
    engine_s: float | None = None
    """What kopt itself spent."""
    rows: tuple[tuple[str, float, str], ...] = field(
        default=(), metadata=source((), read=lambda t: tuple(timing_rows(mapping(t))))
    )
    """`timing_rows` of the whole record: (phase, seconds, note)."""


def recorded_timings(record: Record) -> IterationTimings:
    return iteration_timings(record.get("timings"))


def iteration_timings(value: Any) -> IterationTimings:
    """A record's `timings` (or `phase_timings`'s `last`: the newest finished iteration's)."""
    return from_mapping(IterationTimings, value)


# ---------------------------------------------------------------------------------------
# The proposal and what the agent cost


@dataclass(frozen=True)
class LabelledRun:
    label: str
    """"proposal" or "repair N"."""
    run: AgentRun


def agent_runs(record: Record) -> tuple[LabelledRun, ...]:
    """Every agent run of the iteration: its proposal's, then each repair's (numbered from 1
    among all repairs, whether an agent ran for it or not)."""
    repairs = record.get("repairs")
    runs = [("proposal", record.get("proposal"))]
    runs += [(f"repair {i}", r) for i, r in enumerate(repairs if isinstance(repairs, list | tuple) else (), 1)]
    out = []
    for label, details in runs:
        a = mapping(mapping(details).get("agent"))
        if a:
            out.append(LabelledRun(label, agent_run(a)))
    return tuple(out)


def agent_run(value: Any) -> AgentRun:
    """An AgentRun.to_dict() read back: numbers that are not finite and non-boolean are None;
    a token or byte count may be a float (read as its int), a flag is set only by true."""
    a = mapping(value)

    def count(key: str) -> int | None:
        v = number(a.get(key))
        return None if v is None else int(v)

    return replace(
        from_mapping(AgentRun, a),
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_read_tokens=count("cache_read_tokens"),
        cache_write_tokens=count("cache_write_tokens"),
        reasoning_tokens=count("reasoning_tokens"),
        transcript_bytes=count("transcript_bytes"),
        resumed=a.get("resumed") is True,
        transcript_cut=a.get("transcript_cut") is True,
    )


def changed_files(record: Record) -> tuple[str, ...]:
    return texts(record.get("changed_files"))


def recorded_origin(record: Record) -> ProposalOrigin:
    """Where the record's proposal came from (proposal_origin)."""
    return proposal_origin(record.get("proposal"))
