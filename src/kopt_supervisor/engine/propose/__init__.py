"""Proposers: the interface, the plan file, the `manual` proposer and `command` (which runs an
agent CLI; its presets: `agents`) are `proposer`; `tune` is the built-in parameter search (its
space and history: `tune_space`); the context pack an agent reads is `context` (its data and
markdown; its inputs, evidence and rules: `context_inputs`); `make_proposer`, which builds the
configured one, is the loop's (engine/loop/__init__.py). This module holds what agent runs
cost (its per-CLI parsers: `agent_parsers`).

What an agent run cost: `AgentRun` (as an iteration record keeps it under `proposal.agent`
and `repairs[].agent`), the totals over a run's records (`spent`), the stop reason once
[propose].budget_usd or budget_tokens is spent (`budget_exhausted`), and the agent's
transcript on disk. The per-CLI parsers that fill an `AgentRun` are `agent_parsers`.

Token semantics are kopt's, the same for every CLI: `input_tokens` is every prompt token
the model processed, cached ones included; `cache_read_tokens` and `cache_write_tokens` are
the part of them read from or written to a prompt cache, where the CLI says so. A number
the CLI did not report stays None (never 0): a total says how many runs it could not count.

Pure (records in, totals out), except the transcript's edge: `read_lines` reads it line by
line with over-long lines skipped, `cap_file` cuts it to its head and tail when over
[propose].transcript_max_kib.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kopt_supervisor.engine.records import known_fields

if TYPE_CHECKING:
    from kopt_supervisor.engine.config import Config


@dataclass(frozen=True)
class AgentRun:
    """One run of an agent CLI: what it cost and where its transcript is."""

    agent: str = ""
    cost_usd: float | None = None
    input_tokens: int | None = None
    """Every prompt token processed, cached ones included."""
    output_tokens: int | None = None
    """Generated tokens, reasoning/thinking tokens included where the CLI reports them."""
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    session_id: str | None = None
    session_started: int | None = None
    """The iteration whose run started this session (a resumed session keeps it)."""
    resumed: bool = False
    model: str | None = None
    turns: int | None = None
    is_error: bool | None = None
    wall_s: float | None = None
    exit: int | None = None
    transcript_path: str = ""
    """The agent's output kept in logs/vN/ (size-capped), relative to the workspace."""
    transcript_bytes: int | None = None
    transcript_cut: bool = False
    notes: tuple[str, ...] = ()
    """What the parser could not read (a missing result event, a value it dropped)."""

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        out["tokens"] = self.tokens
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentRun:
        kw = known_fields(cls, data)
        kw["notes"] = tuple(kw.get("notes") or ())
        return cls(**kw)


@dataclass(frozen=True)
class Spent:
    runs: int = 0
    cost_usd: float = 0.0
    runs_without_cost: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    runs_without_tokens: int = 0
    wall_s: float = 0.0
    by_version: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per iteration: runs, cost_usd, tokens, wall_s."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["tokens"] = self.tokens
        out["by_version"] = {str(k): v for k, v in self.by_version.items()}
        return out


def agent_runs(record: Mapping[str, Any]) -> list[AgentRun]:
    """The agent runs of one iteration record: its proposal and every repair."""
    runs = []
    for details in [record.get("proposal"), *(record.get("repairs") or [])]:
        if isinstance(details, Mapping) and isinstance(details.get("agent"), Mapping):
            runs.append(AgentRun.from_dict(details["agent"]))
    return runs


def spent(records: Iterable[tuple[int, Mapping[str, Any]]]) -> Spent:
    """Totals over (version, record) pairs. Masked iterations count too: their money is spent."""
    total = Spent()
    by: dict[int, dict[str, Any]] = {}
    acc = asdict(total)
    for version, record in records:
        for run in agent_runs(record):
            acc["runs"] += 1
            v = by.setdefault(version, {"runs": 0, "cost_usd": None, "tokens": None, "wall_s": 0.0})
            v["runs"] += 1
            if run.cost_usd is None:
                acc["runs_without_cost"] += 1
            else:
                acc["cost_usd"] += run.cost_usd
                v["cost_usd"] = (v["cost_usd"] or 0.0) + run.cost_usd
            if run.tokens is None:
                acc["runs_without_tokens"] += 1
            else:
                v["tokens"] = (v["tokens"] or 0) + run.tokens
            for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
                acc[k] += getattr(run, k) or 0
            acc["wall_s"] += run.wall_s or 0.0
            v["wall_s"] += run.wall_s or 0.0
    acc["by_version"] = by
    return replace(total, **acc)


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
