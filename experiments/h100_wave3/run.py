"""The third H100 wave's parts (experiments/h100_wave3.sh calls this after its setup): the
"done when" figures of the measurement redesign (issue "Measure from outside the candidate's
reach").

    python -m experiments.h100_wave3.run part1|part2|part3|part4[,...] --out DIR [--smoke] [--budget-s S]

Parts joined by commas run one after the other in one call (one setup, one summary), each
leaving the later ones what they plan for (NEEDS_S).

part1  the demo: `kopt demo --headless` on RMSNorm from the naive start (the tune proposer, the
       profiler on, the catalog's served per-tree harness) for WAVE3_DEMO_S (300) seconds, then
       adaLN with what is left; per iteration the verdict, the decision's, the confirmation's
       and the profiler's seconds, the iteration's end to end seconds, the external truth of each
       keep, kopt's best speedup at each keep. Targets: confirmation <= 10 s, keep iteration <= 20 s.
part2  false keeps: >= 30 comment-only candidates on the tuned RMSNorm through the served path
       with the profiler on (expect 0 kept), seconds per decision; then the softmax example
       onboarded as `kopt init --bench` does and its first decision, compiling included (<= 15 s).
part3  hostile on the GPU: a timer patch the diff scan does not see (bench faster, the profiler
       no change: refuted; on the CPU the OS's accounting refutes it) and a candidate that answers
       timed calls with a cached row of the contract check's result (refuted by kopt's output audit).
part4  power: a real ~3% change of one class (found first with the harness alone:
       prescan_rms.py) tried 20 times, each from v0 (`kopt restart --from v0` after each keep;
       target: kept >= 19 of 20, served and process-level: WAVE3_P4_PROCESS=1), seconds per
       decision.

Every part writes DIR/summary.json and summary.md after every step (the command, the commit, the
GPU, the date, the redesign's pieces this checkout holds), and DIR/<part>.tgz with the raw logs,
run.db copies and every record as JSON. Raw files are written under the work folder (--work),
never straight into DIR: the device returns at most 8 files per command.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import device_wave
from experiments.device_wave import (
    REPO,
    Budget,
    CmdResult,
    child_env,
    export_run,
    gpu_name,
    kopt_argv,
    kopt_engine,
    measured,
    pack,
    run_cmd,
    shell_line,
)
from experiments.h100_wave3 import candidates, preflight, records, targets

HERE = Path(__file__).resolve().parent
DEVICE_BUDGET_S = 470.0
"""A device command lasts at most 10 minutes; each part plans for 8 (the setup included)."""
AA_TARGET = 30
POWER_TRIES = 20
POWER_KEPT_TARGET = 19
SOFTMAX_TARGET_S = 15.0


class Summary(device_wave.Summary):
    TITLE = "h100_wave3"


def scripts() -> list[Path]:
    return [
        REPO / "experiments" / "h100_wave3.sh",
        REPO / "experiments" / "device_wave.sh",
        REPO / "experiments" / "device_wave.py",
        *HERE.glob("*.py"),
    ]


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
    missing: list[str] = field(default_factory=list)
    reserve_s: float = 0.0
    """What the parts after this one in the same call need (NEEDS_S)."""

    def left(self) -> float:
        """Seconds this part may still spend: the budget left less what later parts need."""
        return self.budget.left() - self.reserve_s

    @property
    def root(self) -> Path:
        """The kopt root every workspace of the part lives under."""
        return self.work / "ws"

    @property
    def flags(self) -> list[str]:
        return ["--no-sandbox"] if self.no_sandbox else []

    def knob(self, name: str, device: str, smoke: str) -> str:
        return os.environ.get(f"WAVE3_{name}", smoke if self.smoke else device)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "part",
        help=f"one of {', '.join(PARTS)}, or several joined by commas (one call, one setup, "
        "one summary; each part plans for NEEDS_S on the device)",
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true", help="no GPU: Triton's interpreter, tiny runs, no ncu")
    ap.add_argument("--budget-s", type=float, default=None, help="wall seconds for this part (device: 470)")
    ap.add_argument(
        "--work",
        type=Path,
        default=None,
        help="scratch folder outside /tmp (a sandboxed proposer cannot see /tmp); default $WAVE3_WORK or ~/kopt-wave3",
    )
    a = ap.parse_args(argv)
    parts = a.part.split(",")
    if not all(p in PARTS for p in parts):
        ap.error(f"part {a.part!r}: one of {', '.join(PARTS)}, or several joined by commas")
    folder = "_".join(parts)
    device_wave.LOG_NAME = "wave3"
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = a.work or Path(os.environ.get("WAVE3_WORK") or Path.home() / "kopt-wave3")
    work, raw = device_wave.fresh_work_dir(base, folder, a.smoke)
    mode = "smoke (no GPU: Triton's interpreter, CPU timings)" if a.smoke else "device"
    summary = Summary(out, a.part, mode, os.environ.get("WAVE3_COMMAND") or shell_line([sys.executable, *sys.argv]))
    budget = Budget(a.budget_s if a.budget_s is not None else (1800.0 if a.smoke else DEVICE_BUDGET_S))
    summary.data["machine"] = device_wave.machine_info(
        smoke=a.smoke, commit_env="WAVE3_COMMIT", scripts=scripts(), digest_key="wave3_scripts_sha256"
    )
    summary.data["commit"] = summary.data["machine"]["repo_commit"]
    summary.data["gpu"] = gpu_name()
    summary.data["budget_s"] = round(budget.total_s)
    summary.data["work"] = str(work)
    if os.environ.get("WAVE3_SETUP"):
        summary.data["setup"] = os.environ["WAVE3_SETUP"]
    found = preflight.pieces()
    summary.data["pieces"] = found
    summary.data["missing_pieces"] = preflight.missing(found)
    if summary.data["missing_pieces"]:
        summary.note(
            "this checkout lacks pieces of the redesign: "
            + "; ".join(f"{n} ({found[n]['how']})" for n in summary.data["missing_pieces"])
            + ". The parts measure what it does."
        )
    no_sandbox = device_wave.sandbox_choice(summary, "WAVE3_SANDBOX")
    ctx = Ctx(a.part, a.smoke, out, work, raw, summary, budget, no_sandbox, list(summary.data["missing_pieces"]))
    try:
        for i, name in enumerate(parts):
            ctx.reserve_s = 0.0 if a.smoke else sum(NEEDS_S[p] for p in parts[i + 1 :])
            summary.data.setdefault("parts_run", []).append(name)
            summary.save()
            PARTS[name](ctx)
    finally:
        with measured(summary, "pack") as e:
            members = [(raw, "raw"), (work / "tools", "tools")]
            e.update(pack(out / f"{folder}.tgz", members))
        failed = [n for n, s in summary.data["steps"].items() if s.get("ok") is False]
        if failed and ctx.missing:
            summary.note(f"failed steps {failed}; pieces missing in this checkout when it ran: {ctx.missing}")
        summary.finish()
        device_wave.print_tail(
            summary, tables=lambda name, title: "iterations" in title or "hostile" in title or "tries" in title
        )
        if ctx.missing:
            device_wave.say(f"MISSING PIECES of the redesign in this checkout: {', '.join(ctx.missing)}")
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------
# What the parts share


def init_run(ctx: Ctx, name: str, repo: Path, config_text: str) -> str | None:
    """`kopt init` of workspace wave3-NAME on `repo` with `config_text`; its tag, or None when
    it failed (recorded in the step)."""
    tag = f"wave3-{name}"
    cfg = ctx.raw / f"{name}.toml"
    cfg.write_text(config_text)
    with measured(ctx.summary, f"{name}: init") as e:
        args = ["init", "--repo", str(repo), "--tag", tag, "--config", str(cfg)]
        e["commands"].append(shell_line(["kopt", "--root", str(ctx.root), *args]))
        res = run_cmd(
            kopt_argv(ctx.root, *args), ctx.raw / f"{name}_init.log", timeout_s=120, env=child_env(), cwd=REPO
        )
        e.update(result=res.to_dict(), ok=res.ok)
        if not res.ok:
            e["error"] = res.tail(3)
            return None
    return tag


def run_engine(
    ctx: Ctx,
    e: dict[str, Any],
    tag: str,
    iters: int,
    soft_s: float,
    log_name: str,
    while_running: Callable[[], None] | None = None,
) -> CmdResult:
    """`kopt run TAG --foreground --max-iters ITERS`, asked to stop at soft_s, killed 45 s later."""
    args = ["run", tag, "--foreground", "--max-iters", str(iters), *ctx.flags]
    e["commands"].append(shell_line(["kopt", "--root", str(ctx.root), *args]) + f"   (asked to stop at {soft_s:.0f} s)")
    res = kopt_engine(ctx.raw, ctx.root, tag, args, log_name, soft_s=soft_s, while_running=while_running)
    e["result"] = res.to_dict()
    return res


def read_rows(ctx: Ctx, tag: str) -> list[dict[str, Any]]:
    """The run's evidence exported under raw/, then its rows (records.iteration_rows)."""
    export_run(ctx.raw, ctx.root, tag)
    its, spans = records.read_run(ctx.root, tag)
    return records.iteration_rows(its, spans)


