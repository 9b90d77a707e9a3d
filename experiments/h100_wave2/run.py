"""The second H100 wave's three parts (experiments/h100_wave2.sh calls this after its setup).

    python -m experiments.h100_wave2.run part1|part2|part3 --out DIR [--smoke] [--budget-s S]

part1  verification: the ncu range capture (tests/data/capture_ranges.py), then both bundled
       demos with the profiler on: per iteration the verdict, the profiler's per-class word,
       the kernels in every config range, the timings; the re-decision's cost per keep; the
       class-targeted keeps the profiler sent back.
part2  your own kernel: examples/softmax onboarded as `kopt init --bench` does; an A/A candidate
       (a comment) and a real launch change ~3% away (found by prescan.py), each decided once
       through the harness's served looks and once process-level; seconds to each verdict.
part3  lanes over Ray: the same scripted candidates through [parallel] backend = "ray" (one
       lane, a local head started here) and locally: the verdicts side by side, wall times.

Everything lands in DIR: summary.json and summary.md (rewritten after every step), and
<part>.tgz with the raw logs, run.db copies and every record exported as JSON (part1 also
ncu_h100_ranges.tgz). Raw files are written under the work folder (--work), never straight into
DIR: the device returns at most 8 files per command.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import device_wave
from experiments.device_wave import export_run, stopper
from experiments.h100_wave2 import probes, records, softmax_target
from experiments.h100_wave2.common import (
    HERE,
    REPO,
    Budget,
    CmdResult,
    Summary,
    child_env,
    find_ncu,
    kopt_argv,
    machine_info,
    measured,
    pack,
    run_cmd,
    shell_line,
)

DEVICE_BUDGET_S = 470.0
"""A device command lasts at most 10 minutes; each part plans for 8 (the setup included)."""
PACK_SKIP = ("raw", "ws", "softmax-repo")
"""Work folders not packed as they are: raw/ is packed first; the workspaces' evidence is
exported into raw/ (collect); the target repo is examples/softmax."""
AA_CHANGE = {
    "kind": "comment",
    "text": "wave2 A/A: a comment-only change (the code is the same)",
    "hypothesis": "A/A: a comment-only change; the kernel's code is the same",
}


@dataclass
class Ctx:
    part: str
    smoke: bool
    out: Path
    work: Path
    raw: Path
    summary: Summary
    budget: Budget
    no_sandbox: bool

    @property
    def flags(self) -> list[str]:
        return ["--no-sandbox"] if self.no_sandbox else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=("part1", "part2", "part3", "part4"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true", help="no GPU: Triton's interpreter, tiny runs, no ncu")
    ap.add_argument("--budget-s", type=float, default=None, help="wall seconds for this part (device: 470)")
    ap.add_argument(
        "--work",
        type=Path,
        default=None,
        help="scratch folder outside /tmp (a sandboxed proposer cannot see /tmp); default $WAVE2_WORK or ~/kopt-wave2",
    )
    a = ap.parse_args(argv)
    device_wave.LOG_NAME = "wave2"
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = a.work or Path(os.environ.get("WAVE2_WORK") or Path.home() / "kopt-wave2")
    work, raw = device_wave.fresh_work_dir(base, a.part, a.smoke)
    mode = "smoke (no GPU: Triton's interpreter, CPU timings)" if a.smoke else "device"
    summary = Summary(out, a.part, mode, os.environ.get("WAVE2_COMMAND") or shell_line([sys.executable, *sys.argv]))
    budget = Budget(a.budget_s if a.budget_s is not None else (1800.0 if a.smoke else DEVICE_BUDGET_S))
    summary.data["machine"] = machine_info(smoke=a.smoke)
    summary.data["budget_s"] = round(budget.total_s)
    summary.data["work"] = str(work)
    if os.environ.get("WAVE2_SETUP"):
        summary.data["setup"] = os.environ["WAVE2_SETUP"]
    no_sandbox = sandbox_choice(summary)
    ctx = Ctx(a.part, a.smoke, out, work, raw, summary, budget, no_sandbox)
    try:
        {"part1": part1, "part2": part2, "part3": part3, "part4": part4}[a.part](ctx)
    finally:
        with measured(summary, "pack") as e:
            members = [(raw, "raw"), *[(p, p.name) for p in sorted(work.iterdir()) if p.name not in PACK_SKIP]]
            e.update(pack(out / f"{a.part}.tgz", members))
        summary.finish()
        print_tail(summary)
    failed = [n for n, s in summary.data["steps"].items() if s.get("ok") is False]
    return 1 if failed else 0


def sandbox_choice(summary: Summary) -> bool:
    """--no-sandbox or not: WAVE2_SANDBOX=on|off|auto (auto: bubblewrap when it works here)."""
    return device_wave.sandbox_choice(summary, "WAVE2_SANDBOX")


def print_tail(summary: Summary) -> None:
    """The end of the output (what the device's reply shows): the main tables, then every
    step's outcome."""
    device_wave.print_tail(
        summary, tables=lambda name, title: "iterations" in title or "side by side" in name or "Ray lane" in title
    )


# ---------------------------------------------------------------------------------------
# kopt runs with a deadline


def kopt_run(
    ctx: Ctx, root: Path, tag: str, args: list[str], log_name: str, *, soft_s: float, grace_s: float = 45.0
) -> CmdResult:
    """A kopt command that runs the engine (demo --headless, run --foreground): asked to stop
    (`kopt stop TAG`) at soft_s, killed at soft_s + grace_s. What it recorded stays in run.db."""
    return device_wave.kopt_engine(ctx.raw, root, tag, args, log_name, soft_s=soft_s, grace_s=grace_s)


def collect(ctx: Ctx, root: Path, tag: str) -> list[dict[str, Any]]:
    """The run's records (exported as JSON beside a copy of its run.db, its report and status),
    read back as iteration views."""
    export_run(ctx.raw, root, tag)
    return records.iteration_views(root, tag)


# ---------------------------------------------------------------------------------------
# part1: verification on the H100


def part1(ctx: Ctx) -> None:
    s = ctx.summary
    with measured(s, "ncu_range_capture") as e:
        ncu = find_ncu()
        if os.environ.get("WAVE2_P1_CAPTURE", "1") == "0":
            e["skipped"] = "WAVE2_P1_CAPTURE=0 (the capture is committed in tests/data/ncu_h100_ranges)"
        elif ctx.smoke or ncu is None:
            e["skipped"] = (
                "no ncu here (smoke mode)" if ctx.smoke else "ncu not found on PATH or in /usr/local/cuda/bin"
            )
            if not ctx.smoke:
                e["ok"] = False
                e["error"] = e["skipped"]
        else:
            dest = ctx.work / "ncu_h100_ranges"
            argv = [sys.executable, "tests/data/capture_ranges.py", "--tool", "ncu", "--out", str(dest)]
            res = run_cmd(
                argv,
                ctx.raw / "capture_ranges.log",
                timeout_s=max(60.0, min(180.0, ctx.budget.left() - 300)),
                cwd=REPO,
                env=child_env(),
                echo="  [capture] ",
            )
            e["commands"].append(
                f"python3 tests/data/capture_ranges.py --tool ncu --out <work>/ncu_h100_ranges "
                f"(here: {shell_line(argv)})"
            )
            e.update(result=res.to_dict(), ok=res.ok)
            log = res.log.read_text(errors="replace")
            e["checks"] = [ln for ln in log.splitlines() if ln.startswith(("PASS:", "FAIL:"))]
            if (dest / "expect.json").is_file():
                e["groups"] = json.loads((dest / "expect.json").read_text()).get("groups")
            e["packed"] = pack(ctx.out / "ncu_h100_ranges.tgz", [(dest, "ncu_h100_ranges")])
            e["commit_to"] = (
                "tests/data/ncu_h100_ranges/ (from ncu_h100_ranges.tgz: expect.json, ncu_import.csv, "
                "ncu_nvtx.csv, command.txt, workload.py; leave raw/ out) — "
                "tests/profile/test_profile_attribution.py parses it against its expect.json"
            )
            if not res.ok:
                e["error"] = f"capture_ranges exited {res.rc}: {res.tail(3)}"
            e["headline"] = f"rc {res.rc}; " + "; ".join(e["checks"])
    with measured(s, "ncu_under_the_sandbox") as e:
        if ctx.smoke or find_ncu() is None or ctx.no_sandbox:
            e["skipped"] = (
                "smoke mode"
                if ctx.smoke
                else "no ncu"
                if find_ncu() is None
                else "the runs are unconfined (--no-sandbox)"
            )
        else:
            e["commands"].append(
                "experiments/h100_wave2/probes.py: ncu_under_sandbox (kopt's ncu command on a "
                "torch workload, confined by engine.sandbox.for_bench through engine.runner)"
            )
            got = probes.ncu_under_sandbox(ctx.work)
            e.update(got)
            e["headline"] = f"ncu under bubblewrap: {'works' if got.get('ok') else 'FAILS'} ({got.get('seconds')} s)"
            if got.get("ok") is False:
                e["ok"] = False
                e["error"] = f"ncu fails inside kopt's sandbox: {got.get('why')}"
                if os.environ.get("WAVE2_SANDBOX", "auto") == "auto":
                    ctx.no_sandbox = True
                    s.note(
                        "ncu fails inside kopt's sandbox on this machine (ncu_under_the_sandbox): the demos run "
                        "with --no-sandbox so that the profiler's figures exist; WAVE2_SANDBOX=on keeps the sandbox"
                    )
    root = ctx.work / "ws"
    kernels = tuple(k for k in os.environ.get("WAVE2_DEMOS", "rmsnorm,adaln").split(",") if k)
    iters = int(os.environ.get("WAVE2_DEMO_ITERS", "1" if ctx.smoke else "10"))
    for n, kernel in enumerate(kernels):
        with measured(s, f"demo_{kernel}") as e:
            left = len(kernels) - n
            reserve = 40.0
            soft = max(60.0, (ctx.budget.left() - reserve) / left - 50.0)
            if ctx.smoke:
                soft = max(soft, 600.0)
            soft = min(soft, float(os.environ.get("WAVE2_DEMO_S", soft)))
            tag = f"wave2-{kernel}"
            args = ["demo", "--headless", "--kernel", kernel, "--tag", tag, "--max-iters", str(iters), *ctx.flags]
            e["commands"].append(
                shell_line(["kopt", "--root", str(root), *args]) + f"   (asked to stop at {soft:.0f} s)"
            )
            res = kopt_run(ctx, root, tag, args, f"demo_{kernel}.log", soft_s=soft)
            e["result"] = res.to_dict()
            views = collect(ctx, root, tag)
            e["iterations"] = views
            fig = records.verification_figures(views)
            e["figures"] = fig
            e["tables"] = {
                "iterations": records.iteration_table(views),
                "profiler per class (keeps the bench called)": records.class_change_table(views),
                "kernels the profiler attributed to each config range": records.range_table(views),
            }
            e["profiler"] = (
                "on: [profile] kind = auto (ncu on the GPU)"
                if not ctx.smoke
                else "off: no GPU vendor here, kind = auto resolves to none (smoke mode)"
            )
            e["ok"] = res.rc == 0 and not res.killed
            if not e["ok"]:
                e["error"] = f"exit {res.rc}{' (killed at the hard deadline)' if res.killed else ''}: {res.tail(3)}"
            rv = fig["reverify_s_per_bench_keep"]
            e["headline"] = (
                f"{fig['iterations']} iterations, {fig['keeps']} keeps; fresh-process re-decision per bench keep: median "
                f"{rv['median']} s (n={rv['n']}); profiler disagreed on {fig['profiler_disagreed']}; "
                f"class-targeted keeps rejected by the profiler: "
                f"{[x['version'] for x in fig['class_targeted_keeps_rejected_by_profiler']]}"
            )


# ---------------------------------------------------------------------------------------
# part2 (and part3's target): the softmax example


def softmax_setup(ctx: Ctx) -> tuple[Path, Any, Path]:
    """The example's repo, the onboarding's proposal, the proposer script (outside /tmp)."""
    s = ctx.summary
    with measured(s, "onboarding") as e:
        repo = softmax_target.make_repo(ctx.work / "softmax-repo")
        t0 = time.monotonic()
        proposal = softmax_target.onboard(repo, ctx.raw / "onboard")
        e["wall_s"] = round(time.monotonic() - t0, 2)
        e["commands"].append(
            f"engine.onboard.run_once(repo, '{sys.executable} kopt_bench.py') + propose(run) "
            '(what `kopt init --bench "python kopt_bench.py"` does)'
        )
        text = proposal.text()
        (ctx.raw / "onboard" / "proposed_kopt.toml").write_text(text)
        e["bench_run_s"] = round(proposal.run.seconds, 2)
        e["decision_cost_estimate"] = proposal.cost.text() if proposal.cost is not None else None
        e["proposed"] = {
            "target": {
                k: proposal.target.get(k)
                for k in ("bench", "serve", "calls", "metric", "correct", "class_by", "production")
            },
            "sections": proposal.sections,
        }
        e["headline"] = f"bench once {e['bench_run_s']} s; {e['decision_cost_estimate']}"
    if not s.data["steps"]["onboarding"].get("ok"):
        raise RuntimeError(f"the onboarding failed ({s.data['steps']['onboarding'].get('error')}): nothing to run")
    proposer = softmax_target.install_tools(ctx.work / "tools")
    return repo, proposal, proposer


def change_from_prescan(ctx: Ctx, repo: Path) -> dict[str, Any]:
    """The ~3% candidate: the prescan's choice (a real launch change, else a calibrated delay)."""
    s = ctx.summary
    direction = os.environ.get("WAVE2_DIRECTION", "slower")
    fallback = {
        "kind": "set",
        "name": "ROWS_PER_PROGRAM",
        "value": 2,
        "variant": "ROWS_PER_PROGRAM=2",
        "real_change": True,
    }
    with measured(s, "prescan") as e:
        out = ctx.raw / "prescan.json"
        argv = [
            sys.executable,
            str(HERE / "prescan.py"),
            "--repo",
            str(repo),
            "--out",
            str(out),
            "--direction",
            direction,
            "--reps",
            "1" if ctx.smoke else "3",
        ]
        e["commands"].append(shell_line(argv))
        res = run_cmd(argv, ctx.raw / "prescan.log", timeout_s=240, cwd=REPO, env=child_env(), echo="  [prescan] ")
        e["result"] = res.to_dict()
        if not res.ok or not out.is_file():
            e.update(
                ok=False,
                error=f"prescan exited {res.rc}: {res.tail(3)}; the candidate falls back to {fallback['variant']}",
            )
            return fallback
        found = json.loads(out.read_text())
        e["per_class_ratio"] = found["per_class_ratio"]
        e["chosen"] = found["chosen"]
        e["tables"] = {
            "prescan: candidate/committed time, geometric mean over the production shapes": {
                "columns": ["variant", *found["dtypes"]],
                "rows": [
                    [v, *[f"{(r[d] - 1) * 100:+.2f}%" for d in found["dtypes"]]]
                    for v, r in found["per_class_ratio"].items()
                ],
            }
        }
        if found["chosen"] is None:
            e["note"] = (
                f"no variant moved every class {direction} by 1.5-6% here; falling back to {fallback['variant']}"
            )
            return fallback
        e["headline"] = (
            f"chosen {found['chosen']['variant']} ({'real change' if found['chosen']['real_change'] else 'injected delay'})"
        )
        return dict(found["chosen"])


def change_entry(change: dict[str, Any]) -> dict[str, Any]:
    ratio = change.get("ratio_by_class")
    why = f" (prescan: {', '.join(f'{c} {(r - 1) * 100:+.1f}%' for c, r in ratio.items())})" if ratio else ""
    what = "a real launch change" if change.get("real_change", True) else "an injected delay"
    return {**change, "hypothesis": f"{change['variant']}: {what}{why}"}


def run_mode(
    ctx: Ctx,
    repo: Path,
    proposal: Any,
    proposer: Path,
    *,
    name: str,
    mode: str,
    changes: dict[int, dict[str, Any]],
    soft_s: list[float | Callable[[], float]],
    gpu: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    one_session: bool = False,
    lanes: int = 1,
) -> list[dict[str, Any]]:
    """One workspace of `mode`: kopt init, then one `kopt run --max-iters 1` per change (each
    its own command, soft_s[i] its deadline, or a function of the time left then), or with
    one_session every change in one `kopt run` (the sum of the deadlines). Returns a row per
    candidate."""
    root = ctx.work / "ws"
    tag = f"wave2-{name}"
    cfg = ctx.work / f"{name}.toml"
    changes_file = softmax_target.write_changes(ctx.work / "tools" / f"changes_{name}.json", changes)
    cfg.write_text(
        softmax_target.config_text(
            proposal,
            mode,
            proposer,
            changes_file,
            smoke=ctx.smoke,
            gpu=gpu,
            allow_sleep=any(c["kind"] == "delay" for c in changes.values()),
            lanes=lanes,
        )
    )
    rows: list[dict[str, Any]] = []
    with measured(ctx.summary, f"{name}: init") as e:
        args = ["init", "--repo", str(repo), "--tag", tag, "--config", str(cfg)]
        e["commands"].append(shell_line(["kopt", "--root", str(root), *args]))
        res = run_cmd(kopt_argv(root, *args), ctx.raw / f"{name}_init.log", timeout_s=120, env=child_env(env), cwd=REPO)
        e.update(result=res.to_dict(), ok=res.ok, config=cfg.read_text())
        if not res.ok:
            e["error"] = res.tail(3)
            return rows
    if one_session:  # every change in one `kopt run`: what a continuous run pays per decision
        with measured(ctx.summary, f"{name}: {len(changes)} candidates in one session") as e:
            soft = sum(float(x() if callable(x) else x) for x in soft_s)
            if not ctx.smoke:
                soft = max(30.0, min(soft, ctx.budget.left() - 60.0))
            res = run_iterations(ctx, e, root, tag, len(changes), soft, f"{name}_session.log", name, env)
            views = {v["version"]: v for v in records.iteration_views(root, tag)}
            for i, (version, change) in enumerate(sorted(changes.items())):
                rows.append(
                    candidate_row(name, mode, change, views.get(version), res, views.get(0) if i == 0 else None)
                )
            e["candidates"] = rows
            e["ok"] = res.rc == 0 and not res.killed and all(views.get(v) for v in changes)
            e["headline"] = "; ".join(
                f"v{r['version']} {r['candidate']}: {r['status']} in {r['to_verdict_s']} s ({r['rounds']} looks)"
                for r in rows
            )
    for i, (version, change) in enumerate(sorted(changes.items()) if not one_session else []):
        with measured(ctx.summary, f"{name}: v{version} {change['variant'] if 'variant' in change else 'A/A'}") as e:
            limit = soft_s[i]
            soft = float(limit() if callable(limit) else limit)
            res = run_iterations(ctx, e, root, tag, 1, soft, f"{name}_v{version}.log", name, env)
            views = {v["version"]: v for v in records.iteration_views(root, tag)}
            view = views.get(version)
            row = candidate_row(name, mode, change, view, res, views.get(0) if i == 0 else None)
            e["candidate"] = row
            e["iteration"] = view
            e["ok"] = res.rc == 0 and not res.killed and view is not None
            if not e["ok"]:
                e["error"] = f"exit {res.rc}{' (killed)' if res.killed else ''}: {res.tail(3)}"
            e["headline"] = (
                f"{row['status']} ({row['verdict']}) after {row['rounds']} looks, "
                f"{row['to_verdict_s']} s to the verdict, command {row['command_wall_s']} s"
            )
            rows.append(row)
    with measured(ctx.summary, f"{name}: collect") as e:
        collect(ctx, root, tag)
        phases = serve_phases(root / tag)
        if phases:
            e["serve_phases"] = phases
            e["headline"] = (
                "served looks, mean seconds per phase: "
                + ", ".join(f"{k} {v:.3f}" for k, v in phases["mean_s"].items())
                + f" ({phases['looks']} looks)"
            )
    return rows


def serve_phases(ws: Path) -> dict[str, Any]:
    """Where a served look's time goes: the harness logs `look N: bench phases: check 0.41 s,
    capture 0.12 s, timing 0.05 s; total ...` for every look (kernels/harness/bench.py)."""
    import re

    per: dict[str, list[float]] = {}
    looks = 0
    for log in sorted(ws.glob("logs/**/*serve*.err")):
        for line in log.read_text(errors="replace").splitlines():
            m = re.search(r"look \d+: bench phases: (.*?); total", line)
            if not m:
                continue
            looks += 1
            for part in m.group(1).split(", "):  # "check 0.41 s"
                words = part.split()
                if len(words) == 3:
                    per.setdefault(words[0], []).append(float(words[1]))
    return {"looks": looks, "mean_s": {k: sum(v) / len(v) for k, v in per.items()}} if looks else {}


def run_iterations(
    ctx: Ctx,
    e: dict[str, Any],
    root: Path,
    tag: str,
    iters: int,
    soft: float,
    log_name: str,
    name: str,
    env: dict[str, str] | None,
) -> CmdResult:
    """`kopt run TAG --foreground --max-iters ITERS`, asked to stop (`kopt stop`) at `soft`
    seconds and killed 45 s later; the command and its result go into the step `e`."""
    args = ["run", tag, "--foreground", "--max-iters", str(iters), *ctx.flags]
    e["commands"].append(shell_line(["kopt", "--root", str(root), *args]) + f"   (asked to stop at {soft:.0f} s)")
    res = run_cmd(
        kopt_argv(root, *args),
        ctx.raw / log_name,
        timeout_s=soft + 45,
        stop_after_s=soft,
        on_stop=stopper(root, tag),
        env=child_env(env),
        cwd=REPO,
        echo=f"  [{name}] ",
    )
    e["result"] = res.to_dict()
    return res


def candidate_row(
    name: str,
    mode: str,
    change: dict[str, Any],
    view: dict[str, Any] | None,
    res: CmdResult,
    baseline: dict[str, Any] | None,
) -> dict[str, Any]:
    t = (view or {}).get("timings") or {}
    measure_s = None if not view else round(float(t.get("looks_sum_s") or 0) + float(t.get("reload_s") or 0), 2)
    return {
        "workspace": name,
        "mode": mode,
        "candidate": "A/A (comment only)" if change["kind"] == "comment" else change.get("variant"),
        "version": (view or {}).get("version"),
        "status": (view or {}).get("status"),
        "verdict": (view or {}).get("verdict"),
        "rounds": (view or {}).get("rounds"),
        "looks": t.get("looks_n"),
        "classes": (view or {}).get("classes"),
        "flags": (view or {}).get("flags"),
        "to_verdict_s": t.get("total_s"),
        "measure_s": measure_s,
        "gate_wait_s": t.get("gate_wait_s"),
        "proposer_s": t.get("proposer_s"),
        "police_s": t.get("police_s"),
        "reload_s": t.get("reload_s"),
        "reverify_s": t.get("reverify_s"),
        "engine_s": t.get("engine_s"),
        "command_wall_s": round(res.wall_s, 2),
        "stopped_at_deadline": res.stopped,
        "baseline_s": (baseline or {}).get("timings", {}).get("total_s") if baseline else None,
    }


ROW_COLUMNS = [
    "workspace",
    "candidate",
    "status",
    "verdict",
    "rounds",
    "to_verdict_s",
    "measure_s",
    "gate_wait_s",
    "proposer_s",
    "reverify_s",
    "command_wall_s",
    "baseline_s",
    "stopped_at_deadline",
]


def rows_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"columns": ROW_COLUMNS, "rows": [[r.get(c) for c in ROW_COLUMNS] for r in rows]}


