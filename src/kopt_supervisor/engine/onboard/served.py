"""Serving a `triton.testing.perf_report` bench by import (kernels/harness/imported.py): tried by
`kopt init --bench` in the scratch copy it runs the bench in, and the [target] it proposes.

    import_probe(run, run_bench) -> dict      # the probe's answer (or why there is none): BenchRun.probe
    plan(run, metric) -> Plan                 # the lines to serve, or why the process-level path stays
    propose(p, table, cols, plan)             # the served [target] keys, each with its reason
    reword_checks(p)                          # after the files step: what a one-file bench leaves open
    harness_benches(repo, bench) -> [paths]   # the repo's other scripts on kopt's public harness
    not_served(run, table, plan) -> str       # why a bench stays process-level, and what would serve it

The harness module's command is the bench's own with its script run through kopt's module
(`python 05-layer-norm.py` -> `python -m kopt_supervisor.kernels.harness.imported
05-layer-norm.py --line triton`): the same interpreter, environment assignments and `cd`
prefix, so the import sees what the bench saw. The line served is the metric's line: the
column the perf_report step chose (`Triton (GB/s)`, the line not named as a reference:
steps._rank_metrics, one rule for both paths) names a line, the probe maps its name to the
line value the bench function takes. The probe (harness `--probe`) imports the bench in the
scratch copy, through the caller's run_bench (the GPU gate and the sandbox, as the bench ran),
and captures each line's first config once.

Side effects: the probe's run (through `run_bench`); the rest is pure.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.adapters.table import Table
from kopt_supervisor.engine.adapters.text import PERF_REPORT_LINE
from kopt_supervisor.engine.onboard.detect import BenchRun, Column, RunBench, candidates
from kopt_supervisor.engine.onboard.imports import BENCH_IS_KERNEL

MODULE = "kopt_supervisor.kernels.harness.imported"
"""kernels/harness/imported.py as `python -m` runs it (the engine never imports kernels)."""
PROBE_VERSION = 1
STATS = ("us_mean", "us_std", "us_min", "us_p10", "us_p90", "samples")
"""The harness's statistics columns (imported.RESERVED less us, err, calls, seed and us_last,
which engine/metrics.py reads as the metric's last block, never a config column)."""
SCRIPT_CALL = re.compile(
    r"(?P<python>(?:\S*/)?python[0-9.]*)(?P<opts>(?:\s+-[A-Za-z]\S*)*)\s+(?P<script>[^\s;&|<>]+\.py)"
    r"(?P<rest>[^;&|]*)$"
)
"""The command's last part: a Python interpreter running a script (options before it kept)."""


def harness_command(bench: str, args: str) -> tuple[str | None, str]:
    """(the bench command with its script run through kopt's module and `args` after it, ""),
    or (None, why) when its last part is not `python [options] SCRIPT.py [arguments]`."""
    m = SCRIPT_CALL.search(bench.rstrip())
    if m is None:
        return None, (
            f"its command ({bench!r}) does not end in `python SCRIPT.py`: kopt's module imports a Python script"
        )
    rest = m["rest"].strip()
    try:
        if rest:
            shlex.split(rest)
    except ValueError as exc:
        return None, f"its command's arguments cannot be split ({exc})"
    cmd = f"{bench[: m.start()]}{m['python']}{m['opts']} -m {MODULE} {m['script']} {args}".rstrip()
    return cmd, (
        "" if not rest else f"the script's own arguments ({rest}) are dropped: the import runs no __main__ block"
    )