def report_run(ctx: Ctx, e: dict[str, Any], tag: str, res: CmdResult) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows, figures, the iteration table and how the run measured, into the step `e`."""
    rows = read_rows(ctx, tag)
    fig = records.figures(rows)
    e["measured_through"] = targets.measured_through(ctx.root / tag / "kopt.toml")
    e["iterations"] = rows
    e["figures"] = fig
    e["tables"] = {"iterations": records.iteration_table(rows)}
    e["ok"] = res.rc == 0 and not res.killed
    if not e["ok"]:
        e["error"] = f"exit {res.rc}{' (killed at the hard deadline)' if res.killed else ''}: {res.tail(4)}"
    return rows, fig


def _fmt_stats(s: dict[str, Any]) -> str:
    return f"median {s['median']} s, max {s['max']} s (n={s['n']})" if s["n"] else "none"


def install_tools(ctx: Ctx) -> Path:
    return targets.install_proposer(ctx.work / "tools")


# ---------------------------------------------------------------------------------------
# part1: the demos


def probe(ctx: Ctx) -> None:
    """The serve protocol probe alone (part1 starts with it; once per call: `probe,part1`
    asked for it twice, and the second found the first's repo and failed)."""
    if ctx.summary.data.get("probed"):
        return
    ctx.summary.data["probed"] = True
    with measured(ctx.summary, "serve protocol probe") as e:
        e["commands"].append(
            "preflight.protocol_probe: the catalog's [target].serve in a materialized RMSNorm repo, "
            "`look N SEED PATH` then `audit N SEED PATH`, N = 1..3 (2 and 3 on look 1's graphs)"
        )
        got = preflight.protocol_probe(ctx.work / "probe", cpu=ctx.smoke)
        e.update(got)
        e["headline"] = (
            f"looks 1-3 {[got.get(k, {}).get('seconds') for k in ('look', 'look2', 'look3')]} s "
            f"({got.get('look3', {}).get('reply')}), audits "
            f"{[got.get(k, {}).get('seconds') for k in ('audit', 'audit2', 'audit3')]} s; commitment "
            f"{got.get('commitment') or 'kept (every audited set as promised)'}"
        )
        if not got.get("ok"):
            e.update(
                ok=False, error=f"the per-tree serve protocol did not answer as the spec says: {got.get('why') or got}"
            )


def part1(ctx: Ctx) -> None:
    s = ctx.summary
    probe(ctx)
    kernels = [k for k in ctx.knob("DEMOS", "rmsnorm,adaln", "rmsnorm").split(",") if k]
    iters = int(ctx.knob("DEMO_ITERS", "1000", "2"))
    first_s = float(ctx.knob("DEMO_S", "300", "900"))
    for n, kernel in enumerate(kernels):
        name = f"demo_{kernel}"
        left = ctx.left() - 40.0  # the pack and the export of the last demo
        soft = (first_s if ctx.smoke else max(60.0, min(first_s, left - 45.0))) if n == 0 else left - 45.0
        if n > 0 and soft < 90.0 and not ctx.smoke:
            s.step(name, ok=None, skipped=f"{ctx.left():.0f} s left: not enough for a second demo")
            continue
        with measured(s, name) as e:
            tag = f"wave3-{kernel}"
            args = ["demo", "--headless", "--kernel", kernel, "--tag", tag, "--max-iters", str(iters), *ctx.flags]
            e["commands"].append(
                shell_line(["kopt", "--root", str(ctx.root), *args]) + f"   (asked to stop at {soft:.0f} s)"
            )
            res = kopt_engine(ctx.raw, ctx.root, tag, args, f"{name}.log", soft_s=soft)
            e["result"] = res.to_dict()
            rows, fig = report_run(ctx, e, tag, res)
            e["profiler"] = (
                "on: [profile] kind = auto (ncu on the GPU)"
                if not ctx.smoke
                else "on, but no GPU vendor here: kind = auto resolves to none (smoke mode)"
            )
            e["targets"] = {
                "confirmation <= 10 s per keep": fig["confirmation_target_met"],
                "keep iteration <= 20 s end to end": fig["keep_iteration_target_met"],
            }
            speed = fig["best_speedup_over_time"]
            e["headline"] = (
                f"{fig['candidates']} candidates, keeps {fig['keeps']}; confirmation per keep "
                f"{_fmt_stats(fig['confirmation_s_per_keep'])}; keep iteration "
                f"{_fmt_stats(fig['keep_iteration_s'])}; external truth {fig['external_truth_of_keeps']}; "
                f"best speedup {speed[-1]['best_speedup'] if speed else None} at "
                f"{speed[-1]['t_s'] if speed else None} s"
            )


# ---------------------------------------------------------------------------------------
# part2: false keeps (comment-only candidates), the softmax example's first decision


def rms_session(
    ctx: Ctx,
    name: str,
    plan: dict[str, dict[str, Any]],
    iters: int,
    soft_s: float,
    *,
    profile: bool,
    allow: list[str] | None = None,
    params: dict[str, Any] | None = None,
    driver: Callable[[Path, str], Callable[[], None]] | None = None,
    process: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]] | None:
    """One RMSNorm workspace (tuned params, or `params`) run by the scripted proposer with
    `plan`, up to `iters` iterations in one `kopt run`: (rows, figures, step) or None when it
    could not start."""
    proposer = install_tools(ctx)
    repo = targets.rms_repo(ctx.work / "repos" / name, cpu=ctx.smoke, params=params)
    plan_file = targets.write_plan(ctx.work / "tools" / f"plan_{name}.json", plan)
    pooled = ctx.knob("POOLED", "1", "1") == "1"  # [decide].pooled_noise (WAVE3_POOLED=0: off)
    config = targets.rms_config(repo, proposer, plan_file, profile=profile, allow=allow, process=process, pooled=pooled)
    tag = init_run(ctx, name, repo, config)
    if tag is None:
        return None
    with measured(ctx.summary, f"{name}: run") as e:
        e["plan"] = {k: {kk: (vv if kk != "text" else vv[:200]) for kk, vv in v.items()} for k, v in plan.items()}
        e["pooled_noise"] = pooled
        watch = driver(ctx.root, tag) if driver else None
        res = run_engine(ctx, e, tag, iters, soft_s, f"{name}_run.log", while_running=watch)
        rows, fig = report_run(ctx, e, tag, res)
        return rows, fig, e


