"""Reports: `kopt report` (results.md) and `kopt export` (a branch), both here; what they read
is `report.inputs`, `report.iterations` and `report.provenance`, the text `report.render`.

The report's side effects: `kopt report TAG` (results.md and the latency chart in the
workspace) and `kopt export TAG --branch NAME` (a reviewable branch in the target repo).

`kopt report` reads run.db (read-only), the frozen kopt.toml, the spec wiki and git (the final
commit's tree hash), captures the environment when the loop did not record one, and writes
results.md, results_latency.txt and, when matplotlib is importable, results_latency.png (a
stale PNG from an earlier report is removed when it is not). performance.md and README.md are
re-rendered from the store too, so a mask applied while no engine ran is reflected there as
well. docs/reports.md says what results.md holds and where each number comes from.

`kopt export`: the branch starts at the run's baseline commit and holds one commit per keep of
the final tree (oldest first), each with only that keep's source changes (`exclusion` says
what is not source) and a message made of its hypothesis and its measured verdict, then one
commit adding results.md. It is built with git plumbing on a private index
(engine.gitops.commit_with_changes) and the branch ref is created last, atomically and only if
the name is still free: nothing is checked out, and no existing branch, HEAD, index or working
tree of the repository is touched, so uncommitted work in it is safe. Refused, with a one-line
reason: an invalid or existing branch name, a run with no keep, a run with no baseline.

What counts as source (`exclusion`, pure): a file change is exported unless a rule says why
not. A kept commit holds whatever was in cand/ when kopt committed it: the proposer's edits,
and also what the bench, the profiler or a build wrote into the tree while the candidate was
timed. The rules, in order (the first that matches names the reason):

1. a build, profiler, log or scratch artifact by name (`ARTIFACT_GLOBS`), wherever it is;
2. the bench's CSV output (matches [target].csv);
3. for a file the branch does not hold yet (a new file):
   a. ignored by the target's .gitignore (at the baseline or at the kept commit);
   b. under a build, cache, log, profile or scratch folder (`ARTIFACT_DIRS`, `*.egg-info`);
   c. not among the files the proposer changed (the iteration's recorded `changed_files`,
      taken before any timing): it appeared while the candidate was timed.

A file the branch already holds (tracked at the baseline, or added by an earlier exported
keep) is never dropped by rule 3: the engineer chose to track it, so editing it is a source
change even under a folder called build/ or matching an ignore pattern.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kopt_supervisor.engine import BadInput, KoptError, fmt, gitops
from kopt_supervisor.engine.decide.verdict import guard_of, voting_classes
from kopt_supervisor.engine.doctor import capture_environment
from kopt_supervisor.engine.history import write_projections
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report.inputs import (
    NoBaseline,
    ReportInputs,
    RooflineView,
    RunData,
    build_roofline_view,
    collect,
    summarize,
)
from kopt_supervisor.engine.report.render import (
    Point,
    class_medians,
    class_series,
    render_results,
    text_chart,
    write_png,
)
from kopt_supervisor.engine.workspace import Workspace, write_atomic

PNG_NAME = "results_latency.png"
TXT_NAME = "results_latency.txt"
NO_GPU_NAMES = ("no GPU (CPU-only target)",)
MEASURED_CEILINGS = ".ceilings"
"""Under the workspaces root: the spec pages `kopt ceilings` measured (as the loop reads them)."""


def read_run(ws: Workspace) -> tuple[dict[str, Any], list[Any], list[dict[str, Any]]]:
    """(meta, iterations, every sample row) in one consistent read."""
    with ws.open_store(readonly=True) as store, store.snapshot():
        meta = store.meta()
        its = store.iterations()
        rows = [dict(r) for it in its for r in store.samples(it.version)]
    return meta, its, rows


@dataclasses.dataclass(frozen=True)
class Prepared:
    inputs: ReportInputs
    """results.md's inputs; the PNG fields are filled in by the caller that draws it."""
    series: dict[str, list[Point]]


def prepare(ws: Workspace) -> Prepared:
    """Everything results.md needs, read from the run."""
    ws.require()
    cfg = ws.load_config()
    meta, its, rows = read_run(ws)
    try:
        data = collect(meta, its, rows)
    except NoBaseline as e:
        raise BadInput(f"run {ws.tag!r}: {e}") from None
    env = meta.get("environment")
    when = "at the run's baseline"
    if not isinstance(env, dict):
        env = capture_environment(cfg, ws.best if ws.best.is_dir() else ws.dir)
        when = "at report time: the run recorded no environment at its baseline"
    class_of = {k: c.cls for k, c in data.configs.items()}
    series = class_series(_chain_points(data, class_of))
    inputs = ReportInputs(
        data=data,
        cfg=cfg,
        tag=ws.tag,
        environment=env,
        environment_when=when,
        roofline=_roofline(cfg, data, ws.root / MEASURED_CEILINGS),
        chart_text=text_chart(series, cfg.target.metric, cfg.target.direction),
        png_name=None,
        chart_note="",
        final_tree_sha=_tree_sha(meta.get("repo"), data.best.commit),
        config_text=_read(ws.config_path),
    )
    return Prepared(inputs, series)


