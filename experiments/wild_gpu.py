"""Issue 28's device figures on two public benches used unchanged (experiments/wild/upstream):
Triton's layer-norm tutorial and Liger-Kernel's RMSNorm bench. experiments/wild_gpu.sh calls
this after its setup (experiments/device_wave.sh).

    python -m experiments.wild_gpu all|layernorm|liger --out DIR [--smoke] [--budget-s S]

Per kernel: a fresh git repo of the upstream copy (plus the shims experiments/wild/SHIMS.md
names, in `.kopt_wild_shim/`), then, timed from the start of init,
`kopt --root WS init --repo R --bench CMD --yes --tag wild-NAME --propose-command 'PY
propose_scripted.py PLAN'` (no config written by hand) and `kopt run wild-NAME --foreground
--max-iters N`, the scripted proposer (experiments/h100_wave3/propose_scripted.py) giving
comment-only candidates (A/A) and, at iteration WILD_REAL_AT (2), one real launch change of
the kernel (REAL_CHANGES: its size is unknown until it runs). Per iteration: status, looks,
the decision's and the iteration's seconds; per kernel: the seconds from init's start to the
first verdict, the A/A count and keeps, the real change's verdict, and the issue's targets.

--smoke (the dry run, no GPU): the CPU stand-ins tests/onboard/upstream/liger_rmsnorm and
tests/served_import/upstream/triton_layer_norm (Triton's interpreter) instead of upstream.

Knobs: WILD_KERNELS (layernorm,liger), WILD_AA_N (10; smoke 3), WILD_REAL_AT (2),
WILD_SPLIT (0.5: the share of the time left that the first kernel gets), WILD_SANDBOX,
WILD_WORK (scratch outside /tmp; default ~/kopt-wild), WILD_COMMIT (the commit, for the record),
WILD_PROFILE_CHECK (1: after each run, best/ under kopt's keep profile, launches per kopt range).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import device_wave
from experiments.device_wave import REPO, Budget, kopt_argv, measured, run_cmd, shell_line
from experiments.h100_wave3 import candidates, records, targets

HERE = Path(__file__).resolve().parent
WILD = HERE / "wild"
STUBS = REPO / "tests" / "served_import" / "stubs"
SHIM_DIR = ".kopt_wild_shim"
FIRST_VERDICT_TARGET_S = 120.0
DECISION_TARGET_S = 30.0
AA_TARGET = 10


class Summary(device_wave.Summary):
    TITLE = "wild_gpu (issue 28: kernels from the wild)"


@dataclass(frozen=True)
class Kernel:
    name: str
    tree: Path
    """The upstream copy (or the CPU stand-in) the repo is made from."""
    bench: str
    """The bench command, {py} the interpreter, {shim} the shim folder's path from the bench's cwd."""
    kernel_file: str
    """Where the comment-only candidates and the real change go."""
    real: dict[str, str]
    """The real change: old -> new text in kernel_file, and why it should move the time."""
    shims: tuple[tuple[Path, str], ...] = ()
    """(source, name under .kopt_wild_shim/) copied in always."""
    matplotlib_shim: bool = False
    """The matplotlib stub, where `import matplotlib` fails here."""


REAL_CHANGES = {
    "layernorm": {
        "old": "num_warps = min(max(BLOCK_SIZE // 256, 1), 8)",
        "new": "num_warps = min(max(BLOCK_SIZE // 256, 1), 16)",
        "hypothesis": "num_warps cap 8 -> 16: N > 2048 (26 of 30 sizes) runs the backward dx kernel, the one "
        "the bench times, with 16 warps; a launch choice of a few percent either way (unknown until run)",
    },
    "liger": {
        "old": "    BLOCK_SIZE, num_warps = calculate_settings(n_cols)\n",
        "new": "    BLOCK_SIZE, num_warps = calculate_settings(n_cols)\n    num_warps = min(num_warps * 2, 32)\n",
        "hypothesis": "rms_norm forward/backward launch with twice calculate_settings' warps (hidden 4096: "
        "8 -> 16); a launch choice of a few percent either way (unknown until run)",
    },
}
SMOKE_CHANGES = {
    "layernorm": {
        "old": "warps = min(max(BLOCK // 256, 1), 8)",
        "new": "warps = min(max(BLOCK // 256, 1), 16)",
        "hypothesis": "num_warps cap 8 -> 16 (the interpreter ignores it: a tie expected)",
    },
    "liger": {
        "old": "ms = sum(v * v for v in row) / len(row)",
        "new": "ms = sum([v * v for v in row]) / len(row)",
        "hypothesis": "the sum of squares over a list, not a generator",
    },
}


def kernels(smoke: bool) -> dict[str, Kernel]:
    if smoke:
        return {
            "layernorm": Kernel(
                "layernorm",
                REPO / "tests" / "served_import" / "upstream" / "triton_layer_norm",
                "TRITON_INTERPRET=1 PYTHONPATH={shim}/matplotlib {py} 05-layer-norm.py",
                "05-layer-norm.py",
                SMOKE_CHANGES["layernorm"],
                matplotlib_shim=True,
            ),
            "liger": Kernel(
                "liger",
                REPO / "tests" / "onboard" / "upstream" / "liger_rmsnorm",
                "cd benchmark && PYTHONPATH=../src {py} scripts/benchmark_rms_norm.py",
                "src/liger_kernel/ops/rms_norm.py",
                SMOKE_CHANGES["liger"],
            ),
        }
    return {
        "layernorm": Kernel(
            "layernorm",
            WILD / "upstream" / "triton_layer_norm",
            "cd python/tutorials && PYTHONPATH=../../{shim}/matplotlib {py} 05-layer-norm.py",
            "python/tutorials/05-layer-norm.py",
            REAL_CHANGES["layernorm"],
            matplotlib_shim=True,
        ),
        "liger": Kernel(
            "liger",
            WILD / "upstream" / "liger_kernel",
            "cd benchmark && PYTHONPATH=../src:../{shim}/liger {py} scripts/benchmark_rms_norm.py",
            "src/liger_kernel/ops/rms_norm.py",
            REAL_CHANGES["liger"],
            shims=((WILD / "shim" / "liger", "liger"),),
        ),
    }


def has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def make_repo(k: Kernel, dest: Path) -> tuple[Path, list[str]]:
    """A committed repo of k's tree (SOURCE.md and caches left out) plus its shims; the shims used."""
    from kopt_supervisor.engine import gitops

    shutil.copytree(k.tree, dest, ignore=shutil.ignore_patterns("__pycache__", "SOURCE.md", "*.pyc"))
    used = []
    for src, name in k.shims:
        shutil.copytree(src, dest / SHIM_DIR / name)
        used.append(name)
    if k.matplotlib_shim and not has_matplotlib():
        shutil.copytree(STUBS, dest / SHIM_DIR / "matplotlib")
        used.append("matplotlib")
    if not used:  # the command names the folder: keep it there, empty but tracked
        (dest / SHIM_DIR).mkdir()
        (dest / SHIM_DIR / "README").write_text("no shim needed here\n")
    gitops.init_repo(dest, f"{k.name}: upstream as published (experiments/wild)")
    return dest, used