def part2(ctx: Ctx) -> None:
    n = int(ctx.knob("AA_N", str(AA_TARGET), "2"))
    softmax_reserve = 0.0 if ctx.knob("SOFTMAX", "1", "1") == "0" else (600.0 if ctx.smoke else 100.0)
    soft = max(60.0, ctx.left() - softmax_reserve - 60.0) if not ctx.smoke else 1500.0
    got = rms_session(ctx, "aa", {"default": candidates.comment()}, n, soft, profile=True)
    if got is not None:
        rows, fig, e = got
        aa = [r for r in rows if r["version"] > 0 and r["hypothesis"].startswith("A/A")]
        decided = [r for r in aa if r["status"] in records.DECIDED]
        kept = [r["version"] for r in aa if r["status"] in records.KEPT]
        claimed = [r["version"] for r in aa if r["bench_claimed_gain"]]
        e["aa"] = {
            "candidates": len(aa),
            "decided": len(decided),
            "kept": kept,
            "bench_claimed_a_gain": claimed,
            "statuses": fig["statuses"],
            "decision_s": fig["decision_s"],
            "total_s_per_decided": fig["total_s_per_decided"],
            "target": f">= {AA_TARGET} comment-only candidates, 0 kept",
            "met": len(decided) >= AA_TARGET and not kept,
        }
        e["headline"] = (
            f"{len(aa)} comment-only candidates ({len(decided)} decided), kept {kept or 'none'}; the "
            f"bench's first decision claimed a gain in {claimed or 'none'}; per decision "
            f"{_fmt_stats(fig['decision_s'])}, end to end {_fmt_stats(fig['total_s_per_decided'])}; "
            f"target {'met' if e['aa']['met'] else 'NOT met'}"
        )
    if softmax_reserve:
        softmax_first_decision(ctx)


