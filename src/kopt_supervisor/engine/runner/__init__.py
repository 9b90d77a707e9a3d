"""Subprocesses: each in its own process group, with a timeout, logs to files, interruptible.

`run()` starts a command in a new session (so its whole process tree shares one group),
streams stdout and stderr to files, and while it waits calls `poll()` every few tenths of a
second: the engine's way to act on a stop or pause within a second, even during a long
benchmark. On timeout, on an exception from `poll()`, on runaway output, and after the
command's own exit, the whole group is killed (TERM, then KILL), so nothing is left behind.

`Server` is the same for a command that stays up and answers requests line by line (the
serve protocols of docs/files.md): `ask()` writes a request to its stdin and waits, with
the same timeout, polling and output limit, for the reply line on its stdout; `pause()` and
`resume()` stop and continue its whole process tree; `close()` ends it and kills its group.

Commands are argv lists or shell strings. Shell strings come only from the user's own
kopt.toml (the bench, the proposer, the format command); nothing from a plan, a hypothesis
or a CSV value is ever put into one.

With `confine=` (an `engine.sandbox.Confinement`) the command runs under bubblewrap: the
argv is wrapped, and everything above still holds. The process kopt starts is bwrap, the
leader of the group; the command and what it starts live in a PID namespace whose init is
kopt's (`sandbox.lifeline`: it leaves when the command ends or kopt's lifeline pipe closes),
so killing the group (or kopt's own death) ends every process inside, a `setsid` one
included. They stay visible from outside (`process_tree`),
with their environment (the KOPT_WORKSPACE marker) readable for `kill_orphans`.

Unconfined (no `confine=`), nothing holds a `setsid` process to its step: every step is
given a token of its own in its environment (`STEP_ENV`), and after the step, besides its
group, every process of this user that carries the token is ended (`kill_marked`: TERM,
a short grace, then STOP and KILL until none is left); with `marker=` (the run's
KOPT_WORKSPACE), so is every process carrying the run's marker whose token is not that of
a step still running (another lane's). The limit: a process that re-executes itself with
an environment of its own (neither token nor marker) is not recognised; that is what
running without the sandbox gives up.

Log files are opened fresh (a name left in their folder is removed first, and never
followed): a sandboxed process that can write in a log folder cannot turn kopt's next
log into a write through a link or a block on a FIFO.

The rooms (this package re-exports their public names; a test that replaces a name
patches the module that reads it, e.g. `runner.logs.limit_file_size`):

- `command`: a command that ends (`run`, `RunResult`);
- `server`: a command that stays up and answers line by line (`Server`);
- `logs`: log files, the output limit, a log's tail;
- `processes`: process groups, orphans, what a step leaves behind, and the CPU time a
  process tree spent (`cpu_seconds`).
"""

from __future__ import annotations

from kopt_supervisor.engine.runner.command import RunResult, all_at_once, as_argv, run, sandbox_note
from kopt_supervisor.engine.runner.logs import DEFAULT_MAX_OUTPUT_BYTES, tail_file
from kopt_supervisor.engine.runner.processes import (
    STEP_ENV,
    cpu_seconds,
    end_leftovers,
    group_members,
    kill_group,
    kill_marked,
    kill_orphans,
    marked_processes,
    process_tree,
    signal_tree,
)
from kopt_supervisor.engine.runner.server import Server, ServerError

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "STEP_ENV",
    "RunResult",
    "Server",
    "ServerError",
    "all_at_once",
    "as_argv",
    "cpu_seconds",
    "end_leftovers",
    "group_members",
    "kill_group",
    "kill_marked",
    "kill_orphans",
    "marked_processes",
    "process_tree",
    "run",
    "sandbox_note",
    "signal_tree",
    "tail_file",
]
