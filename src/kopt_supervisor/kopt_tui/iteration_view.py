"""What the iteration detail screen shows beyond the per-class numbers (pure: no Textual, no
I/O): the decision's flags explained and its evidence (the keep decided again in fresh
processes, the profiler per class beside the bench, the diff scan's quoted lines), the plan
beside the evidence it cites, where the iteration's time went (record["timings"]), what each
agent run cost, and an agent's transcript made readable.

Everything here reads a record the engine wrote through engine.api's typed views of it
(engine.api.iteration_record: a value of the wrong type reads as None or empty), and text
from an agent (a transcript) is shown as text: no markup, no terminal control characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import Iteration, fmt
from kopt_supervisor.kopt_tui.flags import FLAG_HELP, PLAN_FLAG_HELP, flags_to_explain


def _text(v: str, limit: int = 300) -> str:
    return fmt.one_line(clean(v), limit)


# ---------------------------------------------------------------------------------------
# Where the proposal came from


def proposal_origin(it: Iteration) -> str:
    """Who proposed the candidate, and how: an agent through `kopt mcp` (with the client's
    name), `kopt submit`, the TUI, an agent CLI kopt ran (`command`), or tune."""
    return api.recorded_origin(it.record).text if it.version else "baseline"


# ---------------------------------------------------------------------------------------
# The decision's evidence


@dataclass(frozen=True)
class Note:
    label: str
    text: str
    tone: str = ""
    """"bad" (the engineer should look), "good", or "" (information)."""


def decision_notes(it: Iteration) -> tuple[Note, ...]:
    """Under the decision: each flag with what it means (those the reason does not already
    name), the keep decided again in fresh processes, the profiler per class beside the
    bench, and the diff scan's findings, quoted."""
    dec = api.recorded_decision(it.record)
    notes = [
        Note(f, FLAG_HELP.get(f, "(a flag this version of kopt does not know)"), "bad")
        for f in flags_to_explain(dec.reason, dec.flags)
    ]
    notes += reverify_notes(it)
    notes += confirmation_notes(it)
    notes += profiler_notes(it)
    notes += diff_scan_notes(it)
    return tuple(notes)


def reverify_notes(it: Iteration) -> list[Note]:
    r = api.recorded_reverify(it.record)
    if r is None:
        return []
    took = f" ({fmt.seconds(r.seconds)})" if r.seconds is not None else ""
    head = "agrees" if r.agrees else "DISAGREES"
    return [
        Note(
            "fresh processes",
            f"{head}: {_text(r.verdict, 40)}: {_text(r.reason, 300)}{took}",
            "good" if r.agrees else "bad",
        )
    ]


def confirmation_notes(it: Iteration) -> list[Note]:
    """How a keep was confirmed in freshly started servers, and what outside the candidate's
    process confirmed it (the profiler, the OS's accounting, or the bench's timer alone)."""
    notes = []
    conf = api.recorded_confirmation(it.record)
    if conf is not None and conf.path in ("served", "profiler"):
        good = conf.outcome == "confirmed"
        how = "by its profile pair" if conf.path == "profiler" else f"in {conf.looks} fresh look(s)"
        notes.append(
            Note(
                "confirmation",
                f"{conf.outcome} {how}, {fmt.seconds(conf.seconds)}: {_text(conf.reason, 300)}",
                "good" if good else "bad",
            )
        )
    truth = api.recorded_truth(it.record)
    if truth is not None:
        tone = {"confirmed": "good", "refuted": "bad"}.get(truth.outcome, "")
        notes.append(Note(f"truth: {truth.kind.replace('_', ' ')}", _text(truth.reason, 300), tone))
    return notes