def softmax_first_decision(ctx: Ctx) -> None:
    """examples/softmax onboarded as `kopt init --bench` does, then one candidate: its first
    decision, the candidate's server compiling its kernels included."""
    from experiments.h100_wave2 import softmax_target

    s = ctx.summary
    with measured(s, "softmax: onboarding") as e:
        repo = softmax_target.make_repo(ctx.work / "repos" / "softmax")
        t0 = time.monotonic()
        proposal = softmax_target.onboard(repo, ctx.raw / "softmax_onboard")
        e["wall_s"] = round(time.monotonic() - t0, 2)
        e["commands"].append(
            f"engine.onboard.run_once(repo, '{sys.executable} kopt_bench.py') + propose(run) "
            '(what `kopt init --bench "python kopt_bench.py"` does)'
        )
        e["proposed_target"] = {k: proposal.target.get(k) for k in ("bench", "serve", "calls", "metric", "correct")}
        e["headline"] = (
            f"bench once {round(proposal.run.seconds, 2)} s; proposed serve = {proposal.target.get('serve')!r}"
        )
    if not s.data["steps"]["softmax: onboarding"].get("ok"):
        return
    change = (
        {
            "kind": "set",
            "name": "ROWS_PER_PROGRAM",
            "value": 2,
            "variant": "ROWS_PER_PROGRAM=2",
            "hypothesis": "ROWS_PER_PROGRAM 1 -> 2: fewer, longer programs",
        }
        if ctx.smoke
        else {
            "kind": "set",
            "name": "NUM_WARPS",
            "value": 8,
            "variant": "NUM_WARPS=8",
            "hypothesis": "NUM_WARPS 4 -> 8: more threads per row",
        }
    )
    tools = ctx.work / "tools"
    proposer = softmax_target.install_tools(tools)
    changes = softmax_target.write_changes(tools / "changes_softmax.json", {1: change})
    text = softmax_target.config_text(proposal, "served", proposer, changes, smoke=ctx.smoke)
    tag = init_run(ctx, "softmax", repo, text)
    if tag is None:
        return
    with measured(s, "softmax: first decision") as e:
        soft = 900.0 if ctx.smoke else max(45.0, ctx.left() - 50.0)
        res = run_engine(ctx, e, tag, 1, soft, "softmax_run.log")
        rows, _ = report_run(ctx, e, tag, res)
        first = next((r for r in rows if r["version"] == 1), None)
        base = next((r for r in rows if r["version"] == 0), None)
        e["first"] = first
        e["baseline_total_s"] = base and base["total_s"]
        e["command_wall_s"] = round(res.wall_s, 2)
        met = bool(
            first
            and first["total_s"] is not None
            and first["total_s"] <= SOFTMAX_TARGET_S
            and first["status"] in records.DECIDED
        )
        e["target"] = {f"first decision (compiling included) <= {SOFTMAX_TARGET_S:.0f} s": met}
        e["headline"] = (
            f"{change['variant']}: {first and first['status']} after {first and first['looks']} looks; "
            f"iteration {first and first['total_s']} s end to end (decision {first and first['decision_s']} s); "
            f"target {'met' if met else 'NOT met'}"
            if first
            else "no first decision recorded"
        )


