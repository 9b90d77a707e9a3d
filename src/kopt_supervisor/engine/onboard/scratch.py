"""Where `kopt init --bench` runs the bench, what it keeps of the run, and serving a
`triton.testing.perf_report` bench by import (kernels/harness/imported.py), tried in that run's
copy, with the [target] it proposes.

    run = run_in_scratch(top, commit, bench, run_bench, scratch)   # never in the user's checkout
    run = save_draft(run, draft, commit)                            # outputs kept in the workspace root
    run = load_draft(draft, top, bench, commit)                     # the same run, or None
    import_probe(run, run_bench) -> dict      # the probe's answer (or why there is none): BenchRun.probe
    plan(run, metric) -> Plan                 # the lines to serve, or why the process-level path stays
    propose_served(p, table, cols, plan)      # the served [target] keys, each with its reason
    reword_checks(p)                          # after the files step: what a one-file bench leaves open
    harness_benches(repo, bench) -> [paths]   # the repo's other scripts on kopt's public harness
    not_served(run, table, plan) -> str       # why a bench stays process-level, and what would serve it

The bench runs in a copy of the commit's tracked files (gitops.export_tree), as it will run
in the run's worktrees: the user's checkout is never written to, whatever the bench writes.
A tracked file the bench wrote (a results CSV it appends to, with the file's whole history in
it) is taken out and the bench run once more without it, so the file holds this run's rows
only; the proposal then names it in [target].untrack, and every run of the loop starts
without it too (the run's baseline is a commit of kopt's own without the file).

For a perf_report bench, kopt's module then imports it in the same copy (`with_import_probe`):
whether the bench can be served by import is measured where it ran. The harness module's
command is the bench's own with its script run through kopt's module (`python
05-layer-norm.py` -> `python -m kopt_supervisor.kernels.harness.imported 05-layer-norm.py
--line triton`): the same interpreter, environment assignments and `cd` prefix, so the import
sees what the bench saw. The line served is the metric's line: the column the perf_report
step chose (`Triton (GB/s)`, the line not named as a reference: steps._rank_metrics, one rule
for both paths) names a line, the probe maps its name to the line value the bench function
takes. The probe (harness `--probe`) imports the bench in the scratch copy, through the
caller's run_bench (the GPU gate and the sandbox, as the bench ran), and captures each line's
first config once.

The draft keeps the measured run (its stdout, the files it wrote, its duration, the probe) beside the
proposed kopt.toml, so `kopt init --bench ... --answer ...` or `--yes` after a first attempt
reuses it instead of running the bench again; a different bench command or HEAD measures
anew.

`run_once` runs the bench once, timed; `local_run_bench` is a plain `run_bench` (its process
group, a log, what it wrote: `tree_stamps` before and `written_since` after) for tests and
as the body to wrap.

Side effects: the copy, the bench runs and the probe's run (through `run_bench`), the draft's
files; the served [target] and the reasons are pure.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.adapters.benchmarks import PERF_REPORT_LINE
from kopt_supervisor.engine.adapters.table import Table
from kopt_supervisor.engine.onboard.detect import BenchRun, Column, RunBench, candidates
from kopt_supervisor.engine.onboard.draft import BENCH_IS_KERNEL

MAX_KEPT_BYTES = 64 << 20
DRAFT_RUN = "run.json"


def run_in_scratch(top: Path, commit: str, bench: str, run_bench: RunBench, scratch: Path) -> BenchRun:
    """The bench run in `scratch`/tree, a copy of `commit`'s tracked files; again without the
    tracked files it wrote, when it wrote any (see the module docstring)."""
    from kopt_supervisor.engine import gitops

    tree = gitops.export_tree(top, commit, scratch / "tree")
    tracked = set(tree_stamps(tree))
    first = run_once(tree, bench, run_bench)
    first = replace(first, repo=tree)
    rewritten = sorted({first.rel(f) for f in first.files_written} & tracked)
    if first.returncode != 0:
        return first
    if rewritten:
        for rel in rewritten:
            (tree / rel).unlink(missing_ok=True)
        first = replace(run_once(tree, bench, run_bench), repo=tree, untracked=tuple(rewritten))
    return with_import_probe(first, run_bench, scratch)


def with_import_probe(run: BenchRun, run_bench: RunBench, scratch: Path) -> BenchRun:
    """The run with its import probe (`import_probe`), tried in the same copy after it;
    the run's stdout and stderr are kept aside first (run_bench logs every command under one
    name)."""
    if run.returncode != 0:
        return run
    kept = scratch / "bench.out"
    shutil.copyfile(run.stdout_path, kept)
    err = run.stdout_path.with_suffix(".err")
    if err.is_file():
        shutil.copyfile(err, kept.with_suffix(".err"))
    run = replace(run, stdout_path=kept)
    return replace(run, probe=import_probe(run, run_bench))


def save_draft(run: BenchRun, draft: Path, commit: str) -> BenchRun:
    """Keep the run's stdout and the files it wrote (regular files up to MAX_KEPT_BYTES;
    never through a link) in `draft`, with run.json; the run as read back from there."""
    out = draft / "outputs"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    kept: list[str] = []
    for f in run.files_written:
        rel = run.rel(f)
        src = run.outputs / rel
        try:
            st = src.lstat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_KEPT_BYTES or rel.startswith(("/", "..")):
            continue
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out / rel)
        kept.append(rel)
    stdout = draft / "stdout.out"
    shutil.copyfile(run.stdout_path, stdout)
    err = run.stdout_path.with_suffix(".err")
    if err.is_file():
        shutil.copyfile(err, stdout.with_suffix(".err"))
    meta = {
        "bench": run.bench,
        "commit": commit,
        "returncode": run.returncode,
        "seconds": run.seconds,
        "files_written": kept,
        "untracked": list(run.untracked),
        "measured_at": time.time(),
        "probe": run.probe,
    }
    (draft / DRAFT_RUN).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return replace(run, stdout_path=stdout, files_written=tuple(Path(k) for k in kept), out_dir=out)


def load_draft(draft: Path, top: Path, bench: str, commit: str) -> BenchRun | None:
    """The run a draft kept, for the same bench command at the same commit; else None."""
    try:
        meta = json.loads((draft / DRAFT_RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("bench") != bench or meta.get("commit") != commit:
        return None
    if meta.get("returncode") != 0 or not (draft / "stdout.out").is_file():
        return None  # a failed run is measured again (it may have been the machine's fault)
    probe = meta.get("probe")
    return BenchRun(
        bench,
        top,
        0,
        draft / "stdout.out",
        tuple(Path(f) for f in meta.get("files_written", [])),
        float(meta.get("seconds", float("nan"))),
        draft / "outputs",
        tuple(str(u) for u in meta.get("untracked", [])),
        probe if isinstance(probe, dict) else None,
    )


def measured_at(draft: Path) -> str:
    """When the draft's run was measured (for the line saying it is reused)."""
    try:
        t = float(json.loads((draft / DRAFT_RUN).read_text(encoding="utf-8"))["measured_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return "earlier"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


# ---------------------------------------------------------------------------------------
# Running the bench once, and what it wrote


Stamps = dict[str, tuple[int, int, int]]
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def tree_stamps(root: Path) -> Stamps:
    """Every regular file under `root` (outside .git, caches and virtualenvs; symbolic links
    skipped): relative path -> (mtime_ns, size, inode), to tell afterwards which files a run
    wrote."""
    out: Stamps = {}
    root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # a link the bench made points anywhere: never read through it
            out[p.relative_to(root).as_posix()] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return out


def written_since(root: Path, before: Stamps) -> list[Path]:
    """Files under `root` created or changed since `before` (tree_stamps), relative paths."""
    after = tree_stamps(root)
    return [Path(k) for k, v in sorted(after.items()) if before.get(k) != v]


def local_run_bench(log_dir: Path, *, timeout_s: float = 900.0, env: dict[str, str] | None = None) -> RunBench:
    """A run_bench that runs the command in its process group (engine.runner), logs to
    `log_dir`, and reports the files it wrote. No gate, no sandbox: wrap it for those."""
    from kopt_supervisor.engine.runner.command import run as run_command

    def run_bench(cmd: str, cwd: Path) -> tuple[int, Path, list[Path]]:
        before = tree_stamps(cwd)
        res = run_command(cmd, cwd=cwd, log_dir=log_dir, name="init_bench", timeout_s=timeout_s, env=env)
        return (res.returncode if res.returncode is not None else -1), res.stdout_path, written_since(cwd, before)

    return run_bench


def run_once(repo: Path, bench: str, run_bench: RunBench) -> BenchRun:
    """Run the bench once in `repo` through `run_bench`, timed."""
    t0 = time.monotonic()
    rc, stdout_path, files = run_bench(bench, repo)
    seconds = time.monotonic() - t0
    return BenchRun(bench, repo, rc, Path(stdout_path), tuple(Path(f) for f in files), seconds)


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


PROBED = ("perf_report", "long")
"""The tables whose bench kopt's module may import: a perf_report table, and the long format
of Liger-Kernel's benches (their `run_benchmarks` convention, kernels/harness/liger_convention.py)."""


def kind_of(table_format: str) -> str:
    """A table format of PROBED as a message names its bench ("perf_report", "long-format")."""
    return "long-format" if table_format == "long" else table_format


def import_probe(run: BenchRun, run_bench: RunBench) -> dict[str, Any] | None:
    """For a run whose output holds a table of PROBED: kopt's module's `--probe` run through
    `run_bench` in the run's tree; {"ok": True, "probe": doc, "seconds": s, "note": ...} or
    {"ok": False, "why": ...}. None for any other bench (nothing to try)."""
    import time

    if run.returncode != 0 or not any(c.format in PROBED for c in candidates(run)):
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
    """What to serve for the chosen metric column (a perf_report line's, or a long table's
    `<provider> <metric> (<unit>)`), from the run's probe; None when nothing was tried (no
    table of PROBED)."""
    found = run.probe
    if found is None:
        return None
    if not found.get("ok"):
        return Plan(why=str(found.get("why") or "the import probe failed"))
    m = PERF_REPORT_LINE.match(metric)
    if m is None:
        return Plan(why=f"the metric {metric!r} is not a line's column (`<line> (<unit>)`)")
    name = m["line"]
    doc = found["probe"]
    prefix = doc.get("convention") == "liger"  # the long table's column: `<provider> <metric name>`
    lines = [
        line
        for b in doc["benchmarks"]
        if isinstance(b, dict)
        for line in b.get("lines", [])
        if isinstance(line, dict) and names_line(name, line, prefix)
    ]
    if not lines:
        return Plan(why=f"the import found no line named {name!r} in the bench's benchmarks")
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


def names_line(name: str, line: dict[str, Any], prefix: bool) -> bool:
    """The metric column's line `name` is this probe line (its name or value; with `prefix`,
    also the name or value followed by a word: Liger's `liger speed` is the provider `liger`)."""
    ids = [str(v) for v in (line.get("name"), line.get("value")) if v is not None]
    return name in ids or (prefix and any(name.startswith(f"{i} ") for i in ids))


def propose_served(p: Any, table: Table, cols: list[Column], chosen: Plan, class_by: list[str], class_why: str) -> None:
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
        f"your bench's script imported by kopt's module (kernels/harness/imported.py): its benchmark function "
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
        why = f"kopt could not serve this {kind_of(table.format)} bench by import: {chosen.why}"
    elif table.format == "perf_report":
        why = "kopt did not try to serve this perf_report bench by import (no probe ran)"
    else:
        why = (
            f"its output is a {table.format} table, not the CSV of kopt's harness (us, err, prod, seed): kopt "
            "serves looks only from a bench on its public harness ([target].serve), from a triton "
            "perf_report bench and from a Liger-Kernel `run_benchmarks` bench (both by import)"
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
