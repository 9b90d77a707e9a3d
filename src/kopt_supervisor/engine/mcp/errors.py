"""What an MCP caller is refused, as one line it can act on. The server turns each into an
MCP tool error; nothing of the run's state has changed when one is raised."""

from __future__ import annotations


class Refused(Exception):
    """Bad arguments, or a call the run cannot take now (another submit measuring, no change
    in cand/, no engine, restarts not allowed): nothing was sent to the run."""


class EngineGone(Exception):
    """The run's engine died (or stopped beating) while a submit waited for its verdict."""
