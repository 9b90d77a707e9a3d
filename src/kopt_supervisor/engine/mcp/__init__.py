"""`kopt mcp TAG`: kopt as the judge an interactive agent works through (docs/agents.md, "kopt
as an MCP judge"). The agent drives and kopt judges: an MCP server whose tools read the run and
submit the agent's edits in cand/ to the run's `manual` proposer, a client of the run like the
CLI (through `engine.api`), so what an agent submits goes through the same police,
confinement, statistics and review as any candidate. Modules: `rules` (pure: the tools'
arguments, when a submit may be sent, the words of progress and verdicts, the refusals, each
client's config snippet), `judge` (the run as the tools see it, and `Seats`: the lane each
session holds), `server` (the MCP server: tools, stdio and streamable HTTP).
"""