def import_probe(run: BenchRun, run_bench: RunBench) -> dict[str, Any] | None:
    """For a run whose output holds a perf_report table: kopt's module's `--probe` run through
    `run_bench` in the run's tree; {"ok": True, "probe": doc, "seconds": s, "note": ...} or
    {"ok": False, "why": ...}. None for any other bench (nothing to try)."""
    import time

    if run.returncode != 0 or not any(c.format == "perf_report" for c in candidates(run)):
        return None
    cmd, note = harness_command(run.bench, "--probe")
    if cmd is None:
        return {"ok": False, "why": note}
    t0 = time.monotonic()
    rc, out, _ = run_bench(cmd, run.repo)
    seconds = time.monotonic() - t0
    if rc != 0:
        err = out.with_suffix(".err")
        try:
            last = [ln for ln in err.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()][-1:]
        except OSError:
            last = []
        return {
            "ok": False,
            "why": f"kopt's import of the bench failed (exit {rc}" + (f": {last[0][:300]}" if last else "") + ")",
            "command": cmd,
        }
    try:
        doc = json.loads(out.read_text(encoding="utf-8").strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as exc:
        return {"ok": False, "why": f"kopt's import probe printed no JSON ({exc})", "command": cmd}
    if not isinstance(doc, dict) or doc.get("version") != PROBE_VERSION or not isinstance(doc.get("benchmarks"), list):
        return {"ok": False, "why": f"kopt's import probe answered no probe of version {PROBE_VERSION}", "command": cmd}
    return {"ok": True, "probe": doc, "seconds": round(seconds, 3), "note": note}


@dataclass(frozen=True)
class Plan:
    lines: tuple[str, ...] = ()
    """The line values to serve (`--line`), empty when not served."""
    why: str = ""
    """Why the process-level path stays (when `lines` is empty and a probe was tried)."""
    note: str = ""
    config: tuple[str, ...] = ()
    """The served CSV's config columns."""
    seconds: float = float("nan")
    """The probe's wall time (import and one call per line)."""


def plan(run: BenchRun, metric: str) -> Plan | None:
    """What to serve for the chosen perf_report metric column, from the run's probe; None when
    nothing was tried (not a perf_report bench)."""
    found = run.probe
    if found is None:
        return None
    if not found.get("ok"):
        return Plan(why=str(found.get("why") or "the import probe failed"))
    m = PERF_REPORT_LINE.match(metric)
    if m is None:
        return Plan(why=f"the metric {metric!r} is not a perf_report line column")
    name = m["line"]
    doc = found["probe"]
    lines = [
        line
        for b in doc["benchmarks"]
        if isinstance(b, dict)
        for line in b.get("lines", [])
        if isinstance(line, dict) and name in (line.get("name"), line.get("value"))
    ]
    if not lines:
        return Plan(why=f"the import found no line named {name!r} in the bench's perf_report benchmarks")
    failed = [line for line in lines if not line.get("captured")]
    if failed:
        return Plan(why=f"the line {name!r} cannot be timed by kopt: {failed[0].get('why') or 'nothing captured'}")
    values = tuple(dict.fromkeys(str(line["value"]) for line in lines))
    return Plan(
        values,
        note=str(found.get("note") or ""),
        config=tuple(str(c) for c in doc.get("config_columns", [])),
        seconds=float(found.get("seconds", float("nan"))),
    )


def propose(p: Any, table: Table, cols: list[Column], chosen: Plan, class_by: list[str], class_why: str) -> None:
    """The served [target] keys for `chosen` (its lines), replacing the process-level ones the
    perf_report steps proposed; `class_by` as the steps chose it from the perf_report table."""
    t = p.target
    old_metric = t.get("metric", "")
    line_args = " ".join(f"--line {shlex.quote(v)}" for v in chosen.lines)
    bench, _ = harness_command(p.run.bench, line_args)
    assert bench is not None  # the probe ran with the same command
    t.pop("format", None)
    p.adapter.pop("table", None)
    t.update(
        bench=bench,
        serve=f"{bench} --serve",
        csv="-",
        metric="us",
        direction="min",
        correct="err <= 1",
        config=list(chosen.config),
        ignore=[*STATS, "calls", "seed"],
        calls="calls",
        class_by=class_by,
    )
    roofline = p.sections.get("roofline", {})
    roofline.pop("unit_scale", None)  # the perf_report line's unit; `us` is kopt's
    if not roofline:
        p.sections.pop("roofline", None)
    p.comments["target.bench"] = (
        f"your bench's script imported by kopt's module (kernels/harness/imported.py): the perf_report function "
        f"called per config and line {', '.join(chosen.lines)} (the line of {old_metric!r}), its do_bench callable "
        "captured and timed by kopt's own timer, never do_bench's time budget (docs/byo-kernel.md, \"Served by "
        'import")' + (f"; {chosen.note}" if chosen.note else "")
    )
    p.comments["target.serve"] = (
        "served looks: one process per tree imports the bench once and answers kopt's "
        "looks and audits (docs/files.md); kopt compares the two trees' timed outputs "
        "itself"
    )
    p.comments["target.metric"] = (
        "`us`: kopt's median µs per call of the captured callable over the timed blocks "
        "(CUDA graphs, L2 flushed; CPU timings on the interpreter); what the bench "
        "function returns is never read"
    )
    p.comments["target.correct"] = (
        "err is inf when the benchmark function raised, called no do_bench, or its timed "
        "outputs hold NaN/Inf; the bench's own check runs at import; kopt's audit "
        "compares the outputs with best's"
    )
    p.comments["target.config"] = "the perf_report x_names, the line argument, and the benchmark's fixed args"
    p.comments["target.class_by"] = class_why
    p.comments["target.calls"] = (
        "the timed calls each row's `us` stands for: kopt weighs the time a candidate "
        "claims to save against what the OS saw its process spend"
    )
    p.comments.pop("target.format", None)
    p.comments["target.direction"] = "a time: less is better"
    p.comments["target.ignore"] = "the served CSV's statistics beside `us`, the timed calls and the look's seed"
    p.comments["target.csv"] = "the served CSV on stdout (a look's CSV goes to the file kopt names)"
    p.sections.setdefault("profile", {})["command"] = f"{bench} --profile"
    p.comments["profile.command"] = (
        "what a profiler runs: each config's captured callable twice in its NVTX/roctx range; no timing, no comparison"
    )


def reword_checks(p: Any) -> None:
    """After the files step: a bench that is its own kernel module is no hole for timing here
    (kopt's module times it), so the scan's warning says what is left instead."""
    p.checks = [
        (
            c.split(" ", 1)[0] + " holds both the kernel and the benchmark function: a candidate may edit "
            "the function too. Served by import, its timing is never used, and a candidate that draws other "
            "inputs or measures another mode fails kopt's comparison with best's outputs; the bench's own check "
            'at import is the candidate\'s, though (docs/byo-kernel.md, "Served by import")'
        )
        if BENCH_IS_KERNEL in c
        else c
        for c in p.checks
    ]


HARNESS_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+kopt_supervisor\.kernels[ \t]+import[ \t]+[^\n]*\bharness\b"
    r"|from[ \t]+kopt_supervisor\.kernels\.harness\b|import[ \t]+kopt_supervisor\.kernels\.harness\b)",
    re.M,
)
HARNESS_MAIN = re.compile(r"\bharness\.main[ \t]*\(|^[ \t]*(?:raise[ \t]+SystemExit\()?main[ \t]*\([ \t]*SPEC\b", re.M)
SCAN_MAX_BYTES = 200_000
"""A script larger than this is no ~30-line harness bench: not read."""