def part2(ctx: Ctx) -> None:
    s = ctx.summary
    repo, proposal, proposer = softmax_setup(ctx)
    change = change_entry(change_from_prescan(ctx, repo))
    rows: list[dict[str, Any]] = []
    b = ctx.budget
    big = 600.0 if ctx.smoke else 0.0  # the CPU's interpreter is slow; its deadlines only guard a hang
    modes = os.environ.get("WAVE2_P2_MODES", "served,process,gate").split(",")
    # one command per candidate (each a new engine: its first full GPU check and its listing of
    # what the bench's Python can import), then the same four in one session (a continuous run)
    if "served" in modes:
        rows += run_mode(
            ctx,
            repo,
            proposal,
            proposer,
            name="served",
            mode="served",
            changes={1: AA_CHANGE, 2: change, 3: AA_CHANGE, 4: change},
            soft_s=[max(big, 75.0)] * 4,
        )
    if "session" in modes:
        rows += run_mode(
            ctx,
            repo,
            proposal,
            proposer,
            name="served-session",
            mode="served",
            changes={1: AA_CHANGE, 2: change, 3: AA_CHANGE, 4: change},
            soft_s=[max(big, 40.0)] * 4,
            one_session=True,
        )
    # process-level: the change first, then the A/A with what is left (its looks are whole
    # processes; at the default max_rounds it may not settle in the time a device call has)
    if "process" in modes:
        rows += run_mode(
            ctx,
            repo,
            proposal,
            proposer,
            name="process",
            mode="process",
            changes={1: change, 2: AA_CHANGE},
            soft_s=[max(big, 110.0), lambda: max(big, 60.0, min(240.0, b.left() - 90.0))],
        )
    if "gate" in modes and b.left() > 110 and not ctx.smoke:
        gate = {"samples": 2, "sample_interval_s": 0.5}
        rows += run_mode(
            ctx,
            repo,
            proposal,
            proposer,
            name="served-gate2x0.5",
            mode="served",
            changes={1: AA_CHANGE, 2: change},
            soft_s=[40.0, 40.0],
            gpu=gate,
        )
    else:
        s.note(
            f"skipped the served run with the bundled demos' GPU gate (2 samples 0.5 s apart): "
            f"{b.left():.0f} s left" + (" (smoke mode)" if ctx.smoke else "")
        )
    with measured(s, "byo: decisions side by side") as e:
        e["rows"] = rows
        e["tables"] = {
            "each candidate, each mode (seconds from the records' timings; command_wall_s: the whole "
            "`kopt run --max-iters 1`, baseline included on a workspace's first run)": rows_table(rows)
        }
        e["targets"] = byo_targets(rows, change)
        e["headline"] = "; ".join(
            f"{k}: {v['to_verdict_s']} s, {v['status']}, {'met' if v['met'] else 'NOT met'}"
            for k, v in e["targets"].items()
        )


