"""What an agent run cost: reading dollars, tokens and a session id from each CLI's output.

One parser per agent CLI turns the lines the CLI printed (its machine-readable output
mode; docs/agents.md names the version and the documentation each was written against)
into an `AgentRun`. `spent(records)` adds up every run kept in iteration records, and
`budget_exhausted(cfg, totals)` says, as a stop reason, when `[propose].budget_usd` or
`budget_tokens` is spent.

Token semantics are kopt's, the same for every CLI: `input_tokens` is every prompt token
the model processed, cached ones included; `cache_read_tokens` and `cache_write_tokens` are
the part of them read from or written to a prompt cache, where the CLI says so. A number
the CLI did not report stays None (never 0): a total says how many runs it could not count.

What an agent prints is its own claim: a parser takes only finite, non-negative numbers
(anything else is dropped and noted), reads lines of bounded length, and for CLIs that end
with one result event takes the last one. A run killed before its result event keeps what
its stream showed (tokens of finished messages, the session id) and no cost.

Pure, except `transcripts` (read_lines, cap_file), which reads and cuts a transcript file.

Modules: spending (AgentRun, the totals, the budget), parsers (one per CLI, and kopt's usage
contract), reading (the parsers' defensive readers), transcripts (the files).
"""

from kopt_supervisor.engine.propose.costs.parsers import (
    Parser,
    parse_aider,
    parse_claude,
    parse_codex,
    parse_gemini,
    parse_generic,
    parse_none,
    parse_opencode,
    parse_usage_object,
)
from kopt_supervisor.engine.propose.costs.reading import (
    SESSION_ID,
    WHOLE_MAX_BYTES,
    valid_session_id,
)
from kopt_supervisor.engine.propose.costs.spending import (
    AgentRun,
    Spent,
    agent_runs,
    budget_exhausted,
    spent,
)
from kopt_supervisor.engine.propose.costs.transcripts import MAX_LINE_BYTES, cap_file, read_lines

__all__ = [
    "MAX_LINE_BYTES",
    "SESSION_ID",
    "WHOLE_MAX_BYTES",
    "agent_runs",
    "AgentRun",
    "budget_exhausted",
    "cap_file",
    "parse_aider",
    "parse_claude",
    "parse_codex",
    "parse_gemini",
    "parse_generic",
    "parse_none",
    "parse_opencode",
    "parse_usage_object",
    "Parser",
    "read_lines",
    "Spent",
    "spent",
    "valid_session_id",
]
