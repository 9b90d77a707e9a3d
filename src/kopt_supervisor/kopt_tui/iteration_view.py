"""What the iteration detail screen shows beyond the per-class numbers (pure: no Textual, no
I/O): the decision's flags explained and its evidence (the keep decided again in fresh
processes, the profiler per class beside the bench, the diff scan's quoted lines), the plan
beside the evidence it cites, where the iteration's time went (record["timings"]), what each
agent run cost, and an agent's transcript made readable.

Everything here reads a record the engine wrote; a record is data, so every value is
checked for its type, and text from an agent (a transcript) is shown as text: no markup,
no terminal control characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import Iteration, fmt
from kopt_supervisor.kopt_tui.flags import FLAG_HELP, PLAN_FLAG_HELP, flags_to_explain


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _positive(v: Any) -> float | None:
    return float(v) if fmt.is_num(v) and v > 0 else None


def _text(v: Any, limit: int = 300) -> str:
    return fmt.one_line(clean(str(v)) if v is not None else "", limit)


# ---------------------------------------------------------------------------------------
# Where the proposal came from


def proposal_origin(it: Iteration) -> str:
    """Who proposed the candidate, and how: an agent through `kopt mcp` (with the client's
    name), `kopt submit`, the TUI, an agent CLI kopt ran (`command`), or tune."""
    return api.proposal_origin(it.record.get("proposal")).text if it.version else "baseline"


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
    dec = _map(it.record.get("decision"))
    flags = [str(f) for f in dec.get("flags") or () if isinstance(f, str)]
    notes = [Note(f, FLAG_HELP.get(f, "(a flag this version of kopt does not know)"), "bad")
             for f in flags_to_explain(str(dec.get("reason") or ""), flags)]
    notes += reverify_notes(it)
    notes += confirmation_notes(it)
    notes += profiler_notes(it)
    notes += diff_scan_notes(it)
    return tuple(notes)


def reverify_notes(it: Iteration) -> list[Note]:
    r = _map(it.record.get("reverify"))
    if not r:
        return []
    agrees = r.get("agrees") is True
    took = f" ({fmt.seconds(r['seconds'])})" if fmt.is_num(r.get("seconds")) else ""
    head = "agrees" if agrees else "DISAGREES"
    return [Note("fresh processes", f"{head}: {_text(r.get('verdict'), 40)}: {_text(r.get('reason'), 300)}{took}",
                 "good" if agrees else "bad")]


def confirmation_notes(it: Iteration) -> list[Note]:
    """How a keep was confirmed in freshly started servers, and what outside the candidate's
    process confirmed it (the profiler, the OS's accounting, or the bench's timer alone)."""
    notes = []
    c = _map(it.record.get("confirmation"))
    if c and c.get("path") == "served":
        conf = api.Confirmation.from_dict(dict(c))
        good = conf.outcome == "confirmed"
        notes.append(Note("confirmation", f"{conf.outcome} in {conf.looks} fresh look(s), {fmt.seconds(conf.seconds)}: "
                          f"{_text(conf.reason, 300)}", "good" if good else "bad"))
    t = _map(it.record.get("external_truth"))
    if t:
        truth = api.ExternalTruth.from_dict(dict(t))
        tone = {"confirmed": "good", "refuted": "bad"}.get(truth.outcome, "")
        notes.append(Note(f"truth: {truth.kind.replace('_', ' ')}", _text(truth.reason, 300), tone))
    return notes


def profiler_notes(it: Iteration) -> list[Note]:
    ev = api.profiler_evidence(it.record.get("profile"))
    if ev is None:
        return []
    if ev.error:
        return [Note("profiler", f"failed: {ev.error}", "bad")]
    notes = []
    for c in ev.classes:
        change = f"{fmt.num(c.best_ns)} → {fmt.num(c.cand_ns)} ns/call {fmt.ratio_pct(c.ratio)} {fmt.interval(c.lo, c.hi)}"
        if c.agreement:
            bench = f"bench {fmt.ratio_pct(c.bench_ratio)} {fmt.interval(c.bench_lo, c.bench_hi)}"
            change += f"; {bench}: {c.agreement.replace('_', ' ')}" + (f" ({_text(c.agreement_reason, 200)})"
                                                                     if c.agreement_reason else "")
        moved = [f"+{k}" for k in c.appeared] + [f"-{k}" for k in c.disappeared]
        if moved:
            change += "; kernels " + ", ".join(_text(k, 60) for k in moved[:6]) + (" …" if len(moved) > 6 else "")
        tone = "bad" if c.agreement == "disagrees" or c.problems else "good" if c.agreement == "agrees" else ""
        notes.append(Note(f"profiler {c.cls}", change, tone))
        notes += [Note("", _text(p, 300), "bad") for p in c.problems]
    if ev.outside_grew or ev.outside_cand_ns:
        notes.append(Note("outside ranges", f"{fmt.num(ev.outside_best_ns)} → {fmt.num(ev.outside_cand_ns)} ns per "
                          "profile" + (": grew beyond noise, a gain cannot be confirmed" if ev.outside_grew else ""),
                          "bad" if ev.outside_grew else ""))
    notes += [Note("", _text(p, 300), "bad") for p in ev.problems]
    if ev.note:
        notes.append(Note("", _text(ev.note, 300)))
    return notes


def diff_scan_notes(it: Iteration) -> list[Note]:
    findings = _map(it.record.get("diff_scan")).get("findings") or []
    out = []
    for f in findings[:20]:
        f = _map(f)
        line = f.get("line")
        where = f"{_text(f.get('path'), 120)}:{line}" if isinstance(line, int) and line else _text(f.get("path"), 120)
        out.append(Note(f"diff {_text(f.get('rule'), 40)}", f"{where}  {_text(f.get('text'), 160)}", "bad"))
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
    p = _map(it.record.get("plan"))
    target = it.target_class or ("all classes (global)" if it.status != "baseline" else "")
    if not p:
        return PlanView(_text(it.hypothesis), target, assessed=False)
    cites = tuple(Citation(_text(c.get("kind"), 20), _text(c.get("term"), 120), _text(c.get("evidence"), 400))
                  for c in (p.get("citations") or ()) if isinstance(c, Mapping))
    flags = tuple((str(f), PLAN_FLAG_HELP.get(str(f), "")) for f in p.get("flags") or () if isinstance(f, str))
    return PlanView(_text(p.get("hypothesis") or it.hypothesis), target, cites, flags, _text(p.get("reason"), 300))


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
    timings = _map(it.record.get("timings"))
    whole = _positive(timings.get("total_s"))
    rows = []
    for phase, seconds, note in api.timing_rows(timings):
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
    runs = [("proposal", it.record.get("proposal"))]
    runs += [(f"repair {i}", r) for i, r in enumerate(it.record.get("repairs") or (), 1)]
    out = []
    for label, details in runs:
        a = _map(_map(details).get("agent"))
        if not a:
            continue
        tin, tout = a.get("input_tokens"), a.get("output_tokens")
        cached = a.get("cache_read_tokens")
        tokens = (f"{fmt.count(tin)} in" + (f" ({fmt.count(cached)} cached)" if fmt.is_num(cached) and cached else "")
                  + f" · {fmt.count(tout)} out") if fmt.is_num(tin) or fmt.is_num(tout) else "not reported"
        sid = a.get("session_id")
        session = (_text(sid, 80) + (" (resumed)" if a.get("resumed") is True else "")) if isinstance(sid, str) else ""
        path = str(a["transcript_path"]) if isinstance(a.get("transcript_path"), str) else ""
        out.append(AgentRow(
            label, _text(a.get("agent") or "command", 40), _text(a.get("model") or "", 60),
            fmt.usd(a.get("cost_usd")) if fmt.is_num(a.get("cost_usd")) else "not reported", tokens,
            fmt.seconds(a.get("wall_s")), session, str(a["exit"]) if isinstance(a.get("exit"), int) else fmt.DASH,
            path, fmt.size(a.get("transcript_bytes")) if fmt.is_num(a.get("transcript_bytes")) else "",
            a.get("transcript_cut") is True, tuple(_text(n, 200) for n in (a.get("notes") or ()) if isinstance(n, str))))
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


_SKIP_KEYS = {"session_id", "sessionID", "uuid", "id", "parent_tool_use_id", "timestamp", "usage", "modelUsage",
              "tools", "cwd", "permissionMode", "signature", "service_tier"}


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
        if isinstance(v, str) and key not in ("text", "content", "result", "message", "error", "command", "output",
                                                "delta", "thinking", "reasoning", "summary", "status", "description"):
            continue
        part = _said(v, depth + 1)
        if part:
            parts.append(part)
    return " · ".join(parts)
