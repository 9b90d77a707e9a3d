"""results.md's sections on where, how and at what cost the numbers were made (pure: the
gathered run in, markdown lines out): the GPU and the gate's idle-state evidence, the
commands, the environment, the provenance (commits, tree hash, the frozen kopt.toml); the
roofline; and the progress and where the time went.

Roofline: the peaks and formulas used, per config and per class the bound, the floor and % of
peak of the baseline and the final tree (computed by engine/report/inputs.py's roofline
view), the bound or blocker against the stop target, and what the loop recorded for the final
tree, whatever shape that record has.

Progress and where the time went (docs/lanes.md): the best speedup against wall time and GPU
time, one row per keep, and per lane where its time went (engine/api/run_summary.py computes
both from the iteration records).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.api.run_summary import Progress, progress
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report.inputs import ReportInputs, RunData, code, table


def gpu_state(ev: Mapping[str, Any] | None) -> str:
    if not ev:
        return "not read"
    if ev.get("missing"):
        return "the GPU vanished"
    parts = []
    if ev.get("util_pct") is not None:
        parts.append(f"util {fmt.value(ev['util_pct'])}%")
    if ev.get("mem_used_mib") is not None:
        parts.append(f"mem {fmt.value(ev['mem_used_mib'])} MiB")
    foreign = ev.get("foreign_processes")
    if foreign is None:
        foreign = ev.get("processes")
    if foreign is not None:
        parts.append(f"{len(foreign)} foreign process(es)" if foreign else "no foreign process")
    if ev.get("throttle"):
        parts.append("throttle " + ",".join(map(str, ev["throttle"])))
    if ev.get("temp_c") is not None:
        parts.append(f"{fmt.value(ev['temp_c'])} °C")
    if ev.get("sm_clock_mhz") is not None:
        parts.append(f"SM {fmt.value(ev['sm_clock_mhz'])} MHz")
    if ev.get("time"):
        parts.append(f"at {ev['time']}")
    return ", ".join(parts) or "read, no fields"


def gpu(inp: ReportInputs) -> list[str]:
    d = inp.data
    env = inp.environment
    used: dict[tuple[Any, Any, Any], list[int]] = {}
    flagged = []
    for it in d.unmasked:
        g = it.record.get("gpu") or {}
        if g:
            used.setdefault((g.get("index"), g.get("name"), g.get("uuid")), []).append(it.version)
        for f in g.get("flagged_rounds") or []:
            flagged.append(f"v{it.version} round {f.get('round')}: {'; '.join(f.get('flags') or [])}")
    lines = [
        "## GPU and idle-state evidence",
        "",
        f"- Host: `{env.get('host', '—')}` (captured {inp.environment_when})",
    ]
    for (index, name, uuid), versions in used.items():
        lines.append(
            f"- GPU index {index if index is not None else '—'}, model {name or '—'}, UUID "
            f"{uuid or '—'}: iterations {_ranges(versions)}"
        )
    if not used:
        lines.append("- No GPU was recorded.")
    lines += [f"- Rounds the gate flagged (throttling or a new process during the step): {len(flagged)}", ""]
    rows = []
    for it in [d.baseline, *d.chain]:
        g = it.record.get("gpu") or {}
        rows.append(
            [
                f"v{it.version}",
                g.get("index", "—") if g.get("index") is not None else "—",
                gpu_state(g.get("before")),
                gpu_state(g.get("after")),
                len(g.get("flagged_rounds") or []),
            ]
        )
    lines += [
        "The chosen GPU's state as the gate read it before the first and after the last timed step of "
        "the baseline and of every kept iteration:",
        "",
        *table(["iteration", "GPU", "before", "after", "flagged rounds"], rows),
        "",
    ]
    if flagged:
        lines += ["Flagged rounds:", "", *[f"- {f}" for f in flagged], ""]
    return lines


def _ranges(versions: list[int]) -> str:
    out: list[str] = []
    runs: list[list[int]] = []
    for v in sorted(versions):
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    for run in runs:
        out.append(f"v{run[0]}" if len(run) == 1 else f"v{run[0]}–v{run[-1]}")
    return ", ".join(out)


def commands(inp: ReportInputs) -> list[str]:
    cfg, d = inp.cfg, inp.data
    t = cfg.target
    recorded_proposer = next(
        (
            str((it.record.get("proposal") or {}).get("command"))
            for it in reversed(d.unmasked)
            if (it.record.get("proposal") or {}).get("command")
        ),
        None,
    )
    prof_cmds = sorted({str(c) for it in d.unmasked for c in _profile_commands(it.record.get("profile"))})
    lines = [
        "## Commands",
        "",
        f"- Bench (run in the tree's worktree): {code(t.bench)}; CSV `{t.csv}`"
        + (" (its stdout)" if t.csv == "-" else "")
        + f"; metric `{t.metric}`; correctness "
        + (f"`{t.correct}`" if t.correct else "metric present and finite")
        + "; NaN/Inf always fail",
    ]
    if t.serve:
        lines.append(
            f"- Served looks (one process per tree, run in its worktree; the decisions' samples): {code(t.serve)}"
        )
    lines.append(
        f"- Proposer: `{cfg.propose.kind}`"
        + (f", command {code(cfg.propose.command)}" if cfg.propose.command else "")
        + (
            f" (as run: {code(recorded_proposer)})"
            if recorded_proposer and recorded_proposer != cfg.propose.command
            else ""
        )
    )
    if cfg.propose.kind == "tune":
        lines.append(
            f"  - tune: params file `{cfg.propose.tune.params}`, space {cfg.propose.tune.space}, "
            f"per class: {cfg.propose.tune.per_class}"
        )
    lines.append(
        "- Format (before every keep commit): "
        + (code(cfg.format.command) if cfg.format.command else "none configured")
    )
    p = cfg.profile
    lines.append(
        f"- Profiler: kind `{p.kind}`, kernel regex `{p.kernel or '.*'}`, profiled command "
        + (code(p.command) if p.command else "the bench")
    )
    for c in prof_cmds:
        lines.append(f"  - as run: {code(c)}")
    lines += [
        f"- Reproduce: `kopt init --repo {d.meta.get('repo')} --tag NEW_TAG --config "
        f"<workspace>/{inp.tag}/kopt.toml` then `kopt run NEW_TAG` (the frozen config is under "
        "*Provenance*)",
        "",
    ]
    return lines


def _profile_commands(profile: Any) -> list[Any]:
    """The profiler command lines a profile record names (at its top or per side)."""
    if not isinstance(profile, Mapping):
        return []
    found = [profile["command"]] if profile.get("command") else []
    return found + [s["command"] for s in profile.values() if isinstance(s, Mapping) and s.get("command")]


def environment(inp: ReportInputs) -> list[str]:
    env = inp.environment
    bp = env.get("bench_python") or {}
    gs = env.get("gpu_software") or {}
    kp = env.get("kopt_python") or {}

    def v(x: Any) -> str:
        return "not installed" if x is None else str(x)

    torch_build = []
    if bp.get("torch"):
        torch_build.append(f"CUDA {bp['torch_cuda']}" if bp.get("torch_cuda") else "no CUDA build")
        if bp.get("torch_hip"):
            torch_build.append(f"HIP {bp['torch_hip']}")
    lines = [
        "## Environment",
        "",
        f"Captured {inp.environment_when} ({env.get('captured_at', '—')}).",
        "",
        f"- Host `{env.get('host', '—')}`, {env.get('platform', '—')}",
    ]
    if bp.get("error"):
        lines.append(f"- Bench Python: could not be asked: {bp['error']} ({bp.get('found_by', '')})")
    else:
        lines += [
            f"- Bench Python: {bp.get('version', '—')} `{bp.get('executable', '—')}` (found by "
            f"{bp.get('found_by', '—')})",
            f"- torch: {v(bp.get('torch'))}" + (f" ({', '.join(torch_build)})" if torch_build else ""),
            f"- triton: {v(bp.get('triton'))}",
        ]
    lines.append(f"- kopt's Python: {kp.get('version', '—')} `{kp.get('executable', '—')}`")
    if gs.get("driver") or gs.get("cuda_driver") or gs.get("rocm"):
        parts = [f"driver {gs.get('driver') or '—'}"]
        if gs.get("cuda_driver"):
            parts.append(f"CUDA (driver API) {gs['cuda_driver']}")
        if gs.get("rocm"):
            parts.append(f"ROCm {gs['rocm']}")
        lines.append(f"- GPU software ({gs.get('vendor')}): {', '.join(parts)} (from {gs.get('source', '—')})")
    else:
        lines.append(f"- GPU driver and CUDA/ROCm: N/A ({gs.get('note', 'not read')})")
    flags = env.get("compile_flags")
    lines.append("- Compile flags ([target].compile_flags): " + (code(flags) if flags else "none declared"))
    tenv = env.get("target_env") or {}
    lines.append(
        "- Extra environment ([target].env): "
        + (", ".join(f"`{k}={val}`" for k, val in sorted(tenv.items())) if tenv else "none")
    )
    return [*lines, ""]


def provenance(inp: ReportInputs) -> list[str]:
    d = inp.data
    return [
        "## Provenance",
        "",
        f"- Target repository: `{d.meta.get('repo')}`",
        f"- Baseline commit: `{d.baseline.commit}`",
        f"- Final commit (BEST_COMMIT, branch `kopt/{inp.tag}`): `{d.best.commit}`",
        f"- Final source hash (git tree of the final commit): `{inp.final_tree_sha or 'not readable'}`",
        f"- `kopt export {inp.tag} --branch NAME` makes a branch with only the kept source changes and "
        "this file (docs/reports.md says what is left out)",
        "",
        "<details><summary>The run's frozen kopt.toml</summary>",
        "",
        "```toml",
        inp.config_text.rstrip(),
        "```",
        "",
        "</details>",
        "",
    ]


def roofline_section(inp: ReportInputs) -> list[str]:
    rv = inp.roofline
    r = inp.cfg.roofline
    lines = ["## Roofline", ""]
    if not rv.available:
        lines += [f"Not measured: {rv.why_not}.", ""]
    else:
        p = rv.peaks
        assert p is not None
        unit = inp.cfg.target.metric
        lines += [
            f"- GPU: {rv.gpu_name or 'unknown'}",
            f"- FLOPs per call: `{r.flops or '0'}`; bytes per call: `{r.bytes or '0'}` "
            "(inputs read once, outputs written once)",
            f"- peak bandwidth: {p.bandwidth_spec.line()}",
            f"- peak compute: {p.flops_spec.line()}",
            "- floor = max(bytes / peak bandwidth, FLOPs / peak compute); % of peak = floor / measured time",
            "",
        ]
        rows = []
        for key, fp in rv.final.items():
            bp = rv.baseline.get(key)
            floor = None if fp.floor_s is None else fp.floor_s / r.unit_scale
            rows.append(
                [
                    key,
                    fmt.num(fp.flops),
                    fmt.num(fp.bytes),
                    fmt.num(fp.intensity),
                    fp.bound,
                    fmt.num(floor),
                    fmt.rate(bp.achieved_Bps if bp else None, "B/s"),
                    fmt.rate(fp.achieved_Bps, "B/s"),
                    fmt.rate(fp.achieved_flops, "FLOP/s"),
                    fmt.share(bp.pct_of_peak if bp else None),
                    fmt.share(fp.pct_of_peak),
                    "**faster than its floor: suspicious**" if fp.suspicious else "",
                ]
            )
        lines += table(
            [
                "config",
                "FLOPs",
                "bytes",
                "FLOP/byte",
                "bound",
                f"floor {unit}",
                "baseline bandwidth",
                "final bandwidth",
                "final FLOP/s",
                "baseline % of peak",
                "final % of peak",
                "note",
            ],
            rows,
        )
        lines += [""]
        if rv.final_classes:
            crow = []
            for cls, c in rv.final_classes.items():
                b = rv.baseline_classes.get(cls)
                crow.append(
                    [
                        cls,
                        c.bound,
                        fmt.share(b.pct_geomean if b else None),
                        fmt.share(c.pct_geomean),
                        fmt.share(c.pct_min),
                        _blocker(c.bound, c.pct_geomean, inp.cfg.stop.target_pct_of_peak),
                    ]
                )
            lines += table(
                ["class", "bound", "baseline % of peak", "final % of peak", "lowest final %", "bound or blocker"], crow
            )
            lines += [""]
    recorded = _recorded_roofline(inp.data)
    if recorded:
        lines += recorded
    if inp.data.meta.get("roofline_md"):
        lines += ["The Step 0 analysis written at the baseline is in the workspace's README.md.", ""]
    return lines


def _blocker(bound: str, pct: float | None, target: float) -> str:
    if bound in ("unknown", "mixed") or pct is None:
        return (
            "no sourced peak for this GPU: the bound cannot be named"
            if bound == "unknown"
            else "configs of this class have different bounds"
        )
    side = "memory bandwidth" if bound == "memory" else "compute throughput"
    if pct >= target:
        return f"{side}: at {fmt.share(pct)} of its roofline, the stop target ({fmt.share(target)}) is reached"
    return f"{side}: at {fmt.share(pct)} of its roofline, below the {fmt.share(target)} stop target"


def _recorded_roofline(d: RunData) -> list[str]:
    """What the loop recorded for the final tree, from that keep's own samples."""
    rec = d.best.record.get("roofline")
    if not isinstance(rec, Mapping) or not rec:
        return []
    where = f"the loop's roofline record of v{d.best.version} (from that iteration's own samples)"
    if rec.get("error"):
        return [f"- {where}: the analysis failed: {rec['error']}", ""]
    classes = rec.get("classes")
    if isinstance(classes, Mapping) and all(isinstance(c, Mapping) for c in classes.values()):
        parts = [f"`{cls}` {fmt.share(c.get('pct_geomean'))} ({c.get('bound', '—')})" for cls, c in classes.items()]
        return [f"- In {where}: % of peak per class: {', '.join(parts) or '—'}", ""]
    return [f"Recorded in {where}:", "", *generic_tables(rec), ""]


