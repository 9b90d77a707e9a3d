"""Subprocesses in their own process group, with timeouts, output limits and logs: `command`
(`run`, `Server`, and what is guaranteed), `processes` (process groups, leftovers, log files)."""
