"""A served bench's process started before its tree exists: kopt's spare (engine/loop/served_trees.py).

    python -c "import sys; sys.path.pop(0); import runpy; runpy.run_module('kopt_supervisor.kernels.harness.spare', run_name='__main__')"

With engine/loop/served_trees.py's SPARES on (off by default: on the H200 it slowed the
candidate's profile, docs/h100-wave3/part20-spares-batched-commitments-h200.md), kopt starts the
candidate's next process while the last decision's keep is still being profiled, before the
proposer has written the tree it will measure. The process imports what a served
bench's start spends its seconds on (torch, Triton, kopt's harness: ~2 s of a 5 s start on the
H200) and waits, touching no GPU. Nothing of any tree is on its import path meanwhile: the
command above drops the working directory from sys.path before importing anything.

Its first line on stdin is `run JSON`, JSON being `{"cwd": DIR, "argv": [SCRIPT, ARG...]}`:
it then runs SCRIPT from DIR as `python SCRIPT ARG...` would (DIR its working directory,
SCRIPT's folder first on sys.path, sys.argv, SCRIPT as `__main__`), and SCRIPT answers the
serve protocol on the same stdin from the next line on. From that line the process is the candidate's, as one kopt started
in its tree would be; before it, no code of a tree has run in it. A line that is not `run JSON`
is answered `fail ? WHY` and the process leaves (exit 2); so does a spare whose stdin ends.
"""

from __future__ import annotations

import builtins
import importlib
import json
import os
import sys
import time
import types

RUN = "run"
SPARE_RAN_AT_ENV = "KOPT_SPARE_RAN_AT"
"""Set when the spare runs its bench: CLOCK_BOOTTIME seconds (bench.process_age_s counts the
bench's start from it)."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_run(line: str) -> tuple[str, list[str]]:
    """(DIR, [SCRIPT, ARG...]) of a `run JSON` line; ValueError naming what is wrong."""
    word, _, rest = line.strip().partition(" ")
    if word != RUN:
        raise ValueError(f"expected `{RUN} JSON`, not {line.strip()[:80]!r}")
    try:
        spec = json.loads(rest)
    except json.JSONDecodeError as exc:
        raise ValueError(f"`{RUN}`: not JSON ({exc.msg})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("cwd"), str):
        raise ValueError(f"`{RUN}`: JSON object with a string `cwd` expected")
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"`{RUN}`: `argv` must be a non-empty list of strings")
    return spec["cwd"], argv


PRELOAD = ("torch", "triton", "kopt_supervisor.kernels.harness")
"""What a served bench imports first (torch's import: 1.5-2 s of a served process's start on the
H200), none of it from a tree; a module this interpreter lacks is skipped."""


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def main() -> int:
    t0 = time.perf_counter()
    preload()
    t1 = time.perf_counter()
    line = sys.stdin.readline()
    if not line:
        return 2
    log(f"spare: preloaded in {t1 - t0:.2f} s, then waited {time.perf_counter() - t1:.2f} s for its bench")
    try:
        cwd, argv = parse_run(line)
    except ValueError as exc:
        sys.stdout.write(f"fail ? {exc}\n")
        sys.stdout.flush()
        return 2
    os.chdir(cwd)
    os.environ[SPARE_RAN_AT_ENV] = repr(time.clock_gettime(time.CLOCK_BOOTTIME))  # the bench's "start" phase
    run_script(argv)
    return 0


def run_script(argv: list[str]) -> None:
    """`python SCRIPT ARG...` in this process: sys.argv as given, SCRIPT's folder first on
    sys.path, SCRIPT run as the module `__main__` (its absolute path its `__file__`)."""
    script = os.path.abspath(argv[0])
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(script))
    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec")
    exec(code, main.__dict__)


if __name__ == "__main__":
    sys.exit(main())