def plan_for(k: Kernel, real_at: int) -> dict[str, dict[str, Any]]:
    """The scripted proposer's plan: comment-only candidates, the real change at `real_at`."""
    aa = candidates.comment()
    aa["path"] = k.kernel_file
    real = {"kind": "replace", "path": k.kernel_file, **k.real, "hypothesis": "REAL: " + k.real["hypothesis"]}
    return {str(real_at): real, "default": aa}


def wild_figures(
    rows: list[dict[str, Any]],
    finished: dict[int, float],
    init_t0: float,
    *,
    aa_target: int = AA_TARGET,
    answered: frozenset[int] = frozenset(),
) -> dict[str, Any]:
    """The issue's figures from one kernel's rows (records.iteration_rows), the wall-clock end of
    each version (`finished`) and init's start: the first verdict's seconds after init, the A/A
    candidates (hypothesis "A/A ...") and their keeps, the real change (hypothesis "REAL: ...")
    and the targets (first verdict <= 120 s, every decision <= 30 s, >= 10 A/A, 0 kept).
    `answered`: versions whose review the driver answered (ReviewAnswer): kopt did not decide
    them, so they count as candidates, never as decided."""
    cands = [r for r in rows if r["version"] > 0]
    decided = [r for r in cands if r["status"] in records.DECIDED and r["version"] not in answered]
    ends = [finished[r["version"]] for r in decided if r["version"] in finished]
    first_s = round(min(ends) - init_t0, 2) if ends else None
    aa = [r for r in cands if str(r["hypothesis"]).startswith("A/A")]
    aa_decided = [r for r in aa if r["status"] in records.DECIDED and r["version"] not in answered]
    aa_kept = [r["version"] for r in aa if r["status"] in records.KEPT]
    real = next((r for r in cands if str(r["hypothesis"]).startswith("REAL")), None)
    dec = [float(r["decision_s"]) for r in decided if r["decision_s"] is not None]
    aa_dec = [float(r["decision_s"]) for r in aa_decided if r["decision_s"] is not None]
    real_ok = bool(
        real
        and real["status"] in records.DECIDED
        and real["version"] not in answered
        and (real["decision_s"] or 1e9) <= DECISION_TARGET_S
    )
    return {
        "first_verdict_s_after_init": first_s,
        "aa": {
            "candidates": len(aa),
            "decided": len(aa_decided),
            "kept": aa_kept,
            "statuses": {s: sum(1 for r in aa if r["status"] == s) for s in sorted({r["status"] for r in aa})},
            "decision_s": records.stats(aa_dec),
        },
        "real": None
        if real is None
        else {
            "version": real["version"],
            "status": real["status"],
            "decision_s": real["decision_s"],
            "total_s": real["total_s"],
            "looks": real["looks"],
            "classes": {c: records.pct(v.get("bench_ratio")) for c, v in real["classes"].items()},
        },
        "decision_s": records.stats(dec),
        "answered_by_the_driver": sorted(answered),
        "targets": {
            f"first verdict <= {FIRST_VERDICT_TARGET_S:.0f} s after init": first_s is not None
            and first_s <= FIRST_VERDICT_TARGET_S,
            f"A/A decided <= {DECISION_TARGET_S:.0f} s each": bool(aa_dec) and max(aa_dec) <= DECISION_TARGET_S,
            f"real change decided <= {DECISION_TARGET_S:.0f} s": real_ok,
            f">= {aa_target} comment-only candidates decided, 0 kept": len(aa_decided) >= aa_target and not aa_kept,
        },
    }


