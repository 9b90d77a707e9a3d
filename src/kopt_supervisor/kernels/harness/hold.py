"""A --profile run started ahead and held (KOPT_PROFILE_HOLD): what it may do before kopt says go.

kopt starts a keep's profile while the decision's looks still run, so that the profiler's start,
torch's import and the host's input draws are over when the decision ends (engine/loop/
profile_runs.py, `HeldProfile`). Until kopt writes `go` into the file KOPT_PROFILE_HOLD names,
the process runs kopt's own code alone, and none of it on the GPU:

- it writes `<file>.held` first (kopt's proof, read at the release, that the command held at
  all: a command that ignored the variable would have profiled while the looks ran), unless a
  module of the tree was already imported (`refuse_if_tree_ran`: then it ends at once);
- it imports torch, reads the spec (the protected contract, from its source: no bytecode of the
  tree's cache, which the candidate's served process writes; not the candidate's code) and draws
  on the host the inputs every config under GPU_DRAW_BYTES would draw there anyway
  (`Case.host_draw`), from the same seeds, so the values are those of a run never held;
- it waits for the file: `go` goes on (the solution imported, the CUDA context made, the calls
  profiled), `stop` leaves with nothing written.

So nothing of the candidate's tree runs, and nothing touches the GPU, while the decision's
looks are measured; the import and the draws run on a thread at the CPU's idle priority
(`in_idle_thread`, SCHED_IDLE: only CPU time no other process wants), torch on HOLD_THREADS
threads."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

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

T = TypeVar("T")

Draws = dict[tuple[str, int], tuple[tuple, dict[str, Any]]]
"""(config key, seed) -> the inputs drawn on the host for it, while held (`Case.host_draw` takes
each once)."""


def hold_file(environ: dict[str, str] | None = None) -> Path | None:
    """The go file kopt named, or None: this run is not held."""
    raw = (os.environ if environ is None else environ).get(PROFILE_HOLD_ENV, "").strip()
    return Path(raw) if raw else None


def refuse_if_tree_ran(tree: Path) -> None:
    """End the run, unacknowledged, when a module of `tree` other than the script itself was
    imported before the hold (a bench script that imports the tree's code at its top): a run
    held after that would have run the candidate's code while the decision's looks are
    measured. kopt then fails that keep's profile, saying why, and starts none ahead again in
    the run."""
    root = tree.resolve()
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if name == "__main__" or not where or not os.path.isabs(where):
            continue  # a relative name is no file the import system loaded (torch.ops: `_ops.py`)
        try:
            inside = Path(where).resolve().is_relative_to(root)
        except (OSError, ValueError):
            continue
        if inside:
            raise SystemExit(
                f"{PROFILE_HOLD_ENV}: {name} ({where}) of the tree was imported before the hold: "
                'this bench cannot be held (set [profile].ahead = "off")'
            )


def tree_root(start: Path) -> Path:
    """The git worktree `start` lies in (its nearest folder holding `.git`), else `start`: a
    bench run from a subfolder (`cd benchmark && ...`) still refuses a module of the whole tree."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def hold_until_go(go: Path, tree: Path, work: Callable[[], T]) -> tuple[bool, T]:
    """The held part of a --profile run, in order: refuse when `tree` already ran
    (`refuse_if_tree_ran`), acknowledge, `work` at the CPU's idle priority (`in_idle_thread`)
    with `tree` off the import path (`tree_off_path`), then kopt's word. Returns (go?, work's
    result): False for `stop`."""
    refuse_if_tree_ran(tree)  # before the word kopt trusts
    acknowledge(go)  # before anything else: kopt reads it as proof this run held
    with tree_off_path(tree):
        out = in_idle_thread(work)
    return wait_for_go(go), out


@contextlib.contextmanager
def tree_off_path(tree: Path) -> Iterator[None]:
    """sys.path without its entries inside `tree` ('' and the working directory among them)
    while the held work runs, then as it was (with what the work added). `import torch` tries
    optional modules (opt_einsum, dill, ...) that a module of that name in the tree would
    otherwise supply: its code would run while the decision's looks are measured (found by a
    hostile review, 2026-12-02)."""
    root = tree.resolve()
    saved = list(sys.path)
    sys.path[:] = [entry for entry in saved if not _inside(entry, root)]
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path[:] = saved + [entry for entry in sys.path if entry not in saved]
        importlib.invalidate_caches()


def _inside(entry: str, root: Path) -> bool:
    """A sys.path entry ('' is the working directory) that lies inside `root`."""
    try:
        return Path(entry or os.getcwd()).resolve().is_relative_to(root)
    except (OSError, ValueError):
        return True  # unreadable: left out while held


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


def in_idle_thread(work: Callable[[], T]) -> T:
    """`work`'s result, run on a thread of its own at SCHED_IDLE (with the threads it starts,
    torch's CPU pool among them): it takes only CPU time no other process wants. The caller's
    thread keeps its priority for the run after `go` (a thread in a sandbox's user namespace
    may not take its priority back: EPERM on the H200, 2026-12-01). Where the policy is missing
    or refused, `work` runs at the usual priority (logged). Its exception is raised here."""
    out: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        if hasattr(os, "SCHED_IDLE"):
            try:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            except OSError as exc:
                log(f"profile held at the usual priority: {exc}")
        try:
            out.append(work())
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=run, name="kopt-held")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return out[0]


def idle_threads() -> str:
    """`k of n threads at SCHED_IDLE`: this process's threads (Linux's /proc/self/task) left at the
    CPU's idle priority, for a held run's log (those the held thread started keep its policy)."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return "threads unknown"
    idle = 0
    for tid in tids:
        try:
            idle += os.sched_getscheduler(tid) == getattr(os, "SCHED_IDLE", -1)
        except OSError:
            continue
    return f"{idle} of {len(tids)} threads at SCHED_IDLE"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
