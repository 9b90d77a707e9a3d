"""Served looks: the bench answers kopt's requests on stdin, one reply line each on stdout.

One tree per process (`python bench.py --serve`, kopt's `[target].serve`; the working
directory is the tree, as for the plain bench):

    prepare N SEED      -> prepared N | unprepared N | fail N WHY
    look N SEED PATH    -> done N | done N last | fail N WHY
    audit N SEED PATH   -> audited N | fail N WHY
    load                -> loaded | fail load WHY

`look`: every config with inputs drawn from SEED (a decimal integer: the same SEED gives
bit-identical inputs in every process on the same device and software), the contract check,
then the timed blocks (Bench.timed_rows); the CSV goes to PATH, one row per config with the
config columns, `us`, `err`, `calls` (how many timed calls `us` is the per-call time of) and
the statistics; PATH.sets.json commits to every timed set's output summaries (audit.py)
before kopt draws the audit seed. The timed calls' outputs are kept until the next look; each look's timed buffers and CUDA
graphs are made anew (KEEP_BUFFERS). `done N last`: the
kept buffers passed --serve-memory of the GPU's memory; the process answers the `audit` of
look N (the only request it still takes) and leaves.
`prepare`: everything of look N at SEED but its timed blocks (Bench.prepare_look: the checks,
the timed sets' draws, and the CUDA graphs of configs at the bytes rule's calls per block:
Bench._calibrated, Bench._first_capture),
so that kopt can prepare both trees' processes at once and then time each alone: the `look N
SEED PATH` that follows times what was prepared. A bench that cannot prepare answers
`unprepared N` (its looks are whole). Another look, or a look at another seed, discards it.
`audit`: per config of look N, the timed buffer set the audit SEED picks and its outputs'
summaries (audit.py: the rule kopt shares, the JSON's fields) as JSON to PATH. Only the last
look's outputs are kept: another N is refused (`fail N`), the process stays.
`load`: the tree's function imported again (a bundled solution reads its params.json again).
A request that cannot be parsed gets `fail ? WHY` and the process goes on; an exception inside
a look or an audit gets `fail N WHY` and the process leaves (a CUDA error is sticky: kopt
starts a fresh one). EOF on stdin: the process leaves.

A process never holds two trees: the two-tree protocol (`--ab BEST CAND --serve`, `look N PATH`
and `reload`) was removed on 2026-12-01 with the harness's A/B mode, because candidate code
in one process with best's could bend best's measurement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .bench import Bench, PhaseClock, Prepared, log, why, write_csv

INTEGER = re.compile(r"-?[0-9]+")
COMMITMENT_SUFFIX = ".sets.json"
"""A look's commitment to every timed set's outputs is written to PATH + this (audit.py)."""
USAGE = "`prepare N SEED`, `look N SEED PATH`, `audit N SEED PATH` or `load`"
KEEP_BUFFERS = False
"""Whether a look replays the timed buffers and CUDA graphs of the process's first look (True)
or makes them anew (False: a new allocation, so a new placement in device memory, every look).
Measured on the H200 (experiments/process_offset.py, tuned RMSNorm, A/A, 10 fresh process pairs
x 6 looks, 2026-11-29): kept, each pair of processes carried an offset of its own for its life
(per class about 1.0% sd between pairs, pair means from -3.0% to +1.2%; within a pair 1.5-2.8%
look to look); made anew, no offset was left (between pairs 0.31-0.34%, all the looks' noise
explains) and the looks' noise fell to 0.8-0.9%, for ~0.1 s per side and look. A decision's
looks all come from one pair: an offset no number of looks averages away read as an untouched
class +1.7% [+0.2, +3.3] "slower" and split a real -11% step (docs/h100-wave3/part6-process-offset-h200.md)."""


class BadRequest(ValueError):
    """A request line that is none of the protocol's (one line: what is wrong)."""


@dataclass(frozen=True)
class Request:
    kind: str
    """"prepare", "look", "audit" or "load"."""
    n: str = ""
    seed: int = 0
    path: str = ""


def load_again(bench: Bench, reply: Callable[[str], None]) -> bool:
    """`load`: import the tree again and reply `loaded`; a tree that cannot even be imported
    gets `fail load WHY` (the process then leaves)."""
    try:
        bench.reload()
    except Exception as exc:
        log(f"load: {type(exc).__name__}: {exc}")
        reply(f"fail load {why(exc)}")
        return False
    reply("loaded")
    return True