class ReviewAnswer:
    """While a run goes: a borderline that waits for a review (the proposed config's
    review_timeout_s, 1800 s) is rejected at once with `kopt reject TAG vN`, as a user with no
    time to review would, so the run goes on; each answer is recorded (the summary says so)."""

    def __init__(self, root: Path, tag: str) -> None:
        self.root, self.tag = root, tag
        self.db = root / tag / "run.db"
        self.answered: list[dict[str, Any]] = []
        self.last = 0.0

    def __call__(self) -> None:
        import sqlite3

        if time.monotonic() - self.last < 1.0 or not self.db.exists():
            return
        self.last = time.monotonic()
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=2)
        try:
            waiting = [v for (v,) in con.execute("SELECT version FROM iterations WHERE status = 'borderline'")]
        finally:
            con.close()
        for v in waiting:
            if any(a["version"] == v for a in self.answered):
                continue
            out = device_wave.capture(kopt_argv(self.root, "reject", self.tag, f"v{v}"), env=device_wave.child_env())
            self.answered.append({"version": v, "answer": "reject", "reply": out[-200:], "utc": device_wave.utc_now()})


def one_kernel(k: Kernel, ctx: dict[str, Any], soft_s: float) -> None:
    s: Summary = ctx["summary"]
    work: Path = ctx["work"]
    raw: Path = ctx["raw"]
    root = work / "ws"
    tag = f"wild-{k.name}"
    py = sys.executable
    with measured(s, f"{k.name}: repo") as e:
        repo, used = make_repo(k, work / "repos" / k.name)
        e["repo"] = str(repo)
        e["shims"] = used
        e["headline"] = f"{k.tree.relative_to(REPO)} as a fresh repo; shims {used or 'none'}"
    proposer = targets.install_proposer(work / "tools")
    plan = targets.write_plan(work / "tools" / f"plan_{k.name}.json", plan_for(k, ctx["real_at"]))
    bench = k.bench.format(py=py, shim=SHIM_DIR)
    init_t0 = time.time()
    with measured(s, f"{k.name}: init") as e:
        args = ["init", "--repo", str(repo), "--bench", bench, "--yes", "--tag", tag]
        args += ["--propose-command", f"{py} {proposer} {plan}", *ctx["flags"]]
        e["commands"].append(shell_line(["kopt", "--root", str(root), *args]))
        res = run_cmd(
            kopt_argv(root, *args),
            raw / f"{k.name}_init.log",
            timeout_s=max(60.0, soft_s - 30.0),
            env=device_wave.child_env(),
            cwd=REPO,
            echo=f"  [{k.name} init] ",
        )
        e["init_s"] = round(res.wall_s, 2)
        e.update(result=res.to_dict(), ok=res.ok)
        if not res.ok:
            e["error"] = res.tail(6)
            for name in ("init_bench.out", "init_bench.err"):  # what the bench said, for the pack
                made = root / ".init" / tag / name
                if made.is_file():
                    shutil.copyfile(made, raw / f"{k.name}_{name}")
            return
        e["headline"] = f"kopt init --bench ... --yes in {res.wall_s:.1f} s"
    with measured(s, f"{k.name}: run") as e:
        iters = ctx["aa_n"] + 1
        left = soft_s - (time.time() - init_t0)
        args = ["run", tag, "--foreground", "--max-iters", str(iters), *ctx["flags"]]
        e["commands"].append(shell_line(["kopt", "--root", str(root), *args]) + f"   (asked to stop at {left:.0f} s)")
        review = ReviewAnswer(root, tag)
        res = device_wave.kopt_engine(
            raw, root, tag, args, f"{k.name}_run.log", soft_s=max(30.0, left), grace_s=30.0, while_running=review
        )
        e["result"] = res.to_dict()
        e["reviews_answered"] = review.answered
        device_wave.export_run(raw, root, tag)
        its, spans = records.read_run(root, tag)
        rows = records.iteration_rows(its, spans)
        finished = {it.version: it.finished_at for it in its if it.finished_at is not None}
        answered = frozenset(int(a["version"]) for a in review.answered)
        fig = wild_figures(rows, finished, init_t0, aa_target=ctx["aa_n"], answered=answered)
        e["iterations"] = rows
        e["figures"] = fig
        e["tables"] = {"iterations": records.iteration_table(rows)}
        e["ok"] = res.rc == 0 and not res.killed
        if not e["ok"]:
            e["error"] = f"exit {res.rc}{' (killed)' if res.killed else ''}: {res.tail(4)}"
        real = fig["real"] or {}
        e["headline"] = (
            f"first verdict {fig['first_verdict_s_after_init']} s after init; A/A {fig['aa']['decided']} decided, "
            f"kept {fig['aa']['kept'] or 'none'}, decision {fig['aa']['decision_s']}; real change "
            f"{real.get('status')} in {real.get('decision_s')} s; reviews answered {len(review.answered)}; targets "
            + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in fig["targets"].items())
        )
    if os.environ.get("WILD_PROFILE_CHECK", "1") == "1" and not ctx.get("smoke"):
        profile_check(k, ctx, root, tag)


