"""The steps of a proposal, in the order `propose` takes them: which table, kopt's own
harness, the metric and its direction, the correctness rule, the config and class columns,
protected files and sources. Each fills its part of the `Proposal` from the table's
classified columns (onboard/detect.py) with the reason for every choice, or adds a
`Question` where the output does not settle it. Pure apart from reading the bench's source
files (the static import scan).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.adapters.table import RATE, TIME, Table
from kopt_supervisor.engine.metrics import close_name, describe_classes
from kopt_supervisor.engine.onboard.detect import (
    CONFIG,
    ERROR,
    FLAG,
    METRIC,
    PRODUCTION,
    TRUE_WORDS,
    BenchRun,
    Candidate,
    Column,
    classify,
    dtype_like,
    words,
)
from kopt_supervisor.engine.onboard.draft import Choice, Proposal, Question, scan
from kopt_supervisor.engine.onboard.scratch import DRAFT_RUN

HARNESS_STATS = ("us_mean", "us_std", "us_min", "us_p10", "us_p90", "samples")
HARNESS_EXTRA = ("calls", "gbps", "copy_us", "copy_gbps", "pct_copy", "prod", "seed", "model")
"""kopt's harness CSV columns beside config, `us` and `err` (kernels/harness/bench.py's STATS
and EXTRA; a test checks they agree: the engine never imports kernels)."""
STAT_ORDER = ("median", "p50", "", "mean", "avg", "average", "min", "max")
MAX_CLASSES = 8


def _choose_table(
    run: BenchRun, found: list[Candidate], answers: Mapping[str, str]
) -> tuple[Candidate | None, Question | None, str]:
    if "table" in answers:
        want = answers["table"]
        pick = [c for c in found if want in (c.key, c.key.removeprefix("file:"), c.csv)]
        if not pick:
            raise BadInput(
                f"--answer table={want!r} names no table found; candidates: {', '.join(c.key for c in found) or 'none'}"
            )
        return pick[0], None, "your answer"
    if "metric" in answers:  # the metric answered: the tables that have it, whatever kopt thinks of it
        named = [c for c in found if answers["metric"] in c.table.columns]
        if not named and found:
            raise BadInput(unknown_metric(run, answers["metric"], [c.table for c in found]))
        if len(named) == 1:
            return named[0], None, f"the table with the column {answers['metric']!r} you answered"
        if named:
            found = named
    measured = [
        c
        for c in found
        if any(col.role == METRIC for col in classify(c.table))
        or "metric" in answers
        and answers["metric"] in c.table.columns
    ]
    if not measured:
        return None, None, ""
    files = [c for c in measured if c.from_file]
    if len(files) == 1:
        why = "the table the bench wrote to a file (read exactly, where a printed table is read by its layout)"
        return files[0], None, why
    pool = files or measured
    if len(pool) == 1:
        return pool[0], None, "the only table with a time or rate column in the bench's output"
    q = Question(
        "table",
        "Which table holds the results kopt should optimise?",
        tuple(Choice(c.key, c.label()) for c in pool),
        f"the bench's output holds {len(pool)} tables with measurements and different columns",
    )
    return None, q, ""


def metric_names(table: Table) -> list[str]:
    """The names a metric can take in `table`: the columns its adapter or kopt's reading of
    their names and units makes measurements (times, rates), in the table's order; where
    there are none, its numeric columns (a unitless measurement answered with its direction)."""
    cols = classify(table)
    named = [c.name for c in cols if c.role == METRIC and c.numeric]
    return named or [c.name for c in cols if c.numeric and c.role not in (CONFIG, ERROR, FLAG, PRODUCTION)]


def unknown_metric(run: BenchRun, name: str, tables: list[Table]) -> str:
    """The one line of `kopt init --bench --answer metric=NAME` naming no column of the bench's
    tables: the answer, the adapter and file read, a close match, the available names, and
    what init kept (the measured run, when the draft keeps it; nothing else is created)."""
    available = list(dict.fromkeys(n for t in tables for n in metric_names(t)))
    others = [c for t in tables for c in t.columns if c not in available]
    guess = close_name(name, available, others)
    by_format: dict[str, list[str]] = {}
    for t in tables:
        srcs = by_format.setdefault(t.format, [])
        if (t.source or "the output") not in srcs:
            srcs.append(t.source or "the output")
    read = ", or ".join(f"the {fmt} adapter produces from {' and '.join(srcs)}" for fmt, srcs in by_format.items())
    shown = ", ".join(available[:12]) + (f" (+{len(available) - 12} more)" if len(available) > 12 else "")
    kept = (
        f"; the measured run is kept in {run.stdout_path.parent} and reused by the next `kopt init --bench` "
        "with the same command (nothing else was created)"
        if (run.stdout_path.parent / DRAFT_RUN).is_file()
        else "; nothing was created"
    )
    return (
        f"kopt init --bench: --answer metric={name!r}: no such column among those {read}"
        + (f"; did you mean {guess!r}?" if guess else ";")
        + f" available: {shown or 'none'}{kept}"
    )


def _rank_metrics(
    cols: list[Column], table: Table, kernel_words: frozenset[str] = frozenset()
) -> tuple[list[Column], list[str]]:
    """The metric candidates left after the rules that narrow them, and the rules applied.
    `kernel_words`: words of the repo's name and of the kernel modules the bench imports: a
    metric column naming one of them (`liger speed (ms)` in Liger-Kernel) times the kernel,
    the others (`huggingface speed (ms)`) another implementation."""
    cands = [c for c in cols if c.role == METRIC and c.numeric]
    notes: list[str] = []
    ours = [c for c in cands if not c.reference]
    if ours and len(ours) < len(cands):
        dropped = [c.name for c in cands if c.reference]
        notes.append(
            f"{', '.join(dropped)} name{'s' if len(dropped) == 1 else ''} a reference implementation (ignored)"
        )
        cands = ours
    times = [c for c in cands if c.kind == TIME]
    if times and len(times) < len(cands):
        notes.append(
            "a time is preferred over the rates of the same run "
            f"({', '.join(c.name for c in cands if c.kind != TIME)} ignored)"
        )
        cands = times
    if table.format == "google-benchmark":
        real = [c for c in cands if c.name.startswith("real_")]
        if real and len(real) < len(cands):
            notes.append(
                "Google Benchmark: real time (wall clock, or the manual CUDA-event time with "
                "UseManualTime) is what a GPU kernel takes; cpu_time is host time"
            )
            cands = real
    if len(cands) > 1 and kernel_words:
        own = [c for c in cands if set(words(c.name)) & kernel_words]
        if own and len(own) < len(cands):
            notes.append(
                f"{', '.join(c.name for c in own)} names the kernel the bench imports "
                f"({', '.join(sorted(set().union(*(set(words(c.name)) for c in own)) & kernel_words))}); "
                f"{', '.join(c.name for c in cands if c not in own)} another implementation (ignored)"
            )
            cands = own
    if len(cands) > 1:
        by_stat = {c.statistic for c in cands}
        if len(by_stat) > 1:
            best = min(by_stat, key=lambda s: STAT_ORDER.index(s) if s in STAT_ORDER else len(STAT_ORDER))
            kept = [c for c in cands if c.statistic == best]
            if kept and len(kept) < len(cands):
                notes.append(f"the {best or 'plain'} statistic is preferred (robust to a stray slow sample)")
                cands = kept
    return cands, notes


def _is_harness(table: Table) -> bool:
    return {"us", "err", "prod", "seed", *HARNESS_STATS} <= set(table.columns)


def _tolerance(c: Column, table: Table) -> str:
    vals = [float(v) for v in table.frame[c.name] if isinstance(v, int | float) and math.isfinite(float(v))]
    if c.all_zero or not vals:
        return f"{c.name} == 0"
    worst = max(abs(v) for v in vals)
    tol = float(f"{worst * 10:.1g}")
    return f"{c.name} <= {tol!r}"


def _flag_rule(c: Column, table: Table) -> str | None:
    vals = [v for v in table.frame[c.name].dropna().tolist()]
    bad = bool(
        set(words(c.name))
        & {"fail", "failed", "fails", "failure", "failures", "wrong", "invalid", "incorrect", "error", "errors"}
    )
    if table.format == "google-benchmark" and c.name == "error":
        return 'error == ""'
    if all(isinstance(v, bool | int | float) for v in vals):
        return f"{c.name} == 0" if bad else f"{c.name} == 1"
    seen = sorted({str(v).strip() for v in vals})
    good = [v for v in seen if v.lower() in TRUE_WORDS]
    if bad:
        falses = [v for v in seen if v.lower() not in TRUE_WORDS]
        return f"{c.name} == {json.dumps(falses[0])}" if len(falses) == 1 else None
    return f"{c.name} == {json.dumps(good[0])}" if len(good) == 1 else None


def _pow2_mixed(c: Column, table: Table) -> bool:
    """A dimension holding both powers of two and other sizes (a tile fits some exactly)."""
    vals = [
        int(v) for v in table.frame[c.name].dropna() if isinstance(v, int | float) and float(v).is_integer() and v > 0
    ]
    pow2 = {v & (v - 1) == 0 for v in vals}
    return pow2 == {True, False}


def _classes(config_cols: list[Column], table: Table) -> tuple[list[str], str]:
    """Class columns: at most MAX_CLASSES classes, each of at least two configs on average."""
    n_rows = len(table.frame)
    chosen: list[Column] = []
    why: list[str] = []
    product = 1

    def add(c: Column, reason: str) -> None:
        nonlocal product
        n = max(c.distinct, 1)
        if product * n <= MAX_CLASSES and (n_rows >= 2 * product * n or dtype_like(c)):
            chosen.append(c)
            product *= n
            why.append(f"{c.name} ({reason})")

    for c in config_cols:
        if dtype_like(c) and c.distinct > 1:
            add(c, "each dtype runs its own code")
    for c in config_cols:
        if c not in chosen and not c.numeric and 2 <= c.distinct <= 4:
            add(c, f"{c.distinct} kinds of config")
    dims = [c for c in config_cols if c not in chosen and c.numeric and 2 <= c.distinct <= 3]
    for c in sorted(dims, key=lambda c: (not _pow2_mixed(c, table), c.distinct)):
        add(
            c,
            f"{c.distinct} sizes shared by several configs"
            + ("; powers of two and other sizes take different tiles" if _pow2_mixed(c, table) else ""),
        )
    if chosen:
        return [c.name for c in chosen], (
            "Classes: configs a change should affect alike; kopt decides per class. From " + "; ".join(why) + "."
        )
    return [], (
        f"{describe_classes([]).capitalize()}: no dtype or few-valued column to split the configs by. "
        "If the kernel takes "
        "another path for some configs (a row that fits one tile or not, a power-of-two size or "
        "not), print that as a column from the bench and list it in class_by."
    )


def _propose_harness(p: Proposal, table: Table, cols: list[Column]) -> None:
    t = p.target
    bench = p.run.bench
    config = [c.name for c in cols if c.name not in {"us", "err", *HARNESS_STATS, *HARNESS_EXTRA}]
    t.update(
        metric="us",
        direction="min",
        correct="err <= 1",
        config=config,
        ignore=[*HARNESS_STATS, *HARNESS_EXTRA],
        production="prod == 1",
    )
    dclass = [c for c in ("dclass",) if c in table.columns]
    dtypes = [c.name for c in cols if c.name in config and dtype_like(c)]
    t["class_by"] = dclass or dtypes or config
    t["serve"] = f"{bench} --serve"
    t["serve_prepare"] = True  # kopt's harness answers `prepare`
    if "calls" in table.columns:  # an older harness printed no calls column
        t["calls"] = "calls"
    p.comments["target.metric"] = (
        "kopt's harness CSV: `us` is the median µs per call over the timed "
        "blocks (CUDA graphs, L2 flushed; CPU timings on the interpreter)"
    )
    p.comments["target.correct"] = (
        "the harness's contract: err = max |y - ref| / (atol + rtol |ref|) "
        "against your fp64 reference, outputs poisoned, NaN/Inf counted"
    )
    p.comments["target.class_by"] = (
        "the spec's class column"
        if dclass
        else "one class per dtype (each runs its own code); list your own class columns here (the Spec's class_by)"
        if dtypes
        else "every config its own class (list your class columns here)"
    )
    p.comments["target.serve"] = (
        "served looks: one process per tree answers kopt's looks and audits "
        "(docs/files.md); a decision costs seconds, not minutes, and kopt compares "
        "the two trees' outputs itself"
    )
    p.comments["target.calls"] = (
        "the timed calls each row's `us` stands for: kopt weighs the time a "
        "candidate claims to save against what the OS saw its process spend"
    )
    p.comments["target.production"] = "the harness marks production configs (and the CPU's small ones) prod = 1"
    p.sections.setdefault("profile", {})["command"] = f"{bench} --profile"
    p.comments["profile.command"] = (
        "what a profiler runs: each solution twice per config in its NVTX/roctx range; "
        "no reference, no check, no timing"
    )
    p.sections["decide"] = {"production_verdicts": True}
    p.comments["decide.production_verdicts"] = "production configs vote, the regression grid guards (docs/decision.md)"


def _propose_metric(p: Proposal, table: Table, cols: list[Column], answers: Mapping[str, str]) -> bool:
    t = p.target
    names = {c.name: c for c in cols}
    if "metric" in answers:
        name = answers["metric"]
        if name not in names:
            raise BadInput(unknown_metric(p.run, name, [table]))
        metric, why = names[name], "your answer"
    else:
        cands, notes = _rank_metrics(cols, table, _kernel_words(p))
        if not cands:
            raise BadInput(
                f"kopt init --bench: {table.describe()}: no column is a time or a rate by its name "
                f"or unit; name one with --answer metric=COLUMN (and --answer direction=min|max when "
                f"its name says no unit)"
            )
        if len(cands) > 1:
            p.questions.append(
                Question(
                    "metric",
                    "Which column is the kernel's measurement to optimise?",
                    tuple(Choice(c.name, c.why) for c in cands),
                    "several columns are times or rates" + (f" after: {'; '.join(notes)}" if notes else ""),
                )
            )
            return False
        metric = cands[0]
        why = metric.why + (f"; {'; '.join(notes)}" if notes else "")
    t["metric"] = metric.name
    p.comments["target.metric"] = f"{metric.name}: {why}"
    if "direction" in answers:
        if answers["direction"] not in ("min", "max"):
            raise BadInput(f"--answer direction={answers['direction']!r}: must be min or max")
        t["direction"] = answers["direction"]
        p.comments["target.direction"] = "your answer"
    elif metric.kind == RATE:
        t["direction"] = "max"
        p.comments["target.direction"] = f"{metric.unit.unit or 'a rate'}: more is better"
    elif metric.kind == TIME:
        t["direction"] = "min"
        p.comments["target.direction"] = (
            "a time: less is better"
            if metric.unit.unit
            else "a time of unknown unit: less is better (CHECK [roofline].unit_scale)"
        )
        if not metric.unit.unit:
            p.checks.append(
                f"{metric.name} names no unit: set [roofline].unit_scale (seconds per unit) before using [roofline]"
            )
    else:
        p.questions.append(
            Question(
                "direction",
                f"Is a smaller {metric.name!r} better (min) or a larger (max)?",
                (Choice("min", "a latency: less is better"), Choice("max", "a throughput: more is better")),
                f"{metric.name!r} names no unit kopt knows",
            )
        )
        return False
    if metric.unit.unit and metric.kind == TIME and metric.unit.unit != "us":
        p.sections.setdefault("roofline", {})["unit_scale"] = metric.unit.seconds or 1e-6
        p.comments["roofline.unit_scale"] = f"seconds per {metric.unit.unit} (the metric's unit)"
    return True


GENERIC_WORDS = {
    "kernel",
    "kernels",
    "ops",
    "op",
    "src",
    "lib",
    "python",
    "py",
    "benchmark",
    "benchmarks",
    "bench",
    "scripts",
    "utils",
    "transformers",
    "functional",
    "init",
    "main",
    "test",
    "tests",
}


def _kernel_words(p: Proposal) -> frozenset[str]:
    """Words naming the kernel under optimisation: the repo folder's and the kernel modules'
    the bench imports (static scan), generic words set aside."""
    names = [p.run.repo.name, *scan(p.run.bench, p.run.repo).kernel]
    return frozenset(w for n in names for w in words(n.replace("/", " ")) if len(w) > 2 and w not in GENERIC_WORDS)


def _propose_correctness(p: Proposal, table: Table, cols: list[Column]) -> None:
    t = p.target
    rules, why = [], []
    for c in cols:
        if c.role == ERROR:
            if not c.identifier:
                p.checks.append(
                    f"{c.name!r} looks like an error column but an expression cannot name it: rename "
                    f"it (letters, digits, _) in the bench to use it in [target].correct"
                )
                continue
            rule = _tolerance(c, table)
            rules.append(rule)
            if c.all_zero:
                why.append(f"{c.name} was 0 on every row: exact results stay exact")
            else:
                why.append(
                    f"{c.name}: {c.why}; the tolerance is 10x the worst value of this run (CHECK it "
                    f"against your kernel's accuracy contract)"
                )
                p.checks.append(
                    f"the tolerance in [target].correct ({rule}) is 10x this run's worst value, "
                    f"not a contract: set your own"
                )
        elif c.role == FLAG:
            flag_rule = _flag_rule(c, table) if c.identifier else None
            if flag_rule is None:
                p.checks.append(
                    f"{c.name!r} looks like a pass/fail column but kopt cannot write a rule for its "
                    f"values ({', '.join(map(str, c.values))}): add one to [target].correct"
                )
                continue
            rules.append(flag_rule)
            why.append(f"{c.name}: {c.why}")
    if rules:
        t["correct"] = " and ".join(rules)
        p.comments["target.correct"] = "a row passes when this holds; NaN/Inf/missing metric always fail. " + "; ".join(
            why
        )
    else:
        t["correct"] = ""
        p.comments["target.correct"] = (
            "NO correctness column in the output: only NaN/Inf and missing values "
            "fail a row, so a fast wrong kernel would be kept"
        )
        p.checks.append(
            "the bench checks nothing kopt can see: print an error column (max |out - ref|) or a "
            "pass column, run your correctness tests inside the bench command (`pytest -q tests && "
            "python bench.py`), or use kopt's harness, which checks a poisoned-output contract"
        )


def _propose_configs(p: Proposal, table: Table, cols: list[Column]) -> None:
    t = p.target
    used = {t.get("metric")}
    config = [c for c in cols if c.role == CONFIG]
    prod = [c for c in cols if c.role == PRODUCTION]
    ignore = [c.name for c in cols if c.name not in used and c.role not in (CONFIG, ERROR, FLAG, PRODUCTION)]
    correct_names = {c.name for c in cols if c.role in (ERROR, FLAG)} - set(_names_in(t.get("correct", "")))
    ignore += sorted(correct_names)
    if prod and prod[0].identifier:
        t["production"] = f"{prod[0].name} == 1"
        p.comments["target.production"] = f"{prod[0].name}: {prod[0].why}"
    else:
        ignore += [c.name for c in prod]
    t["config"] = [c.name for c in config]
    p.comments["target.config"] = (
        "configs: " + "; ".join(f"{c.name} ({c.why})" for c in config)
        if config
        else "no config column: the table's rows are samples of one config"
    )
    if ignore:
        t["ignore"] = ignore
        p.comments["target.ignore"] = "neither config nor metric: " + "; ".join(
            f"{c.name} ({c.why})" for c in cols if c.name in ignore
        )
    class_by, why = _classes(config, table)
    t["class_by"] = class_by
    p.comments["target.class_by"] = why
    dims = [c for c in config if c.numeric and c.integral and c.distinct > 1]
    odd = [
        c.name
        for c in dims
        if any(isinstance(v, int | float) and v > 0 and int(v) & (int(v) - 1) for v in table.frame[c.name].dropna())
    ]
    if odd:
        p.checks.append(
            f"{', '.join(odd)} hold non-powers of two: a kernel whose tile rounds up to a power of two "
            f"masks those configs; a class column saying so (printed by the bench) lets kopt decide "
            f"them apart"
        )


def _names_in(rule: str) -> list[str]:
    if not rule:
        return []
    from kopt_supervisor.engine import expr

    return sorted(expr.parse(rule).names)


def _propose_files(p: Proposal) -> None:
    t = p.target
    s = scan(p.run.bench, p.run.repo)
    written = {p.run.rel(f) for f in p.run.files_written}
    s.data = [d for d in s.data if d not in written]  # what the bench wrote is output, not a source
    protected = sorted({*s.protected, *p.run.untracked})
    t["protected"] = protected
    p.comments["target.protected"] = (
        "a candidate that changes these is refused: the bench and what it imports that is not kernel code "
        f"(static scan; kernel modules left editable: {', '.join(s.kernel) or 'none found'})"
    )
    if s.sources:
        t["sources"] = s.sources
        p.comments["target.sources"] = (
            "files the bench reads (its scripts, the modules it imports, files named "
            "in them): a candidate's change to any other tracked file goes to review "
            "with its lines quoted; `kopt init` refuses uncommitted changes in them"
        )
    if p.run.untracked:
        t["untrack"] = list(p.run.untracked)
        p.comments["target.untrack"] = (
            "tracked files the bench writes into the repo: kopt's run starts from a commit of its own without "
            "them (your checkout and branches are not touched), so every run writes only its own rows; "
            "protected, so a candidate cannot bring them back"
        )
    for note in s.notes:
        p.checks.append(note)
    if not s.kernel:
        p.checks.append(
            "no kernel module was found among the bench's imports: check that the proposer's files "
            "are not in [target].protected"
        )
