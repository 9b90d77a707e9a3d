"""`kopt mcp TAG`: kopt as the judge an interactive agent works through (docs/agents.md, "kopt
as an MCP judge").

The agent drives (Claude Code, Codex, Cursor, Gemini in the engineer's session) and kopt
judges: an MCP server over the official SDK whose tools read the run and submit the
agent's edits in cand/ to the run's `manual` proposer. The server is a client of the run
like the CLI: it sends commands and reads records through `engine.api` only (a contract of
tests/test_import_contracts.py), so what an agent submits goes through the same police,
confinement, statistics and review as any candidate.

- `errors`: the refusals an MCP caller gets (one line each);
- `rules`: pure checks of the tools' arguments and of the moment a submit is allowed, and
  the text of progress and verdicts;
- `judge`: the run as the tools see it (reads, the submit and the following of its
  iteration), synchronous;
- `seats`: on a run of several lanes, the lane each MCP session holds (a lane of its own);
- `server`: the MCP server (tools, stdio and streamable HTTP behind a bearer token; which
  session a call is of);
- `client_config`: the snippet each MCP client's documentation asks for.
"""