def profiler_notes(it: Iteration) -> list[Note]:
    ev = api.recorded_profile(it.record)
    if ev is None:
        return []
    if ev.error:
        return [Note("profiler", f"failed: {ev.error}", "bad")]
    notes = []
    for c in ev.classes:
        change = (
            f"{fmt.num(c.best_ns)} → {fmt.num(c.cand_ns)} ns/call {fmt.ratio_pct(c.ratio)} {fmt.interval(c.lo, c.hi)}"
        )
        if c.agreement:
            bench = f"bench {fmt.ratio_pct(c.bench_ratio)} {fmt.interval(c.bench_lo, c.bench_hi)}"
            change += f"; {bench}: {c.agreement.replace('_', ' ')}" + (
                f" ({_text(c.agreement_reason, 200)})" if c.agreement_reason else ""
            )
        moved = [f"+{k}" for k in c.appeared] + [f"-{k}" for k in c.disappeared]
        if moved:
            change += "; kernels " + ", ".join(_text(k, 60) for k in moved[:6]) + (" …" if len(moved) > 6 else "")
        tone = "bad" if c.agreement == "disagrees" or c.problems else "good" if c.agreement == "agrees" else ""
        notes.append(Note(f"profiler {c.cls}", change, tone))
        notes += [Note("", _text(p, 300), "bad") for p in c.problems]
    if ev.outside_grew or ev.outside_cand_ns:
        notes.append(
            Note(
                "outside ranges",
                f"{fmt.num(ev.outside_best_ns)} → {fmt.num(ev.outside_cand_ns)} ns per "
                "profile" + (": grew beyond noise, a gain cannot be confirmed" if ev.outside_grew else ""),
                "bad" if ev.outside_grew else "",
            )
        )
    notes += [Note("", _text(p, 300), "bad") for p in ev.problems]
    if ev.note:
        notes.append(Note("", _text(ev.note, 300)))
    return notes


def diff_scan_notes(it: Iteration) -> list[Note]:
    findings = api.diff_findings(it.record)
    out = []
    for f in findings[:20]:
        where = f"{_text(f.path, 120)}:{f.line}" if f.line else _text(f.path, 120)
        out.append(Note(f"diff {_text(f.rule, 40)}", f"{where}  {_text(f.text, 160)}", "bad"))
    if len(findings) > 20:
        out.append(Note("", f"(+{len(findings) - 20} more findings)", "bad"))
    return out


# ---------------------------------------------------------------------------------------
# The plan beside its evidence


@dataclass(frozen=True)
class Citation:
    kind: str
    term: str
    evidence: str


@dataclass(frozen=True)
class PlanView:
    hypothesis: str
    target: str
    citations: tuple[Citation, ...] = ()
    flags: tuple[tuple[str, str], ...] = ()
    """(flag, what it means): "uncited" when the plan points at no evidence of the pack."""
    reason: str = ""
    assessed: bool = True
    """False: the plan was never read against a context pack (a failed proposal, an older kopt)."""


def plan_view(it: Iteration) -> PlanView:
    p = api.recorded_plan(it.record)
    target = it.target_class or ("all classes (global)" if it.status != "baseline" else "")
    if p is None:
        return PlanView(_text(it.hypothesis), target, assessed=False)
    cites = tuple(Citation(_text(c.kind, 20), _text(c.term, 120), _text(c.evidence, 400)) for c in p.citations)
    flags = tuple((f, PLAN_FLAG_HELP.get(f, "")) for f in p.flags)
    return PlanView(_text(p.hypothesis or it.hypothesis), target, cites, flags, _text(p.reason, 300))


# ---------------------------------------------------------------------------------------
# Where the time went, what the agent cost


@dataclass(frozen=True)
class TimingRow:
    phase: str
    seconds: float
    share: float | None
    """Percent of the iteration's total (None: no total, or the row is the total)."""
    note: str = ""


def timing_rows(it: Iteration) -> tuple[TimingRow, ...]:
    timings = api.recorded_timings(it.record)
    whole = timings.total_s if timings.total_s is not None and timings.total_s > 0 else None
    rows = []
    for phase, seconds, note in timings.rows:
        share = seconds / whole * 100 if whole is not None and phase != "total" else None
        rows.append(TimingRow(phase, seconds, share, note))
    return tuple(rows)


@dataclass(frozen=True)
class AgentRow:
    label: str
    """"proposal" or "repair N"."""
    agent: str
    model: str
    cost: str
    tokens: str
    wall: str
    session: str
    exit: str
    transcript: str
    """The transcript's path relative to the workspace ("" when none was kept)."""
    transcript_size: str
    transcript_cut: bool
    notes: tuple[str, ...]