def write_report(ws: Workspace) -> Path:
    """Write results.md (and its chart) in the workspace; returns the path of results.md."""
    prepared = prepare(ws)
    inputs, series = prepared.inputs, prepared.series
    png = ws.dir / PNG_NAME
    txt = ws.dir / TXT_NAME
    drawn = write_png(
        series,
        png,
        inputs.cfg.target.metric,
        last_version=max(it.version for it in inputs.data.unmasked),
        title=f"kopt run {ws.tag}: best {inputs.cfg.target.metric} per class",
        direction=inputs.cfg.target.direction,
    )
    if not drawn:
        png.unlink(missing_ok=True)
    inputs = dataclasses.replace(
        inputs,
        png_name=PNG_NAME if drawn else None,
        chart_note="" if drawn else f"matplotlib is not installed: the chart is text (also in {TXT_NAME}).",
    )
    write_atomic(txt, inputs.chart_text)
    write_atomic(ws.results, render_results(inputs))
    with ws.open_store(readonly=True) as store:  # performance.md too: a mask applied offline leaves it stale
        write_projections(ws, store, inputs.cfg)
    return ws.results


def results_for_export(ws: Workspace) -> tuple[str, RunData]:
    """results.md's text for an exported branch (no link to a chart file the branch lacks)."""
    inputs = prepare(ws).inputs
    return render_results(inputs), inputs.data


def _chain_points(data: RunData, class_of: dict[str, str]) -> list[tuple[int, str, dict[str, float | None]]]:
    out = []
    for it in [data.baseline, *data.chain]:
        tree = data.tree(it.commit or "")
        label = "baseline" if it.status == "baseline" else it.hypothesis
        out.append((it.version, label, class_medians(tree.values, class_of)))
    return out


def _roofline(cfg: Any, data: RunData, measured_dir: Path) -> RooflineView:
    """The same spec lookup as the loop's (engine.profile.roofline): the wiki, then the
    ceilings `kopt ceilings` measured on this GPU."""
    from kopt_supervisor.engine.profile.roofline import lookup_specs

    gpu_name = cfg.roofline.gpu or _gpu_name(data)
    specs: dict[str, Any] = {}
    note = ""
    if gpu_name:
        try:
            specs = lookup_specs(
                gpu_name,
                Path(cfg.roofline.specs) if cfg.roofline.specs else None,
                measured_dir if measured_dir.is_dir() else None,
                gpu_uuid=_gpu_uuid(data),
            )
        except KoptError as e:
            note = str(e)
    view = build_roofline_view(
        cfg,
        {k: c.row for k, c in data.configs.items() if c.row},
        # the classes as decisions voted: under [decide].production_verdicts the regression
        # grid's odd sizes are the guard class, not part of a production class's % of peak
        voting_classes(
            {k: c.cls for k, c in data.configs.items()},
            guard_of({k: c.production for k, c in data.configs.items()}, cfg.decide.production_verdicts),
        ),
        _medians(data.baseline_tree.values),
        _medians(data.final_tree.values),
        specs,
        gpu_name or "no GPU recorded",
    )
    if note and view.available:
        view = dataclasses.replace(view, gpu_name=f"{view.gpu_name} (spec wiki: {note})")
    return view


def _gpu_name(data: RunData) -> str:
    for it in [data.best, data.baseline, *reversed(data.unmasked)]:
        name = (it.record.get("gpu") or {}).get("name")
        if name and name not in NO_GPU_NAMES:
            return str(name)
    return ""


def _gpu_uuid(data: RunData) -> str | None:
    for it in [data.best, data.baseline, *reversed(data.unmasked)]:
        uuid = (it.record.get("gpu") or {}).get("uuid")
        if uuid:
            return str(uuid)
    return None


