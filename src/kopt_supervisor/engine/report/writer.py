"""`kopt report TAG`: read the run, render results.md and the latency chart into the workspace.

The side effects of the report live here: reading run.db (read-only), the frozen kopt.toml,
the spec wiki and git (the final commit's tree hash), capturing the environment when the
loop did not record one, and writing results.md, results_latency.txt and, when
matplotlib is importable, results_latency.png (a stale PNG from an earlier report is
removed when it is not). performance.md and README.md are re-rendered from the store too,
so a mask applied while no engine ran is reflected there as well.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import gitops
from kopt_supervisor.engine.decide import guard_of, voting_classes
from kopt_supervisor.engine.environment import capture_environment
from kopt_supervisor.engine.errors import BadInput, KoptError
from kopt_supervisor.engine.history import write_projections
from kopt_supervisor.engine.report import chart, roofline_view
from kopt_supervisor.engine.report.collect import NoBaseline, ReportInputs, RunData, collect
from kopt_supervisor.engine.report.render import class_medians, render_results
from kopt_supervisor.engine.report.stats import summarize
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
    series: dict[str, list[chart.Point]]


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
    series = chart.class_series(_chain_points(data, class_of))
    inputs = ReportInputs(
        data=data,
        cfg=cfg,
        tag=ws.tag,
        environment=env,
        environment_when=when,
        roofline=_roofline(cfg, data, ws.root / MEASURED_CEILINGS),
        chart_text=chart.text_chart(series, cfg.target.metric, cfg.target.direction),
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
    drawn = chart.write_png(
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


def _roofline(cfg: Any, data: RunData, measured_dir: Path) -> roofline_view.RooflineView:
    """The same spec lookup as the loop's (engine.roofline.evaluate): the wiki, then the
    ceilings `kopt ceilings` measured on this GPU."""
    from kopt_supervisor.engine.roofline.evaluate import lookup_specs

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
    view = roofline_view.build(
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