DECIDED = ("keep", "regression", "likely_regression", "tie", "split")
"""Statuses the statistics reached (a rejected or accepted candidate went to review: undecided,
or a flag sent it there)."""


def byo_targets(rows: list[dict[str, Any]], change: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, judged on the served rows: the A/A decided as a tie within 10 s,
    the ~3% change decided in its direction (as the prescan measured it) within 15 s."""
    ratios = list((change.get("ratio_by_class") or {}).values())
    right: tuple[str, ...]
    if ratios and all(r > 1 for r in ratios):
        right, direction = ("regression", "likely_regression"), "slower"
    elif ratios and all(r < 1 for r in ratios):
        right, direction = ("keep",), "faster"
    else:
        right, direction = DECIDED, "unknown (no prescan ratio)"
    out: dict[str, Any] = {}
    for text, is_aa, limit, want in (
        ("A/A decided (tie) in <= 10 s, served", True, 10.0, ("tie",)),
        (f"~3% change ({direction}) decided in <= 15 s, served", False, 15.0, right),
    ):
        row = next(
            (
                r
                for r in rows
                if r["workspace"] in ("served", "served-session") and r["candidate"].startswith("A/A") == is_aa
            ),
            None,
        )
        if row is None or row["to_verdict_s"] is None:
            out[text] = {"to_verdict_s": None, "status": None, "met": False, "why": "no served row"}
            continue
        out[text] = {
            "to_verdict_s": row["to_verdict_s"],
            "status": row["status"],
            "expected": list(want),
            "decided": row["status"] in DECIDED,
            "met": row["status"] in want and float(row["to_verdict_s"]) <= limit,
        }
    return out


# ---------------------------------------------------------------------------------------
# part3: one lane over Ray against the same run locally


def ray_cli() -> list[str]:
    beside = Path(sys.executable).parent / "ray"
    return [str(beside)] if beside.is_file() else [shutil.which("ray") or "ray"]


P3_CHANGES: dict[int, dict[str, Any]] = {
    1: AA_CHANGE,
    2: {
        "kind": "set",
        "name": "NUM_WARPS",
        "value": 8,
        "variant": "NUM_WARPS=8",
        "hypothesis": "NUM_WARPS 4 -> 8: more threads per row",
    },
    3: {
        "kind": "set",
        "name": "ROWS_PER_PROGRAM",
        "value": 2,
        "variant": "ROWS_PER_PROGRAM=2",
        "hypothesis": "ROWS_PER_PROGRAM 1 -> 2: fewer, longer programs",
    },
}


def part3(ctx: Ctx) -> None:
    s = ctx.summary
    n = int(os.environ.get("WAVE2_P3_ITERS", "2" if ctx.smoke else "3"))
    changes = {k: v for k, v in P3_CHANGES.items() if k <= n}
    if ctx.smoke and n >= 2:  # the interpreter ignores warps: a change it can see
        changes[2] = P3_CHANGES[3]
    ray_up = False
    try:
        with measured(s, "ray head") as e:
            try:
                import ray

                e["ray_version"] = ray.__version__
            except ImportError as exc:
                raise RuntimeError(
                    "ray is not importable: carry its wheel (experiments/h100_wave2/fetch_wheels.sh)"
                ) from exc
            argv = [
                *ray_cli(),
                "start",
                "--head",
                "--num-cpus",
                "8",
                "--num-gpus",
                "1",
                "--include-dashboard=false",
                "--disable-usage-stats",
                "--object-store-memory",
                str(1_000_000_000),
            ]
            e["commands"].append(shell_line(argv))
            res = run_cmd(argv, ctx.raw / "ray_start.log", timeout_s=120, env=child_env(), cwd=REPO, echo="  [ray] ")
            e.update(result=res.to_dict(), ok=res.ok)
            ray_up = res.ok
            if not res.ok:
                e["error"] = res.tail(5)
            status = run_cmd(
                [*ray_cli(), "status"], ctx.raw / "ray_status.log", timeout_s=60, env=child_env(), cwd=REPO
            )
            e["ray_status"] = status.tail(25)
        repo, proposal, proposer = softmax_setup(ctx)
        rows: dict[str, list[dict[str, Any]]] = {}
        b = ctx.budget

        remaining = [len(changes) * (2 if ray_up else 1)]

        def share() -> float:
            """A candidate's deadline, when it starts: an even share of what is left among the
            candidates still to run (the first one carries its workspace's baseline)."""
            n, remaining[0] = remaining[0], max(1, remaining[0] - 1)
            return max(600.0 if ctx.smoke else 45.0, (b.left() - 60.0) / n)

        if ray_up:
            rows["ray"] = run_mode(
                ctx, repo, proposal, proposer, name="ray", mode="ray", changes=changes, soft_s=[share] * len(changes)
            )
        else:
            s.note("the Ray run was skipped: the head did not start")
        rows["local"] = run_mode(
            ctx, repo, proposal, proposer, name="local", mode="served", changes=changes, soft_s=[share] * len(changes)
        )
        with measured(s, "lanes: ray vs local") as e:
            e["order"] = "ray first, then local (the onboarding's bench run warmed imports before both)"
            table = []
            same = []
            for version in sorted(changes):
                r = next((x for x in rows.get("ray", []) if x["version"] == version), None)
                loc = next((x for x in rows["local"] if x["version"] == version), None)
                agree = bool(r and loc and r["status"] == loc["status"])
                same.append(agree)
                table.append(
                    [
                        f"v{version}",
                        loc and loc["candidate"],
                        r and r["status"],
                        loc and loc["status"],
                        r and r["rounds"],
                        loc and loc["rounds"],
                        r and r["to_verdict_s"],
                        loc and loc["to_verdict_s"],
                        r and r["command_wall_s"],
                        loc and loc["command_wall_s"],
                        "same" if agree else "DIFFERENT",
                    ]
                )
            e["tables"] = {
                "verdicts and seconds, Ray lane vs local": {
                    "columns": [
                        "it",
                        "candidate",
                        "ray status",
                        "local status",
                        "ray rounds",
                        "local rounds",
                        "ray to_verdict_s",
                        "local to_verdict_s",
                        "ray command s",
                        "local command s",
                        "verdicts",
                    ],
                    "rows": table,
                }
            }
            e["rows"] = rows
            ray_totals = [x["to_verdict_s"] for x in rows.get("ray", []) if x["to_verdict_s"] is not None]
            loc_totals = [x["to_verdict_s"] for x in rows["local"] if x["to_verdict_s"] is not None]
            e["median_to_verdict_s"] = {
                "ray": round(statistics.median(ray_totals), 2) if ray_totals else None,
                "local": round(statistics.median(loc_totals), 2) if loc_totals else None,
            }
            e["same_verdicts"] = all(same) and bool(rows.get("ray"))
            e["ok"] = bool(rows.get("ray"))
            e["headline"] = (
                f"same verdicts: {e['same_verdicts']} ({sum(same)}/{len(same)}); median seconds to a "
                f"verdict ray {e['median_to_verdict_s']['ray']} vs local {e['median_to_verdict_s']['local']}"
            )
    finally:
        if ray_up:
            res = run_cmd(
                [*ray_cli(), "stop", "--force"], ctx.raw / "ray_stop.log", timeout_s=60, env=child_env(), cwd=REPO
            )
            s.data.setdefault("ray_stop", res.to_dict())
        logs = Path("/tmp/ray/session_latest/logs")
        if logs.is_dir():
            shutil.copytree(
                logs, ctx.raw / "ray_logs", dirs_exist_ok=True, symlinks=False, ignore_dangling_symlinks=True
            )


# ---------------------------------------------------------------------------------------
# part4: lanes on a multi-GPU host (the softmax example, served, one session per run)


P4_REAL: list[dict[str, Any]] = [
    {"kind": "set", "name": "NUM_WARPS", "value": 8, "variant": "NUM_WARPS=8", "hypothesis": "NUM_WARPS 4 -> 8"},
    {
        "kind": "set",
        "name": "ROWS_PER_PROGRAM",
        "value": 2,
        "variant": "ROWS_PER_PROGRAM=2",
        "hypothesis": "ROWS_PER_PROGRAM 1 -> 2",
    },
    {"kind": "set", "name": "NUM_WARPS", "value": 16, "variant": "NUM_WARPS=16", "hypothesis": "NUM_WARPS 4 -> 16"},
    {"kind": "set", "name": "NUM_WARPS", "value": 1, "variant": "NUM_WARPS=1", "hypothesis": "NUM_WARPS 4 -> 1"},
]


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def part4(ctx: Ctx) -> None:
    """alone: lanes = 1, A/A candidates (the spread of an A/A look on a quiet host); beside:
    lanes = the host's GPUs, A/A candidates in every lane at once (each with a busy neighbour
    GPU); mixed: the same lanes, A/A and real changes alternating. Then, from the records: each
    lane's GPU (never two lanes on one GPU at once), false keeps and false regressions of the
    A/A candidates, and their intervals' widths alone vs beside."""
    s = ctx.summary
    n_gpu = max(1, gpu_count())
    per = int(os.environ.get("WAVE2_P4_AA", "2" if ctx.smoke else "6"))
    repo, proposal, proposer = softmax_setup(ctx)
    big = 600.0 if ctx.smoke else 0.0
    plans = {
        "alone": (1, {i: AA_CHANGE for i in range(1, per + 1)}),
        "beside": (n_gpu, {i: AA_CHANGE for i in range(1, per * n_gpu // 2 + per + 1)}),
        "mixed": (
            n_gpu,
            {i: (AA_CHANGE if i % 2 else P4_REAL[(i // 2 - 1) % len(P4_REAL)]) for i in range(1, 2 * len(P4_REAL) + 1)},
        ),
    }
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, (lanes, changes) in plans.items():
        if ctx.budget.left() < 90 and not ctx.smoke:
            s.note(f"{name}: skipped, {ctx.budget.left():.0f} s left")
            continue
        runs[name] = run_mode(
            ctx,
            repo,
            proposal,
            proposer,
            name=name,
            mode="served",
            changes=changes,
            soft_s=[max(big, 25.0)] * len(changes),
            one_session=True,
            lanes=lanes,
        )
    with measured(s, "lanes on this host") as e:
        e["gpus"] = n_gpu
        e["runs"] = {name: lanes_figures(ctx.work / "ws", f"wave2-{name}") for name in runs}
        e["headline"] = "; ".join(
            f"{name}: {f['lanes_seen']} lane(s) on GPUs {f['gpus_by_lane']}, overlaps on one GPU {f['overlaps']}, "
            f"A/A {f['aa']['n']} (false keeps {f['aa']['false_keeps']}, false regressions "
            f"{f['aa']['false_regressions']}, median interval width {f['aa']['median_width_pct']}%), "
            f"{f['candidates']} candidates in {f['wall_s']} s"
            for name, f in e["runs"].items()
        )


def lanes_figures(root: Path, tag: str) -> dict[str, Any]:
    """From one workspace's records: each lane's GPUs, pairs of iterations of different lanes on
    one GPU at overlapping times, the A/A candidates' verdicts and interval widths."""
    import statistics

    its = [r for r in records.records_export(root, tag) if r["version"] > 0]
    by_lane: dict[int, set[Any]] = {}
    spans = []
    for r in its:
        rec = r["record"]
        g = rec.get("gpu") or {}
        by_lane.setdefault(int(rec.get("lane", 0)), set()).add(g.get("index"))
        spans.append(
            (
                int(rec.get("lane", 0)),
                g.get("uuid"),
                float(r["started_at"] or 0),
                float(r["finished_at"] or 0),
                r["version"],
            )
        )
    overlaps = [
        (a[4], b[4])
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if a[0] != b[0] and a[1] is not None and a[1] == b[1] and a[2] < b[3] and b[2] < a[3]
    ]
    aa = [r for r in its if str(r["hypothesis"]).startswith("A/A")]
    widths = [
        100.0 * (c["hi"] - c["lo"]) / 2
        for r in aa
        for c in (r["record"].get("classes") or {}).values()
        if isinstance(c, dict) and c.get("hi") and c.get("lo")
    ]
    t0 = min((r["started_at"] for r in its), default=0.0)
    t1 = max((r["finished_at"] or 0 for r in its), default=0.0)
    return {
        "lanes_seen": len(by_lane),
        "gpus_by_lane": {k: sorted(v, key=str) for k, v in sorted(by_lane.items())},
        "overlaps": overlaps,
        "candidates": len(its),
        "wall_s": round(t1 - t0, 1),
        "statuses": {str(r["version"]): r["status"] for r in its},
        "aa": {
            "n": len(aa),
            "false_keeps": sum(r["status"] in ("keep", "accepted") for r in aa),
            "false_regressions": sum(r["status"] in ("regression", "likely_regression") for r in aa),
            "median_width_pct": round(statistics.median(widths), 3) if widths else None,
            "widths_pct": [round(w, 3) for w in widths],
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