def parse_request(line: str) -> Request | None:
    """One request line of the per-tree protocol; None for a blank line. N is a decimal
    integer (echoed in the reply as written), SEED a decimal integer, PATH the rest of the
    line (spaces allowed)."""
    text = line.strip()
    if not text:
        return None
    words = text.split(maxsplit=3)
    if words[0] == "load":
        if len(words) > 1:
            raise BadRequest(f"`load` takes no arguments: {text[:80]!r}")
        return Request("load")
    if words[0] not in ("prepare", "look", "audit"):
        raise BadRequest(f"not a request (expected {USAGE}): {text[:80]!r}")
    if words[0] == "prepare":
        if len(words) != 3:
            raise BadRequest(f"expected `prepare N SEED`: {text[:80]!r}")
        words.append("")
    elif len(words) < 4:
        raise BadRequest(f"expected `{words[0]} N SEED PATH`: {text[:80]!r}")
    _, n, seed, path = words
    if not INTEGER.fullmatch(n):
        raise BadRequest(f"{words[0]}: N must be an integer, not {n[:40]!r}")
    if not INTEGER.fullmatch(seed):
        raise BadRequest(f"{words[0]} {n}: SEED must be an integer, not {seed[:40]!r}")
    return Request(words[0], n, int(seed), path)


def serve_tree(bench: Bench, requests: Iterable[str], reply: Callable[[str], None]) -> int:
    """Answer the per-tree protocol (module docstring) until stdin ends or the process must
    leave; returns the exit status (1 after a `fail` that ends it)."""
    last: str | None = None  # the look whose timed outputs are kept
    leaving = False  # after `done N last`: only the audit of N
    ready: tuple[str, int, list[Prepared]] | None = None  # (N, SEED, its cases) after `prepare N SEED`
    for line in requests:
        try:
            req = parse_request(line)
        except BadRequest as exc:
            if leaving:
                return 0
            reply(f"fail ? {exc}")
            continue
        if req is None:
            continue
        if leaving and (req.kind != "audit" or req.n != last):
            return 0
        if req.kind == "load":
            ready = None
            if not load_again(bench, reply):
                return 1
        elif req.kind == "prepare":
            ready = None
            if not bench.prepares or KEEP_BUFFERS:
                reply(f"unprepared {req.n}")
                continue
            last, bench.looked = None, []  # audited already: its sets need not outlive the new ones' draws
            bench.clock = PhaseClock(since_process_start=False)
            try:
                ready = (req.n, req.seed, bench.prepare_look(req.seed))
            except Exception as exc:  # the harness or CUDA: the process leaves, as after a failed look
                log(f"prepare {req.n}: {type(exc).__name__}: {exc}")
                reply(f"fail {req.n} {why(exc)}")
                return 1
            log(f"prepare {req.n}: " + bench.clock.line())
            reply(f"prepared {req.n}")
        elif req.kind == "look":
            last = None
            prepared = ready[2] if ready is not None and ready[:2] == (req.n, req.seed) else None
            ready = None
            bench.clock = PhaseClock(since_process_start=False)
            try:
                rows = (
                    bench.timed_rows(req.seed, copy=False, keep=KEEP_BUFFERS)
                    if prepared is None
                    else bench.timed_rows(req.seed, copy=False, prepared=prepared)
                )
                prepared = None  # its sets live on in bench.looked (the audit's) until the next prepare or look
                bench.clock.lap("timing")
                write_csv(rows, req.path, stdout=False)
                Path(req.path + COMMITMENT_SUFFIX).write_text(json.dumps(bench.commitment()) + "\n", encoding="utf-8")
                bench.clock.lap("commit")
            except Exception as exc:  # a broken function fails its own rows: this is the harness or CUDA
                log(f"look {req.n}: {type(exc).__name__}: {exc}")
                reply(f"fail {req.n} {why(exc)}")
                return 1
            last = req.n
            log(f"look {req.n}: " + bench.clock.line())
            bench.release_cache()
            if bench.memory_full(bench.a.serve_memory):
                log(
                    f"kept buffers past {bench.a.serve_memory:.0%} of the GPU's memory, or the device short of free memory: "
                    f"leaving after look {req.n} and its audit"
                )
                reply(f"done {req.n} last")
                leaving = True
            else:
                reply(f"done {req.n}")
        else:
            if req.n != last:
                held = f"the outputs kept are look {last}'s" if last is not None else "no look's outputs are kept"
                reply(f"fail {req.n} no look {req.n} to audit here ({held})")
                continue
            try:
                text = json.dumps(bench.audit(req.seed))
                Path(req.path).write_text(text + "\n", encoding="utf-8")
            except Exception as exc:
                log(f"audit {req.n}: {type(exc).__name__}: {exc}")
                reply(f"fail {req.n} {why(exc)}")
                return 1
            reply(f"audited {req.n}")
            if leaving:
                return 0
    return 0