def harness_benches(repo: Path, bench: str) -> list[str]:
    """The Python scripts at the repo's top or one folder down (hidden folders aside) that
    import kopt's public harness and hand it their Spec (`harness.main(SPEC)`), other than
    the one `bench` runs: benches kopt serves ([target].serve). Read as text, never imported."""
    m = SCRIPT_CALL.search(bench.rstrip())
    ran = m["script"].removeprefix("./") if m else ""
    found: list[str] = []
    for path in sorted([*repo.glob("*.py"), *repo.glob("*/*.py")]):
        rel = path.relative_to(repo).as_posix()
        if rel == ran or any(part.startswith(".") for part in path.relative_to(repo).parts):
            continue
        try:
            if path.stat().st_size > SCAN_MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if HARNESS_IMPORT.search(text) and HARNESS_MAIN.search(text):
            found.append(rel)
    return found


def not_served(run: BenchRun, table: Table, chosen: Plan | None) -> str:
    """Why `kopt init --bench` proposes process-level looks for this bench (each look a whole
    run of it), and what would be served instead: a script of the repo on kopt's harness
    (named, with the command to onboard it), else the two kinds of bench kopt serves."""
    if chosen is not None:
        why = f"kopt could not serve this perf_report bench by import: {chosen.why}"
    elif table.format == "perf_report":
        why = "kopt did not try to serve this perf_report bench by import (no probe ran)"
    else:
        why = (
            f"its output is a {table.format} table, not the CSV of kopt's harness (us, err, prod, seed): kopt "
            "serves looks only from a bench on its public harness ([target].serve) and from a triton "
            "perf_report bench (by import)"
        )
    others = harness_benches(run.repo, run.bench)
    if not others:
        return (
            f"process-level looks (each a whole run of the bench): {why}. A ~30-line bench on kopt's harness "
            '(docs/byo-kernel.md, "kopt\'s public harness") is served: a decision in seconds'
        )
    m = SCRIPT_CALL.search(run.bench.rstrip())
    python = m["python"] + m["opts"] if m else "python"
    names = ", ".join(others)
    return (
        f"process-level looks (each a whole run of the bench): {why}. This repo holds {names}, "
        f"{'a bench' if len(others) == 1 else 'benches'} on kopt's harness (harness.main(SPEC)): "
        f'`kopt init --bench "{python} {others[0]}"` proposes it served, one process per tree '
        "answering kopt's looks, a decision in seconds instead of rounds of two whole runs"
    )