# ---------------------------------------------------------------------------------------
# part3: hostile candidates


def part3(ctx: Ctx) -> None:
    s = ctx.summary
    probe_repo = targets.rms_repo(ctx.work / "repos" / "scan", cpu=ctx.smoke)
    with measured(s, "hostile: the diff scan on each timer patch") as e:
        form, text, seen = candidates.timer_patch(probe_repo)
        e["findings"] = seen
        e["chosen"] = form
        allow = candidates.allow_for(seen[form])
        e["allowed"] = allow
        e["headline"] = (
            (
                f"{form}: hidden from the diff scan"
                if not seen[form]
                else f"every form seen by the scan; {form} runs with allow_constructs {allow} so that the "
                "external truth decides"
            )
            + "; "
            + ", ".join(f"{k}: {sorted({f['rule'] for f in v}) or 'nothing'}" for k, v in seen.items())
        )
    truth = "the OS's accounting" if ctx.smoke else "the profiler"
    plan = {
        "1": candidates.hostile(f"timer-{form}", text, "the bench's blocks timed as the H100 runs them"),
        "2": candidates.hostile(
            "stolen-outputs", candidates.STOLEN_OUTPUTS, "a shape seen before answers from the first call's rows"
        ),
    }
    soft = 1500.0 if ctx.smoke else max(90.0, ctx.left() - 60.0)
    got = rms_session(ctx, "hostile", plan, 2, soft, profile=True, allow=allow)
    if got is None:
        return
    rows, _, e = got
    verdicts = []
    for version, entry in ((1, plan["1"]), (2, plan["2"])):
        r = next((x for x in rows if x["version"] == version), None)
        verdicts.append(hostile_verdict(entry["hostile"], r, truth))
    e["hostile"] = verdicts
    e["tables"]["hostile candidates"] = {
        "columns": [
            "candidate",
            "status",
            "kept",
            "bench claimed a gain",
            "per class (bench; profiler)",
            "refuted by",
            "reason",
        ],
        "rows": [
            [
                v["candidate"],
                v["status"],
                v["kept"],
                v["bench_claimed_gain"],
                v["classes"],
                v["refuted_by"],
                v["reason"][:200],
            ]
            for v in verdicts
        ],
    }
    e["headline"] = "; ".join(
        f"{v['candidate']}: {v['status']}, refuted by {v['refuted_by']}"
        + ("" if v["as_expected"] else f" (expected: {v['expected']})")
        for v in verdicts
    )
    e["as_expected"] = all(v["as_expected"] for v in verdicts)


