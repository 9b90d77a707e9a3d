"""results.md's sections on where and how the numbers were made (pure: the gathered run in,
markdown lines out): the GPU and the gate's idle-state evidence, the commands, the
environment, and the provenance (commits, tree hash, the frozen kopt.toml)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.report.collect import ReportInputs
from kopt_supervisor.engine.report.markdown import code, table


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
    if t.ab_command:
        lines.append(f"- A/B command (best and candidate interleaved in one process): {code(t.ab_command)}")
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