def agent_rows(it: Iteration) -> tuple[AgentRow, ...]:
    """One row per agent run of the iteration: its proposal, then each repair."""
    out = []
    for labelled in api.agent_runs(it.record):
        a = labelled.run
        tin, tout, cached = a.input_tokens, a.output_tokens, a.cache_read_tokens
        tokens = (
            (
                f"{fmt.count(tin)} in"
                + (f" ({fmt.count(cached)} cached)" if cached else "")
                + f" · {fmt.count(tout)} out"
            )
            if tin is not None or tout is not None
            else "not reported"
        )
        session = (_text(a.session_id, 80) + (" (resumed)" if a.resumed else "")) if a.session_id is not None else ""
        out.append(
            AgentRow(
                labelled.label,
                _text(a.agent or "command", 40),
                _text(a.model or "", 60),
                fmt.usd(a.cost_usd) if a.cost_usd is not None else "not reported",
                tokens,
                fmt.seconds(a.wall_s),
                session,
                str(a.exit) if a.exit is not None else fmt.DASH,
                a.transcript_path,
                fmt.size(a.transcript_bytes) if a.transcript_bytes is not None else "",
                a.transcript_cut,
                tuple(_text(n, 200) for n in a.notes),
            )
        )
    return tuple(out)


# ---------------------------------------------------------------------------------------
# Transcripts

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
LINE_MAX = 2000
"""A transcript line is cut at this many characters (a tool echoing megabytes on one line)."""


def clean(text: str) -> str:
    """Agent text made safe to show: control characters (escape sequences, carriage
    returns, bidirectional overrides) become visible `␛`-style marks, tabs become spaces."""
    return _CONTROL.sub(lambda m: "␛" if m.group() == "\x1b" else "�", text.replace("\t", "    "))


def transcript_lines(text: str, *, raw: bool = False) -> list[str]:
    """An agent's transcript as lines to read. JSON lines (the stream the CLIs print) become
    one line per event: its type and what it says (message text, tool calls with their
    input, results, errors); other lines stay as they are. `raw`: every line as written.
    Control characters are neutralised either way (see `clean`)."""
    out: list[str] = []
    for line in text.splitlines():
        shown = line if raw else _readable(line)
        if shown is None:
            continue
        shown = clean(shown)
        out.append(shown if len(shown) <= LINE_MAX else shown[: LINE_MAX - 1] + "…")
    return out


_SKIP_KEYS = {
    "session_id",
    "sessionID",
    "uuid",
    "id",
    "parent_tool_use_id",
    "timestamp",
    "usage",
    "modelUsage",
    "tools",
    "cwd",
    "permissionMode",
    "signature",
    "service_tier",
}


def _readable(line: str) -> str | None:
    s = line.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return line
    try:
        obj = json.loads(s)
    except ValueError:
        return line
    if not isinstance(obj, dict):
        return line
    kind = ".".join(str(obj[k]) for k in ("type", "subtype") if isinstance(obj.get(k), str)) or "event"
    said = _said(obj)
    return f"[{kind}] {said}" if said else f"[{kind}]"


def _said(value: Any, depth: int = 0) -> str:
    """The text of an event: strings under text-like keys, tool calls as name(input),
    depth-first, joined by " · "."""
    if depth > 6:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " · ".join(p for p in (_said(v, depth + 1) for v in value) if p)
    if not isinstance(value, dict):
        return ""
    if value.get("type") in ("tool_use", "function_call", "tool_call") or ("name" in value and "input" in value):
        args = value.get("input", value.get("arguments", value.get("args")))
        shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)[:400] if args else ""
        return f"{value.get('name', 'tool')}({shown})"
    parts = []
    for key, v in value.items():
        if key in _SKIP_KEYS or key in ("type", "subtype", "role", "model"):
            continue
        if isinstance(v, str) and key not in (
            "text",
            "content",
            "result",
            "message",
            "error",
            "command",
            "output",
            "delta",
            "thinking",
            "reasoning",
            "summary",
            "status",
            "description",
        ):
            continue
        part = _said(v, depth + 1)
        if part:
            parts.append(part)
    return " · ".join(parts)