def hostile_verdict(name: str, row: dict[str, Any] | None, truth: str) -> dict[str, Any]:
    """What refuted a hostile candidate, read from its row: the profiler or the OS's accounting
    (a timer patch: the bench claimed a gain, the external truth showed none), kopt's output
    audit (stolen outputs: a correctness failure naming the audit)."""
    expected = "kopt's output audit" if name == "stolen-outputs" else truth
    if row is None:
        return {
            "candidate": name,
            "status": None,
            "kept": None,
            "bench_claimed_gain": None,
            "classes": "",
            "refuted_by": "no record",
            "reason": "",
            "expected": expected,
            "as_expected": False,
        }
    reason = f"{row['reason']} {row['failing']}".strip()
    low = reason.lower()
    truth = row["external_truth"] or {}
    refuted = truth.get("outcome") == "refuted" or "external_truth_refutes" in row["flags"]
    if row["status"] in records.KEPT:
        by = "nothing: KEPT"
    elif row["status"] == "fail_correctness" and "audit" in low:
        by = "kopt's output audit"
    elif row["status"] == "fail_correctness":
        by = "the bench's own correctness check"
    elif "profiler_disagrees" in row["flags"] or (refuted and truth.get("kind") == "profiler"):
        by = "the profiler"
    elif refuted and truth.get("kind") == "os_time":
        by = "the OS's accounting"
    elif row["flags"]:
        by = f"flags {','.join(row['flags'])}"
    else:
        by = f"verdict {row['verdict']}"
    classes = "; ".join(
        f"{c} {records.pct(v.get('bench_ratio'))}"
        + (f" (profiler {records.pct(v['profiler_ratio'])})" if v.get("profiler_ratio") is not None else "")
        for c, v in row["classes"].items()
    )
    return {
        "candidate": name,
        "version": row["version"],
        "status": row["status"],
        "kept": row["status"] in records.KEPT,
        "bench_claimed_gain": row["bench_claimed_gain"],
        "classes": classes,
        "refuted_by": by,
        "reason": reason,
        "external_truth": row["external_truth"],
        "expected": expected,
        "as_expected": row["status"] not in records.KEPT and by == expected,
    }


# ---------------------------------------------------------------------------------------
# part4: a real ~3% change, tried again and again from v0