def generic_tables(obj: Any, title: str = "") -> list[str]:
    """A dict of records as markdown tables, whatever keys the records hold."""
    if not isinstance(obj, Mapping):
        return [f"- {title}: {fmt.value(obj)}"] if title else [fmt.value(obj)]
    scalars = {k: v for k, v in obj.items() if not isinstance(v, Mapping | list)}
    records = {k: v for k, v in obj.items() if isinstance(v, Mapping)}
    lines: list[str] = []
    if title:
        lines += [f"*{title}*", ""]
    if scalars:
        lines += table(["key", "value"], [[k, fmt.value(v)] for k, v in scalars.items()]) + [""]
    flat = {k: v for k, v in records.items() if all(not isinstance(x, Mapping | list) for x in v.values())}
    if flat:
        cols: list[str] = []
        for v in flat.values():
            cols += [c for c in v if c not in cols]
        lines += table(["", *cols], [[k, *(fmt.value(v.get(c)) for c in cols)] for k, v in flat.items()]) + [""]
    for k, v in records.items():
        if k not in flat:
            lines += generic_tables(v, str(k))
    return lines


PROGRESS_TITLE = "Progress and where the time went"


def progress_section(iterations: Sequence[Iteration], direction: str) -> list[str]:
    p = progress(iterations, direction)
    lines = [f"## {PROGRESS_TITLE}", ""]
    if not p.gpu_s:
        return lines + ["No candidate iteration has ended yet.", ""]
    lines += [
        f"{len(p.lanes)} lane(s) ran {sum(x.iterations for x in p.lanes)} candidate iteration(s) in "
        f"{fmt.clock(p.elapsed_s)} of wall time and {fmt.hours(p.gpu_s)} of GPU time "
        "(each lane holds one GPU while its iteration runs; masked iterations included: their time was spent).",
        "",
    ]
    if p.curve:
        lines += table(
            ["keep", "wall time", "GPU time", "best speedup"],
            [[f"v{x.version}", fmt.clock(x.t_s), fmt.hours(x.gpu_s), fmt.speedup(x.speedup)] for x in p.curve],
        )
        lines.append("")
    else:
        lines += ["No keep yet: the speedup has not moved.", ""]
    lines += _lanes(p)
    return lines


def _lanes(p: Progress) -> list[str]:
    rows = []
    for x in p.lanes:
        cells = [x.wait_s, x.propose_s, x.measure_s, x.confirm_s, x.review_s, x.stale_s, x.other_s]
        rows.append(
            [
                str(x.lane),
                str(x.iterations),
                fmt.clock(x.busy_s),
                *(f"{fmt.clock(c)} ({fmt.share(100 * c / x.busy_s, 2) if x.busy_s else fmt.DASH})" for c in cells),
                f"{x.rebased} / {x.handed_back} / {x.carried} / {x.stale_iterations}",
            ]
        )
    out = table(
        [
            "lane",
            "iterations",
            "busy",
            "waiting (GPU, BEST, lanes)",
            "proposing",
            "measuring",
            "confirming and keeping",
            "review",
            "stale",
            "other",
            "rebased / handed back / keeps carried / ended stale",
        ],
        rows,
    )
    share = p.stale_share
    return out + [
        "",
        f"Stale candidates (decided against a BEST another lane's keep had moved, then rebased or handed "
        f"back) took {fmt.clock(p.stale_s)}"
        + (f", {fmt.share(100 * share)} of the GPU time." if share is not None else "."),
        "",
    ]