def profile_check(k: Kernel, ctx: dict[str, Any], root: Path, tag: str) -> None:
    """The run's best/ tree under kopt's keep profile (ncu, one pass, GPU time alone), run as
    `profile_runs.profile_in` runs it but unconfined: per kopt range, the launches ncu put in it.
    Before ImportedBench.profile_graph a backward config's range held none (autograd launches
    from a thread of its own; docs/profiling.md, Limits)."""
    import subprocess

    from kopt_supervisor.engine.config.toml_io import load
    from kopt_supervisor.engine.profile.ncu import NcuProfiler
    from kopt_supervisor.engine.profile.profiler import PROFILE_ENV, PROFILE_OUTPUTS_ENV, PROFILE_SEED_ENV
    from kopt_supervisor.engine.runner.command import as_argv

    s: Summary = ctx["summary"]
    with measured(s, f"{k.name}: profile check") as e:
        ws = root / tag
        cfg = load(ws / "kopt.toml")
        bench = as_argv(cfg.profile.command or cfg.target.bench)
        prof = NcuProfiler().for_keep("time")
        out_dir = ctx["raw"] / f"{k.name}_profile"
        out_dir.mkdir(parents=True, exist_ok=True)
        env = {**device_wave.child_env(), **PROFILE_ENV, PROFILE_SEED_ENV: "12345"}
        env[PROFILE_OUTPUTS_ENV] = str(out_dir / "outputs.json")
        done: list[Any] = []
        t0 = time.monotonic()
        while (step := prof.next_pass(bench, out_dir, cfg.profile.kernel, done)) is not None:
            e["commands"].append(shell_line(list(step.argv)))
            with open(ctx["raw"] / f"{k.name}_profile.log", "a") as log:
                subprocess.run(list(step.argv), cwd=ws / "best", env=env, stdout=log, stderr=log, timeout=400)
                for read in prof.after_commands(step.out_dir):
                    subprocess.run(read, cwd=ws / "best", env=env, stdout=log, stderr=log, timeout=120)
            done.append(step)
        summary = prof.parse_passes(done, cfg.profile.kernel)
        per_range: dict[str, list[int]] = {}
        for r in summary.ranged:
            got = per_range.setdefault(r.range or "(outside)", [0, 0])
            got[0] += r.calls
            got[1] += int(r.total_ns)
        e["profile_s"] = round(time.monotonic() - t0, 2)
        e["ranges"] = {name: {"launches": n, "gpu_ns": ns} for name, (n, ns) in sorted(per_range.items())}
        ranges = summary.kopt_ranges
        written = out_dir / "outputs.json"
        configs = json.loads(written.read_text()) if written.is_file() else None
        expected = len(configs.get("configs") or []) if isinstance(configs, dict) else None
        e["headline"] = (
            f"{len(ranges)} kopt ranges with launches of {expected} configs profiled; "
            f"{per_range.get('(outside)', [0])[0]} launches outside; {e['profile_s']} s"
        )
        e["ok"] = bool(ranges) and len(ranges) == expected


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["all", "layernorm", "liger"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true", help="no GPU: the CPU stand-ins")
    ap.add_argument("--budget-s", type=float, default=None)
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args(argv)
    smoke = a.smoke or os.environ.get("WILD_DRY") == "1"
    device_wave.LOG_NAME = "wild"
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = a.work or Path(os.environ.get("WILD_WORK") or Path.home() / "kopt-wild")
    work, raw = device_wave.fresh_work_dir(base, a.part, smoke)
    mode = "dry run (no GPU: the CPU stand-ins)" if smoke else "device"
    summary = Summary(out, a.part, mode, os.environ.get("WILD_COMMAND") or shell_line([sys.executable, *sys.argv]))
    budget = Budget(a.budget_s if a.budget_s is not None else (1800.0 if smoke else 540.0))
    summary.data["machine"] = device_wave.machine_info(
        smoke=smoke,
        commit_env="WILD_COMMIT",
        scripts=[HERE / "wild_gpu.sh", HERE / "wild_gpu.py", HERE / "h100_wave3" / "propose_scripted.py"],
        digest_key="wild_scripts_sha256",
    )
    summary.data["gpu"] = device_wave.gpu_name()
    summary.data["budget_s"] = round(budget.total_s)
    summary.data["matplotlib"] = has_matplotlib()
    if os.environ.get("WILD_SETUP"):
        summary.data["setup"] = os.environ["WILD_SETUP"]
    no_sandbox = device_wave.sandbox_choice(summary, "WILD_SANDBOX")
    names = (
        [a.part] if a.part != "all" else [n for n in os.environ.get("WILD_KERNELS", "layernorm,liger").split(",") if n]
    )
    ctx = {
        "summary": summary,
        "work": work,
        "raw": raw,
        "flags": ["--no-sandbox"] if no_sandbox else [],
        "aa_n": int(os.environ.get("WILD_AA_N") or (3 if smoke else AA_TARGET)),
        "real_at": int(os.environ.get("WILD_REAL_AT") or 2),
        "smoke": smoke,
    }
    summary.data["plan"] = {"kernels": names, "aa_n": ctx["aa_n"], "real_at": ctx["real_at"]}
    ks = kernels(smoke)
    pack_reserve = 25.0
    try:
        for i, name in enumerate(names):
            left = budget.left() - pack_reserve
            share = left * float(os.environ.get("WILD_SPLIT") or 0.5) if i < len(names) - 1 else left
            if share < 45.0:
                summary.step(f"{name}: run", ok=None, skipped=f"{budget.left():.0f} s left")
                continue
            one_kernel(ks[name], ctx, share)
    finally:
        with measured(summary, "pack") as e:
            e.update(device_wave.pack(out / f"wild_{a.part}.tgz", [(raw, "raw")]))
        failed = [n for n, st in summary.data["steps"].items() if st.get("ok") is False]
        summary.finish()
        device_wave.print_tail(summary, tables=lambda step, title: "iterations" in title)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
