"""A --profile run started ahead and held (KOPT_PROFILE_HOLD): what it may do before kopt says go.

kopt starts a keep's profile while the decision's looks still run, so that the profiler's start,
torch's import and the host's input draws are over when the decision ends (engine/loop/
profile_runs.py, `HeldProfile`). Until kopt writes `go` into the file KOPT_PROFILE_HOLD names,
the process runs kopt's own code alone, and none of it on the GPU:

- it writes `<file>.held` first (kopt's proof, read at the release, that the command held at
  all: a command that ignored the variable would have profiled while the looks ran);
- it imports torch, reads the spec (the protected contract, not the candidate's code) and draws
  on the host the inputs every config under GPU_DRAW_BYTES would draw there anyway
  (`Case.host_draw`), from the same seeds, so the values are those of a run never held;
- it waits for the file: `go` goes on (the solution imported, the CUDA context made, the calls
  profiled), `stop` leaves with nothing written.

So nothing of the candidate's tree runs, and nothing touches the GPU, while the decision's
looks are measured; the draws run on HOLD_THREADS threads of the host's CPU at its idle priority
(`idle_priority`, SCHED_IDLE: only CPU time no other process wants)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROFILE_HOLD_ENV = "KOPT_PROFILE_HOLD"
"""--profile: the file kopt writes `go` (or `stop`) into; while it is absent the run holds."""
HELD_SUFFIX = ".held"
"""`<file>.held`: written by a run that holds, before anything else."""
HOLD_DRAW_BYTES = 4 << 30
"""The most bytes of inputs drawn on the host while held (the rest are drawn after `go`)."""
HOLD_THREADS = 2
"""torch's CPU threads while held: the draws leave the decision's processes the other cores."""
HOLD_MAX_S = 3600.0
"""A held run that hears nothing for this long leaves with an error."""
HOLD_POLL_S = 0.01

Draws = dict[tuple[str, int], tuple[tuple, dict[str, Any]]]
"""(config key, seed) -> the inputs drawn on the host for it, while held (`Case.host_draw` takes
each once)."""


def hold_file(environ: dict[str, str] | None = None) -> Path | None:
    """The go file kopt named, or None: this run is not held."""
    raw = (os.environ if environ is None else environ).get(PROFILE_HOLD_ENV, "").strip()
    return Path(raw) if raw else None


def acknowledge(go: Path) -> None:
    """`<go>.held`: this run holds (kopt checks it at the release)."""
    Path(f"{go}{HELD_SUFFIX}").write_text(f"{os.getpid()}\n", encoding="utf-8")


def predraw(
    draws: list[tuple[str, int, Callable[[], tuple[tuple, dict[str, Any]]]]],
    budget: int = HOLD_DRAW_BYTES,
) -> Draws:
    """Run `draws` ((config key, seed, host draw)) in order until `budget` bytes are held. A draw
    that raises is left to the run after `go`."""
    drawn: Draws = {}
    held = 0
    for key, seed, draw in draws:
        try:
            args, kwargs = draw()
        except Exception:
            continue
        held += nbytes(args, kwargs)
        drawn[(key, seed)] = (args, kwargs)
        if held >= budget:
            break
    return drawn


def nbytes(args: tuple, kwargs: dict[str, Any]) -> int:
    """The bytes of the tensors among a call's inputs."""
    return sum(
        int(v.numel()) * int(v.element_size())
        for v in (*args, *kwargs.values())
        if hasattr(v, "element_size") and hasattr(v, "numel")
    )


def wait_for_go(go: Path, max_s: float = HOLD_MAX_S, poll_s: float = HOLD_POLL_S) -> bool:
    """Wait for kopt's word in `go`: True for `go`, False for `stop`. Anything else, or nothing
    within `max_s`, ends the run with an error."""
    deadline = time.monotonic() + max_s
    while True:
        try:
            word = go.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            word = ""
        if word == "go":
            return True
        if word == "stop":
            return False
        if word:
            raise SystemExit(f"{PROFILE_HOLD_ENV} {go}: {word[:40]!r} is neither go nor stop")
        if time.monotonic() > deadline:
            raise SystemExit(f"{PROFILE_HOLD_ENV} {go}: no word from kopt in {max_s:.0f} s")
        time.sleep(poll_s)


def idle_priority() -> Callable[[], None]:
    """This thread, and the threads it starts from now on, at SCHED_IDLE; returns what puts the
    thread back (the threads started meanwhile stay idle). Where the policy is missing or
    refused, nothing changes."""
    if not hasattr(os, "SCHED_IDLE"):
        return lambda: None
    try:
        policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except OSError as exc:
        log(f"profile held at the usual priority: {exc}")
        return lambda: None

    def back() -> None:
        try:
            os.sched_setscheduler(0, policy, param)
        except OSError as exc:  # an unprivileged thread whose RLIMIT_NICE does not allow it
            log(f"profile left at the idle priority: {exc}")

    return back


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
