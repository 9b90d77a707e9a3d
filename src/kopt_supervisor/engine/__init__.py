"""kopt engine: a library with no UI imports that owns all state and side effects.

The package itself holds only the few exception types that cross the engine's boundary, with
their exit codes, and imports nothing: every room, the pure ones included, raises them
(`from kopt_supervisor.engine import BadInput`), and importing any engine module runs this
file first. A `BadInput` is the user's to fix (a config key, a tag, a CSV column): the CLI
prints its one-line message and exits 2. A `KoptFailure` is a run or command that failed:
exit 1. Everything else is a bug and is logged with its traceback.
"""


class KoptError(Exception):
    """Base of the errors kopt reports to the user as one line."""

    exit_code = 1


class BadInput(KoptError):
    """Bad usage or bad input; the message names the file, key, column or value at fault."""

    exit_code = 2


class KoptFailure(KoptError):
    """A run or a command failed for a stated reason."""

    exit_code = 1