def power_step(ctx: Ctx) -> dict[str, Any] | None:
    """The ~3% step: WAVE3_P4_STEP ("dclass=narrow:num_warps:2:4", class:param:tuned:slow) or
    prescan_rms.py's choice on this machine."""
    s = ctx.summary
    with measured(s, "power: the ~3% step") as e:
        given = os.environ.get("WAVE3_P4_STEP")
        if given:
            cls, param, tuned, slow = given.split(":")
            e["chosen"] = {
                "class": cls,
                "param": param,
                "tuned_value": json.loads(tuned),
                "slow_value": json.loads(slow),
                "from": "WAVE3_P4_STEP",
            }
            e["headline"] = f"given: {given}"
            return dict(e["chosen"])
        repo = targets.rms_repo(ctx.work / "repos" / "prescan", cpu=ctx.smoke)
        out = ctx.raw / "prescan.json"
        argv = [
            sys.executable,
            str(HERE / "prescan_rms.py"),
            "--repo",
            str(repo),
            "--out",
            str(out),
            "--budget-s",
            ctx.knob("PRESCAN_S", "60", "60"),
            "--reps",
            "3" if not ctx.smoke else "2",
            "--target-pct",
            ctx.knob("P4_TARGET_PCT", "3", "25"),
        ]  # smoke: a step its noisy looks can keep
        e["commands"].append(shell_line(argv))
        res = run_cmd(argv, ctx.raw / "prescan.log", timeout_s=240, cwd=REPO, env=child_env(), echo="  [prescan] ")
        e["result"] = res.to_dict()
        if not out.is_file():
            e.update(ok=False, error=f"prescan exited {res.rc}: {res.tail(4)}")
            return None
        found = json.loads(out.read_text())
        e["steps"] = found["steps"]
        e["tables"] = {
            "prescan: one step from the tuned point, slowdown of its class": {
                "columns": ["step", "slowdown", "per shape"],
                "rows": [[x["name"], f"{x['slowdown_pct']:+.2f}%", x["per_shape"]] for x in found["steps"]],
            }
        }
        e["chosen"] = found["chosen"]
        if not found["chosen"]:
            e.update(ok=False, error="no step slowed its class by more than half the target")
            return None
        e["headline"] = (
            f"{found['chosen']['name']} ({found['chosen']['slowdown_pct']:+.2f}%"
            f"{'' if found['chosen']['in_window'] else ', outside the 1.5-6% window'}) in {found['seconds']} s"
        )
        return dict(found["chosen"])


class RestartDriver:
    """Watches a running workspace's run.db: after each kept iteration it asks for a masked
    restart from v0 (`kopt restart TAG --from v0`), so that the next try meets the same BEST;
    once `tries` decisions of the change ended it asks the run to stop."""

    def __init__(self, root: Path, tag: str, tries: int, send: Callable[[list[str]], str] | None = None) -> None:
        self.root, self.tag, self.tries = root, tag, tries
        self.send = send or (lambda args: device_wave.capture(kopt_argv(root, *args), env=child_env()))
        self.db = root / tag / "run.db"
        self.seen: set[int] = set()
        self.counted: list[int] = []
        self.restarts: list[dict[str, Any]] = []
        self.stop_sent = False

    FINAL_TRY = (
        "keep",
        "accepted",
        "regression",
        "likely_regression",
        "tie",
        "split",
        "rejected",
        "fail_correctness",
        "fail_bench",
    )
    """A try: the change was decided (or failed measuring); fail_propose (BEST already held it)
    and interrupted (the restart ended the proposal) are not tries."""

    def __call__(self) -> None:
        if not self.db.exists():
            return
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=2)
        try:
            ended = con.execute(
                "SELECT version, status FROM iterations WHERE version > 0 AND finished_at IS NOT NULL ORDER BY version"
            ).fetchall()
        finally:
            con.close()
        for version, status in ended:
            if version in self.seen:
                continue
            self.seen.add(version)
            if status in self.FINAL_TRY:
                self.counted.append(version)
            if status in ("keep", "accepted") and len(self.counted) < self.tries:
                t0 = time.monotonic()
                out = self.send(
                    [
                        "restart",
                        self.tag,
                        "--from",
                        "v0",
                        "--why",
                        f"wave3 power: try the change again after v{version}",
                    ]
                )
                self.restarts.append(
                    {"after": version, "reply": out[-200:], "seconds": round(time.monotonic() - t0, 2)}
                )
        if len(self.counted) >= self.tries and not self.stop_sent:
            self.stop_sent = True
            self.send(["stop", self.tag, "--why", f"{self.tries} tries done"])