def _medians(values: dict[str, list[float]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for k, v in values.items():
        s = summarize(v)
        out[k] = s.median if s else None
    return out


def _tree_sha(repo: str | None, commit: str | None) -> str | None:
    if not repo or not commit:
        return None
    try:
        return gitops.commit_info(repo, commit)[1]
    except (KoptError, ValueError):
        return None
    except Exception:  # noqa: BLE001 - a missing object in a moved repo: the report says "not readable"
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        return f"# cannot read {path}: {e.strerror}"


ARTIFACT_GLOBS: dict[str, tuple[str, ...]] = {
    "a compiled or build output": (
        "*.pyc",
        "*.pyo",
        "*.so",
        "*.o",
        "*.obj",
        "*.a",
        "*.lib",
        "*.dll",
        "*.dylib",
        "*.exe",
        "*.cubin",
        "*.fatbin",
        "*.hsaco",
        "*.whl",
    ),
    "a profiler report or trace": (
        "*.ncu-rep",
        "*.nsys-rep",
        "*.qdrep",
        "*.qdstrm",
        "*.sqlite",
        "*.rpd",
        "*.pftrace",
        "*.otf2",
        "*.pt.trace.json",
        "*_kernel_trace.csv",
        "*_kernel_stats.csv",
        "*_agent_info.csv",
        "*_results.db",
    ),
    "a log or scratch file": (
        "*.log",
        "nohup.out",
        "slurm-*.out",
        "*.tmp",
        "*.temp",
        "*.bak",
        "*.orig",
        "*.rej",
        "*.swp",
        "*.swo",
        "*~",
        ".DS_Store",
        "core",
        "core.[0-9]*",
    ),
}

ARTIFACT_DIRS = frozenset(
    {
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        ".triton",
        ".cache",
        "build",
        "dist",
        ".eggs",
        "logs",
        "profiles",
        "traces",
        "scratch",
        "tmp",
    }
)


def artifact_glob(path: str) -> tuple[str, str] | None:
    """(what it is, the glob) when the file's name marks it as an artifact."""
    name = PurePosixPath(path).name
    for what, globs in ARTIFACT_GLOBS.items():
        for g in globs:
            if fnmatch.fnmatchcase(name, g):
                return what, g
    return None


def artifact_dir(path: str) -> str | None:
    for part in PurePosixPath(path).parts[:-1]:
        if part in ARTIFACT_DIRS or part.endswith(".egg-info"):
            return part
    return None


def exclusion(
    path: str,
    *,
    ignored: bool,
    in_branch: bool,
    proposer_files: set[str] | None,
    bench_csv: str,
) -> str | None:
    """Why `path` is left out of the export, or None when it is source.

    `in_branch`: the export branch already holds the file (tracked since the baseline or
    added by an earlier exported commit). `proposer_files`: the iteration's recorded
    changed_files (None when the iteration recorded none: rule 3c cannot apply)."""
    hit = artifact_glob(path)
    if hit:
        return f"{hit[0]} (`{hit[1]}`)"
    if bench_csv and bench_csv != "-" and fnmatch.fnmatch(path, bench_csv):
        return f"the bench's CSV output ([target].csv = `{bench_csv}`)"
    if not in_branch:
        if ignored:
            return "ignored by the target's .gitignore"
        folder = artifact_dir(path)
        if folder:
            return f"a new file under `{folder}/` (build, cache, log, profile or scratch folder)"
        if proposer_files is not None and path not in proposer_files:
            return "not written by the proposer (it appeared while the candidate was timed)"
    return None


RESULTS_NAME = "results.md"


@dataclass
class ExportedKeep:
    version: int
    commit: str | None
    """The export branch's commit; None when nothing of the keep was source."""
    files: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)


def export_branch(ws: Workspace, branch: str) -> str:
    """Create `branch` in the run's target repo; returns a one-paragraph summary."""
    text, data = results_for_export(ws)
    repo = data.meta.get("repo")
    if not repo:
        raise BadInput(f"run {ws.tag!r}: its store names no target repository")
    gitops.check_branch_name(repo, branch)
    if gitops.branch_sha(repo, branch) is not None:
        raise BadInput(f"{repo}: branch {branch!r} already exists; choose another name (export never moves a branch)")
    if not data.chain:
        raise BadInput(f"run {ws.tag!r} has no kept iteration: there is nothing to export")
    cfg = ws.load_config()
    baseline = data.baseline.commit or ""
    in_branch = gitops.tree_files(repo, baseline)
    head = baseline
    exported: list[ExportedKeep] = []
    for it in data.chain:
        keep = export_keep(repo, it, head, in_branch, baseline, ws.tag, cfg.target.csv)
        exported.append(keep)
        if keep.commit:
            head = keep.commit
    results_path = RESULTS_NAME if RESULTS_NAME not in in_branch else f"results-kopt-{ws.tag}.md"
    blob = gitops.hash_blob(repo, text.encode("utf-8"))
    head = gitops.commit_with_changes(
        repo,
        head,
        [(results_path, "100644", blob)],
        f"kopt results of run {ws.tag}\n\nPer-config baseline and final latency, speedups, the kept iterations, "
        f"the commands, the environment and the GPU evidence, written by `kopt export {ws.tag}`.\n",
    )
    gitops.create_branch(repo, branch, head)
    return summary(branch, repo, baseline, exported, results_path)


def export_keep(
    repo: str, it: Iteration, head: str, in_branch: set[str], baseline: str, tag: str, bench_csv: str
) -> ExportedKeep:
    """Commit the source part of one keep on top of `head`; updates `in_branch`."""
    parents, _ = gitops.commit_info(repo, it.commit or "")
    parent = parents[0] if parents else (it.best_commit_before or baseline)
    diff = gitops.diff_paths(repo, parent, it.commit or "")
    paths = [p for _, p in diff]
    ignored = gitops.ignored_paths(repo, baseline, paths) | gitops.ignored_paths(repo, it.commit or "", paths)
    entries = gitops.tree_entries(repo, it.commit or "", paths)
    recorded = it.record.get("changed_files")
    proposer_files = set(recorded) if isinstance(recorded, list) else None
    keep = ExportedKeep(it.version, None)
    changes: list[tuple[str, str | None, str | None]] = []
    for status, path in diff:
        why = exclusion(
            path,
            ignored=path in ignored,
            in_branch=path in in_branch,
            proposer_files=proposer_files,
            bench_csv=bench_csv,
        )
        if why:
            keep.left_out.append((path, why))
            continue
        entry = entries.get(path)
        if status == "D" or entry is None:
            if path in in_branch:
                changes.append((path, None, None))
                in_branch.discard(path)
                keep.files.append(path)
            continue
        changes.append((path, entry[0], entry[1]))
        in_branch.add(path)
        keep.files.append(path)
    if changes:
        keep.commit = gitops.commit_with_changes(
            repo, head, changes, keep_message(it, tag, keep), author_date=it.finished_at
        )
    return keep


def keep_message(it: Iteration, tag: str, keep: ExportedKeep) -> str:
    dec = it.record.get("decision") or {}
    lines = [
        (it.hypothesis or f"kopt v{it.version}").splitlines()[0][:72],
        "",
        f"kopt run {tag}, iteration v{it.version}: {it.status} ({dec.get('by', 'engine')}): {dec.get('reason', '')}",
        "",
    ]
    for cls, c in sorted((it.record.get("classes") or {}).items()):
        if c.get("best") is None or c.get("cand") is None:
            continue
        interval = f" {fmt.interval(c['lo'], c['hi'])}" if fmt.is_num(c.get("lo")) and fmt.is_num(c.get("hi")) else ""
        lines.append(
            f"  {cls}: {fmt.num(c['best'])} -> {fmt.num(c['cand'])} "
            f"({fmt.change(c.get('delta_pct', 0.0))}{interval}, {c.get('verdict', '')})"
        )
    if dec.get("rounds"):
        lines += [
            "",
            f"Measured paired with the best of that moment over {dec['rounds']} rounds "
            f"({fmt.num(float(dec.get('gpu_seconds') or 0))} GPU-s).",
        ]
    if it.target_class:
        lines.append(f"Target class: {it.target_class}.")
    lines.append(f"kopt commit: {it.commit}")
    if keep.left_out:
        lines += ["", "Left out of this commit (not source):"]
        lines += [f"  {p}: {why}" for p, why in keep.left_out]
    return "\n".join(lines) + "\n"


def summary(branch: str, repo: str, baseline: str, exported: list[ExportedKeep], results_path: str) -> str:
    made = [k for k in exported if k.commit]
    empty = [k for k in exported if not k.commit]
    left = [(k.version, p, why) for k in exported for p, why in k.left_out]
    text = (
        f"created branch {branch} in {repo} from the baseline {baseline[:10]}: "
        f"{len(made)} commit(s) for {', '.join(f'v{k.version}' for k in made) or 'no keep'} "
        f"and one adding {results_path}; nothing was checked out"
    )
    if empty:
        text += f"; no source change in {', '.join(f'v{k.version}' for k in empty)}"
    if left:
        shown = "; ".join(f"{p} (v{v}: {why})" for v, p, why in left[:8])
        text += f"; left out {len(left)} file change(s): {shown}" + (" ..." if len(left) > 8 else "")
    return text
