"""Proposers: the interface, the plan file, the `manual` proposer and `command` (which runs an
agent CLI; its presets: `agents`) are `proposer`; `tune` is the built-in parameter search (its
space and history: `tune_space`); the context pack an agent reads is `context` (its data and
markdown; its inputs, evidence and rules: `context_inputs`); `make_proposer`, which builds the
configured one, is the loop's (engine/loop/__init__.py). This module holds how an agent's run
is read: its transcript on disk, one parser per agent CLI turning what it printed into an
`AgentRun` (engine.records, with the totals over a run's records), and the stop reason once
[propose].budget_usd or budget_tokens is spent (`budget_exhausted`).

The transcript's edge: `read_lines` reads it line by line with over-long lines skipped,
`cap_file` cuts it to its head and tail when over [propose].transcript_max_kib.

The parsers (pure): the lines each CLI printed in its machine-readable output mode
(docs/agents.md names the version and the documentation each was written against);
`parse_usage_object` reads kopt's own usage contract ($KOPT_USAGE). Token semantics are kopt's,
the same for every CLI: `input_tokens` is every prompt token the model processed, cached ones
included; `cache_read_tokens` and `cache_write_tokens` are the part of them read from or written
to a prompt cache, where the CLI says so. A number the CLI did not report stays None (never 0):
a total says how many runs it could not count.

What an agent prints is its own claim, read defensively: numbers only when finite and
non-negative (anything else dropped and noted), session ids only in a shape safe to hand back
to a CLI, JSON objects line by line in bounded memory. For CLIs that end with one result
event the last one counts; a run killed before it keeps what its stream showed (tokens of
finished messages, the session id) and no cost.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kopt_supervisor.engine.records import AgentRun, Spent

if TYPE_CHECKING:
    from kopt_supervisor.engine.config import Config


def budget_exhausted(cfg: Config, totals: Spent) -> str | None:
    """The stop reason when [propose].budget_usd or budget_tokens is spent, else None."""
    p = cfg.propose
    if p.budget_usd > 0 and totals.cost_usd >= p.budget_usd:
        unknown = f" ({totals.runs_without_cost} run(s) reported no cost)" if totals.runs_without_cost else ""
        return (
            f"the agent budget is spent: ${totals.cost_usd:.2f} of [propose].budget_usd = "
            f"${p.budget_usd:.2f} over {totals.runs} agent run(s){unknown}"
        )
    if p.budget_tokens > 0 and totals.tokens >= p.budget_tokens:
        unknown = f" ({totals.runs_without_tokens} run(s) reported no tokens)" if totals.runs_without_tokens else ""
        return (
            f"the agent token budget is spent: {totals.tokens:,} tokens (input + output) of "
            f"[propose].budget_tokens = {p.budget_tokens:,} over {totals.runs} agent run(s){unknown}"
        )
    return None


MAX_LINE_BYTES = 4 * 2**20
"""Longer lines (a tool's huge output echoed in a JSON event) are skipped, not parsed."""


def read_lines(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The file's lines, decoded; lines longer than `max_line_bytes` are skipped."""
    try:
        f = open(path, "rb")
    except OSError:
        return
    with f:
        skipping = False
        while True:
            chunk = f.readline(max_line_bytes + 1)
            if not chunk:
                return
            complete = chunk.endswith(b"\n")
            if skipping or len(chunk) > max_line_bytes:
                skipping = not complete
                continue
            yield chunk.decode("utf-8", "replace")


def cap_file(path: Path, max_bytes: int) -> tuple[int, bool]:
    """Keep the head and the tail of a file that is over `max_bytes` with a marker line
    between them. Returns (the size it had, whether it was cut)."""
    try:
        size = path.stat().st_size
    except OSError:
        return 0, False
    if size <= max_bytes:
        return size, False
    keep = max(max_bytes // 2, 1)
    with open(path, "rb") as f:
        head = f.read(keep)
        f.seek(size - keep)
        tail = f.read(keep)
    marker = f"\n[... kopt cut {size - 2 * keep} bytes of this transcript ([propose].transcript_max_kib) ...]\n"
    tmp = path.with_name(path.name + ".cut")
    tmp.write_bytes(head + marker.encode() + tail)
    tmp.replace(path)
    return size, True


# ---------------------------------------------------------------------------------------
# One parser per agent CLI


def _num(value: Any) -> float | None:
    """A finite number >= 0, or None (bools, strings, NaN, negatives are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and v >= 0 else None


def _int(value: Any) -> int | None:
    v = _num(value)
    return None if v is None else int(v)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) and value.strip() else None


SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}")


def valid_session_id(value: Any) -> bool:
    """A session id kopt will hand back to a CLI: letters, digits and `._:@+=-`, not
    starting with `-` (a value like `--dangerously-skip-permissions` would be read as a
    flag by the next iteration's command line), at most 128 characters."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


def _sid(value: Any) -> str | None:
    return value if valid_session_id(value) else None


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else a + b


class _Notes:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> None:
        if text not in self.items and len(self.items) < 10:
            self.items.append(text)

    def checked(self, what: str, raw: Any, value: float | int | None) -> None:
        if raw is not None and value is None:
            self.add(f"ignored {what} = {str(raw)[:40]!r} (not a finite number >= 0)")


def _json_objects(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


WHOLE_MAX_BYTES = 4 * 2**20


class _Scan:
    """One pass over a CLI's output: the JSON object of each line, and (up to
    WHOLE_MAX_BYTES) the whole text, for an output that is one pretty-printed JSON document.
    Nothing else is kept, so a transcript of any size parses in bounded memory."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = lines
        self._raw: list[str] | None = []
        self._size = 0

    def objects(self) -> Iterator[dict[str, Any]]:
        for line in self._lines:
            if self._raw is not None:
                self._size += len(line)
                if self._size > WHOLE_MAX_BYTES:
                    self._raw = None
                else:
                    self._raw.append(line)
            yield from _json_objects([line])

    def whole(self) -> dict[str, Any] | None:
        """The output as one JSON object, if it is one (call after `objects` is consumed)."""
        if self._raw is None:
            return None
        text = "".join(self._raw).strip()
        if not text.startswith("{"):
            return None
        try:
            obj = json.loads(text)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None


def parse_claude(lines: Iterable[str]) -> AgentRun:
    """The last `{"type": "result"}` event: total_cost_usd, usage, session_id, num_turns.

    usage.input_tokens excludes cached prompt tokens in Anthropic's accounting, so kopt's
    input_tokens adds cache_creation_input_tokens and cache_read_input_tokens. Without a
    result event (killed at a timeout), the tokens of the assistant messages seen are
    added up (each message id counted once, its last usage) and the cost stays unknown."""
    notes = _Notes()
    scan = _Scan(lines)
    result: dict[str, Any] | None = None
    session = model = None
    per_message: dict[str, dict[str, Any]] = {}
    seen = False
    for o in scan.objects():
        seen = True
        kind = o.get("type")
        if kind == "result":
            result = o
        elif kind == "system" and o.get("subtype") == "init":
            session = _sid(o.get("session_id")) or session
            model = _str(o.get("model")) or model
        elif kind == "assistant" and isinstance(o.get("message"), dict):
            msg = o["message"]
            if isinstance(msg.get("usage"), dict):
                per_message[str(msg.get("id") or len(per_message))] = msg["usage"]
    if not seen and (whole := scan.whole()) is not None and whole.get("type") == "result":
        result = whole
    if result is not None:
        usage = _dict(result.get("usage"))
        base, cw, cr, out = (
            _int(usage.get(k))
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
        )
        for k, v in (("usage.input_tokens", base), ("usage.output_tokens", out)):
            notes.checked(k, usage.get(k.split(".")[1]), v)
        raw_cost = result.get("total_cost_usd", result.get("cost_usd"))
        cost = _num(raw_cost)
        notes.checked("total_cost_usd", raw_cost, cost)
        is_error = result.get("is_error") if isinstance(result.get("is_error"), bool) else None
        if is_error:
            notes.add(f"the result says is_error (subtype {str(result.get('subtype'))[:40]!r})")
        return AgentRun(
            agent="claude-code",
            cost_usd=cost,
            input_tokens=None if base is None else base + (cw or 0) + (cr or 0),
            output_tokens=out,
            cache_read_tokens=cr,
            cache_write_tokens=cw,
            session_id=_sid(result.get("session_id")) or session,
            model=model,
            turns=_int(result.get("num_turns")),
            is_error=is_error,
            notes=tuple(notes.items),
        )
    inp = out = cr = cw = None
    for usage in per_message.values():
        i, w, r, o_ = (
            _int(usage.get(k))
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
        )
        inp = _add(inp, None if i is None else i + (w or 0) + (r or 0))
        out, cr, cw = _add(out, o_), _add(cr, r), _add(cw, w)
    notes.add("no result event (the run did not finish): cost unknown, tokens of the messages seen")
    return AgentRun(
        agent="claude-code",
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=cr,
        cache_write_tokens=cw,
        session_id=session,
        model=model,
        notes=tuple(notes.items),
    )


# ---------------------------------------------------------------------------------------
# Codex CLI: `codex exec --json`


def parse_codex(lines: Iterable[str]) -> AgentRun:
    """`thread.started` gives the thread id (what `codex exec resume` takes); every
    `turn.completed` (and `turn.failed`) carries usage {input_tokens, cached_input_tokens,
    output_tokens}, added up. OpenAI's input_tokens already include the cached ones. Codex
    prints no cost."""
    notes = _Notes()
    session = None
    inp = out = cached = None
    turns = 0
    failed = False
    for o in _json_objects(lines):
        kind = o.get("type")
        if kind == "thread.started":
            session = _sid(o.get("thread_id")) or session
        elif kind in ("turn.completed", "turn.failed"):
            turns += 1
            failed = failed or kind == "turn.failed"
            usage = _dict(o.get("usage"))
            i, c, t = (_int(usage.get(k)) for k in ("input_tokens", "cached_input_tokens", "output_tokens"))
            notes.checked("usage.input_tokens", usage.get("input_tokens"), i)
            notes.checked("usage.output_tokens", usage.get("output_tokens"), t)
            inp, cached, out = _add(inp, i), _add(cached, c), _add(out, t)
    if not turns:
        notes.add("no turn.completed event (the run did not finish): tokens unknown")
    if failed:
        notes.add("a turn failed")
    return AgentRun(
        agent="codex",
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=cached,
        session_id=session,
        turns=turns or None,
        is_error=failed if turns else None,
        notes=(*notes.items, "codex reports no cost"),
    )


# ---------------------------------------------------------------------------------------
# Gemini CLI: `gemini -p ... --output-format stream-json` (or `json`)


def parse_gemini(lines: Iterable[str]) -> AgentRun:
    """stream-json: `init` {session_id, model}, the last `result` {status, stats:
    {input_tokens, output_tokens, cached, total_tokens, tool_calls}} (input_tokens include
    the cached ones). json: one object {session_id, response, stats: {models: {name:
    {tokens: {prompt, candidates, cached, thoughts, ...}}}}}: prompt tokens include the
    cached ones; thoughts are generated tokens. Gemini CLI prints no cost."""
    notes = _Notes()
    scan = _Scan(lines)
    session = model = None
    result: dict[str, Any] | None = None
    document: dict[str, Any] | None = None
    for o in scan.objects():
        kind = o.get("type")
        if kind == "init":
            session = _sid(o.get("session_id")) or session
            model = _str(o.get("model")) or model
        elif kind == "result":
            result = o
        elif kind is None and any(k in o for k in ("stats", "response", "session_id")):
            document = o  # `--output-format json` printed on one line
    if result is None and document is None:
        whole = scan.whole()
        if whole is not None and any(k in whole for k in ("stats", "response", "session_id")):
            document = whole
    if result is None and document is not None:
        return _gemini_json(document, notes)
    if result is None:
        notes.add("no result event (the run did not finish): tokens unknown")
        return AgentRun(agent="gemini", session_id=session, model=model, notes=(*notes.items, "gemini reports no cost"))
    stats = _dict(result.get("stats"))
    i, o_, c = (_int(stats.get(k)) for k in ("input_tokens", "output_tokens", "cached"))
    notes.checked("stats.input_tokens", stats.get("input_tokens"), i)
    notes.checked("stats.output_tokens", stats.get("output_tokens"), o_)
    status = result.get("status")
    if status == "error":
        notes.add("the result says status error")
    return AgentRun(
        agent="gemini",
        input_tokens=i,
        output_tokens=o_,
        cache_read_tokens=c,
        session_id=session,
        model=model,
        is_error=(status == "error") if isinstance(status, str) else None,
        notes=(*notes.items, "gemini reports no cost"),
    )


def _gemini_json(obj: dict[str, Any], notes: _Notes) -> AgentRun:
    stats = _dict(obj.get("stats"))
    models = _dict(stats.get("models"))
    inp = out = cached = thoughts = None
    for m in models.values():
        tok = _dict(m.get("tokens")) if isinstance(m, dict) else {}
        p, cand, c, th = (_int(tok.get(k)) for k in ("prompt", "candidates", "cached", "thoughts"))
        notes.checked("tokens.prompt", tok.get("prompt"), p)
        inp, out, cached, thoughts = _add(inp, p), _add(out, _add(cand, th)), _add(cached, c), _add(thoughts, th)
    error = obj.get("error")
    if error:
        notes.add("the output carries an error")
    return AgentRun(
        agent="gemini",
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
        session_id=_sid(obj.get("session_id")),
        model=next(iter(models), None) if len(models) == 1 else None,
        is_error=bool(error),
        notes=(*notes.items, "gemini reports no cost"),
    )


# ---------------------------------------------------------------------------------------
# aider: `aider --message-file ...` prints one usage line per model reply

_AIDER_TOKENS = re.compile(r"^Tokens: (?P<sent>[\d.]+[kM]?) sent(?P<rest>.*?), (?P<recv>[\d.]+[kM]?) received\.")
_AIDER_CACHE = re.compile(r"(?P<n>[\d.]+[kM]?) cache (?P<kind>write|hit)")
_AIDER_COST = re.compile(r"Cost: \$(?P<msg>[\d.]+) message, \$(?P<session>[\d.]+) session\.")


def _aider_count(text: str) -> int | None:
    """aider's format_tokens: 999, 1.2k (under 10k), 12k, 1.5M."""
    m = re.fullmatch(r"([\d.]+)([kM]?)", text)
    if not m:
        return None
    try:
        v = float(m.group(1))
    except ValueError:
        return None
    return int(round(v * {"": 1, "k": 1e3, "M": 1e6}[m.group(2)]))


def parse_aider(lines: Iterable[str]) -> AgentRun:
    """Every `Tokens: 12k sent, 1.3k cache write, 8.1k cache hit, 219 received.` line (one per
    model reply) is added up; the session cost is the last `Cost: $0.01 message, $0.05
    session.`. aider rounds token counts to thousands above 10k, so the totals are
    approximate. aider has no session id (no resume)."""
    notes = _Notes()
    inp = out = cr = cw = None
    cost = None
    replies = 0
    for line in lines:
        line = line.strip()
        m = _AIDER_TOKENS.match(line)
        if m:
            replies += 1
            sent, recv = _aider_count(m.group("sent")), _aider_count(m.group("recv"))
            hit = write = 0
            for c in _AIDER_CACHE.finditer(m.group("rest")):
                n = _aider_count(c.group("n")) or 0
                if c.group("kind") == "hit":
                    hit += n
                else:
                    write += n
            inp = _add(inp, None if sent is None else sent + hit)
            out, cr, cw = _add(out, recv), _add(cr, hit if hit else None), _add(cw, write if write else None)
        c_ = _AIDER_COST.search(line)
        if c_:
            cost = _num(float(c_.group("session")))
    if not replies:
        notes.add("no `Tokens:` line: tokens unknown")
    if cost is None and replies:
        notes.add("no `Cost:` line (the model has no price in aider's table): cost unknown")
    return AgentRun(
        agent="aider",
        cost_usd=cost,
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=cr,
        cache_write_tokens=cw,
        turns=replies or None,
        notes=(*notes.items, "aider rounds token counts (approximate)"),
    )


# ---------------------------------------------------------------------------------------
# opencode: `opencode run --format json`


def parse_opencode(lines: Iterable[str]) -> AgentRun:
    """JSON lines {type, timestamp, sessionID, part}; every `step_finish` part carries `cost`
    and `tokens` {input, output, reasoning, cache: {read, write}}, added up (input excludes
    the cache there, so kopt's input_tokens add both cache counts)."""
    notes = _Notes()
    session = None
    cost: float | None = None
    inp = out = cr = cw = reasoning = None
    steps = 0
    error = False
    for o in _json_objects(lines):
        session = _sid(o.get("sessionID")) or session
        kind = o.get("type")
        if kind == "error":
            error = True
        if kind != "step_finish":
            continue
        part = _dict(o.get("part"))
        steps += 1
        c = _num(part.get("cost"))
        notes.checked("part.cost", part.get("cost"), c)
        if c is not None:
            cost = (cost or 0.0) + c
        tok = _dict(part.get("tokens"))
        cache = _dict(tok.get("cache"))
        i, o_, r = (_int(tok.get(k)) for k in ("input", "output", "reasoning"))
        rd, wr = _int(cache.get("read")), _int(cache.get("write"))
        notes.checked("tokens.input", tok.get("input"), i)
        inp = _add(inp, None if i is None else i + (rd or 0) + (wr or 0))
        out, reasoning = _add(out, _add(o_, r)), _add(reasoning, r)
        cr, cw = _add(cr, rd), _add(cw, wr)
    if not steps:
        notes.add("no step_finish event: cost and tokens unknown")
    if error:
        notes.add("an error event")
    return AgentRun(
        agent="opencode",
        cost_usd=cost,
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=cr,
        cache_write_tokens=cw,
        reasoning_tokens=reasoning,
        session_id=session,
        turns=steps or None,
        is_error=error,
        notes=tuple(notes.items),
    )


# ---------------------------------------------------------------------------------------
# generic: the KOPT_USAGE file, else the last JSON line that names cost or tokens

_GENERIC_COST = ("cost_usd", "total_cost_usd", "cost")
_GENERIC_SESSION = ("session_id", "sessionId", "sessionID", "thread_id")


def parse_usage_object(obj: Mapping[str, Any], agent: str = "generic") -> AgentRun | None:
    """kopt's own usage contract (the file at $KOPT_USAGE, or a JSON line): {"cost_usd",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "session_id"}; `usage` {input_tokens, output_tokens} and `total_cost_usd` are read too.
    None when it names none of them."""
    notes = _Notes()
    usage = _dict(obj.get("usage"))

    def pick(*keys: str) -> Any:
        for k in keys:
            if k in obj:
                return obj[k]
            if k in usage:
                return usage[k]
        return None

    raw_cost = pick(*_GENERIC_COST)
    cost = _num(raw_cost)
    notes.checked("cost", raw_cost, cost)
    raw = {k: pick(k) for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")}
    vals = {k: _int(v) for k, v in raw.items()}
    for k in raw:
        notes.checked(k, raw[k], vals[k])
    session = next((s for k in _GENERIC_SESSION if (s := _sid(obj.get(k)))), None)
    if cost is None and session is None and all(v is None for v in vals.values()) and not notes.items:
        return None
    return AgentRun(
        agent=agent,
        cost_usd=cost,
        input_tokens=vals["input_tokens"],
        output_tokens=vals["output_tokens"],
        cache_read_tokens=vals["cache_read_tokens"],
        cache_write_tokens=vals["cache_write_tokens"],
        session_id=session,
        notes=tuple(notes.items),
    )


def parse_generic(lines: Iterable[str]) -> AgentRun:
    found = None
    for o in _json_objects(lines):
        run = parse_usage_object(o)
        if run is not None:
            found = run
    if found is None:
        return AgentRun(agent="generic", notes=("no usage reported (write JSON to $KOPT_USAGE)",))
    return found


Parser = Callable[[Iterable[str]], AgentRun]