def part4(ctx: Ctx) -> None:
    s = ctx.summary
    step = power_step(ctx)
    if step is None:
        return
    tries = int(ctx.knob("P4_TRIES", str(POWER_TRIES), "3"))
    profile = ctx.knob("P4_PROFILE", "0", "1") == "1"
    process = ctx.knob("P4_PROCESS", "0", "0") == "1"
    from kopt_supervisor.kernels import catalog

    tuned = json.loads(catalog.params_text("rmsnorm", naive=False))
    cls, param = step["class"], step["param"]
    slow = {**tuned, cls: {**tuned.get(cls, {}), param: step["slow_value"]}}
    change = candidates.params_change(
        cls,
        {param: step["tuned_value"]},
        f"{param} {step['slow_value']} -> {step['tuned_value']} for {cls}: the tuned launch again"
        + (f" (prescan: the slow point {step['slowdown_pct']:+.2f}%)" if "slowdown_pct" in step else ""),
        wait_if_same_s=120.0,
    )
    drivers: list[RestartDriver] = []

    def driver(root: Path, tag: str) -> Callable[[], None]:
        drivers.append(RestartDriver(root, tag, tries))
        return drivers[-1]

    soft = 3000.0 if ctx.smoke else max(90.0, ctx.left() - 60.0)
    s.data["power_setup"] = {
        "start (BEST at v0)": slow,
        "change": change,
        "profiler": "on"
        if profile
        else "off (WAVE3_P4_PROFILE=1 turns it on: then each keep costs the profiler's seconds)",
        "measured through": "process-level bench runs (WAVE3_P4_PROCESS=1)"
        if process
        else "served, one process per tree (WAVE3_P4_PROCESS=1: the process-level bench)",
    }
    got = rms_session(
        ctx,
        "power",
        {"default": change},
        4 * tries + 10,
        soft,
        profile=profile,
        params=slow,
        driver=driver,
        process=process,
    )
    if got is None:
        return
    rows, _, e = got
    d = drivers[0]
    tried = [r for r in rows if r["version"] in d.counted]
    kept = [r["version"] for r in tried if r["status"] in records.KEPT]
    e["restarts"] = d.restarts
    e["power"] = {
        "tries": len(tried),
        "kept": len(kept),
        "kept_versions": kept,
        "statuses": {st: sum(1 for r in tried if r["status"] == st) for st in sorted({r["status"] for r in tried})},
        "decision_s": records.stats([float(r["decision_s"]) for r in tried if r["decision_s"] is not None]),
        "confirmation_s": records.stats([float(r["confirmation_s"]) for r in tried if r["confirmation_s"] is not None]),
        "total_s": records.stats([float(r["total_s"]) for r in tried if r["total_s"] is not None]),
        "target": f"kept >= {POWER_KEPT_TARGET} of {POWER_TRIES}",
        "met": len(tried) >= POWER_TRIES and len(kept) >= POWER_KEPT_TARGET,
    }
    e["tables"]["tries"] = {
        "columns": ["it", "status", "looks", "decision s", "confirmation s", "total s", "bench ratio", "flags"],
        "rows": [
            [
                f"v{r['version']}",
                r["status"],
                r["looks"],
                r["decision_s"],
                r["confirmation_s"],
                r["total_s"],
                records.pct((r["classes"].get(cls) or {}).get("bench_ratio")),
                ",".join(r["flags"]),
            ]
            for r in tried
        ],
    }
    p = e["power"]
    e["headline"] = (
        f"{cls} {param} {step['slow_value']} -> {step['tuned_value']}: kept {p['kept']} of {p['tries']} "
        f"tries; decision {_fmt_stats(p['decision_s'])}; confirmation {_fmt_stats(p['confirmation_s'])}; "
        f"iteration {_fmt_stats(p['total_s'])}; target {'met' if p['met'] else 'NOT met'}"
    )


PARTS: dict[str, Callable[[Ctx], None]] = {
    "part1": part1,
    "part2": part2,
    "part3": part3,
    "part4": part4,
    "probe": probe,
}
NEEDS_S = {"part1": 400.0, "part2": 430.0, "part3": 180.0, "part4": 480.0, "probe": 40.0}
"""What each part plans for on the H100 when a later part of the same call waits for it
(setup excluded): the demo's 300 s and its stop; 30 comment-only decisions of about 9 s and the
softmax example; the hostile run (its baseline profiled, the timer patch profiled); the
prescan and 20 tries of about 20 s."""


if __name__ == "__main__":
    raise SystemExit(main())
