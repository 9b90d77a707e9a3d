"""A scripted MCP client standing in for an interactive agent on the softmax example
(docs/agents.md, "kopt as an MCP judge"): the real session the issue asks for on a GPU.

It copies examples/softmax into a fresh git repo, lets `kopt init --bench` propose its
kopt.toml (by default for `python kopt_bench.py`, the example's bench on kopt's harness, which
init proposes served: one process per tree answering looks; `--bench "{python} bench.py"` is
the process-level onboarding of the example's own script), starts the engine detached with the
manual proposer, then talks to `kopt mcp TAG` over stdio with the official SDK's client exactly
as an agent would: `status`, `context`, an edit of softmax/kernel.py, `submit`, the verdict,
the next edit. The edits are the launch parameters a kernel engineer tries first (num_warps,
rows per program); each is made against BEST's kernel.

    python experiments/mcp_session.py --out /tmp/mcp-softmax/session.json            # a GPU
    python experiments/mcp_session.py --cpu --out /tmp/mcp-softmax/session.json      # no GPU

`--cpu`: TRITON_INTERPRET=1 (the harness then runs its small CPU shapes; the
loop runs, the timings are the interpreter's).

`--budget-s` bounds the whole script (setup, the session, the engine's stop): the session is
cancelled early enough to stop the engine and write the JSON before it ends, so an outer
`timeout` a little longer never cuts the record. The JSON is written after every step too
(and on SIGTERM), so what is done is on disk whatever ends the script. Its fields: setup (the
init's seconds, whether the proposal is served and its decision-cost line), steps (per submit:
the edit, wall time, verdict, per-class deltas, progress lines with their times), the run's
history and `kopt status --json` at the end, and `ended` (how the session ended).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EDITS = (
    ("NUM_WARPS", 1, "one warp per row: less shuffle traffic for short rows"),
    ("NUM_WARPS", 2, "two warps per row: fewer idle lanes on 1k rows than four"),
    ("ROWS_PER_PROGRAM", 2, "two rows per program: fewer programs to launch"),
)
"""(the kernel's launch global, its new value, the hypothesis), each set in BEST's kernel."""
RESERVE_S = 25.0
"""Budget kept back at the end: stopping the engine, reading its status, writing the JSON."""
CLI = ("-m", "kopt_supervisor.kopt_tui.cli")


class OutOfTime(Exception):
    """The script's budget (or a SIGTERM) ended it: what is done is written."""


class Record:
    """The session's JSON, rewritten (atomically) after every change."""

    def __init__(self, out: Path | None, head: dict[str, Any]) -> None:
        self.out = out
        self.doc: dict[str, Any] = {**head, "setup": {}, "steps": [], "ended": "running"}
        self.t0 = time.monotonic()

    def since(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    def write(self) -> None:
        self.doc["elapsed_s"] = self.since()
        if self.out is None:
            return
        self.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out.with_name(f".{self.out.name}.tmp")
        tmp.write_text(json.dumps(self.doc, indent=2, default=str))
        tmp.replace(self.out)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, reserve: float = 0.0) -> float:
        return self.end - reserve - time.monotonic()

    def timeout(self, want: float, reserve: float = RESERVE_S) -> float:
        """`want` seconds, or what is left before the reserve; OutOfTime when nothing is."""
        left = self.left(reserve)
        if left <= 1:
            raise OutOfTime(f"the budget is spent ({left:.0f} s left before the reserve)")
        return min(want, left)


def kopt(*args: str, root: Path, env: dict[str, str], timeout: float) -> str:
    try:
        r = subprocess.run(
            [sys.executable, *CLI, "--root", str(root), *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise OutOfTime(f"kopt {' '.join(args[:2])} did not end within {timeout:.0f} s") from None
    if r.returncode != 0:
        raise SystemExit(f"kopt {' '.join(args)} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
    return r.stdout


REVIEW = re.compile(r"v(?P<v>\d+) awaits the engineer's review")
REVIEW_WHY = "scripted session: a change the statistics could not prove is not committed"


def kopt_answer(root: Path, tag: str, version: str, env: dict[str, str], budget: Budget) -> str:
    """The engineer's answer to a review (the script stands in for both): reject."""
    try:
        return kopt("reject", tag, version, "--why", REVIEW_WHY, root=root, env=env, timeout=budget.timeout(30)).strip()
    except (OutOfTime, SystemExit) as e:
        return f"failed: {e}"


def set_global(text: str, name: str, value: int) -> str | None:
    """The kernel's source with `NAME = value` (None when it has no such line)."""
    pattern = re.compile(rf"^{name} = \d+$", re.M)
    if not pattern.search(text):
        return None
    return pattern.sub(f"{name} = {value}", text, count=1)


def header_notes(init_out: str) -> list[str]:
    """The proposed kopt.toml's header paragraphs as `kopt init` printed them (the checks, the
    decision cost; each `#` paragraph joined into one line)."""
    notes: list[str] = []
    for line in init_out.splitlines():
        if line.startswith("[target]"):
            break
        if not line.startswith("#"):
            continue
        text = line.lstrip("#").strip()
        if line.startswith("#  - ") or (line.startswith("# ") and not line.startswith("#  ")) or not notes:
            notes.append(text.removeprefix("- "))
        elif text:
            notes[-1] += " " + text
    return [n for n in notes if n]


def prepare(work: Path, tag: str, bench: str, env: dict[str, str], budget: Budget, rec: Record) -> Path:
    if work.exists():
        shutil.rmtree(work)
    repo, root = work / "softmax", work / "workspaces"
    shutil.copytree(REPO / "examples" / "softmax", repo, ignore=shutil.ignore_patterns("results", "__pycache__"))
    git_env = {**env, "GIT_AUTHOR_NAME": "k", "GIT_AUTHOR_EMAIL": "k@k", "GIT_COMMITTER_NAME": "k"}
    git_env["GIT_COMMITTER_EMAIL"] = "k@k"
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "softmax kernel"]):
        subprocess.run(cmd, cwd=repo, check=True, env=git_env)
    setup = rec.doc["setup"]
    setup["bench"] = bench
    t = time.monotonic()
    out = kopt(
        "init",
        "--repo",
        str(repo),
        "--tag",
        tag,
        "--bench",
        bench,
        "--yes",
        root=root,
        env=env,
        timeout=budget.timeout(240),
    )
    setup["init_s"] = round(time.monotonic() - t, 2)
    cfg_path = next(
        (ln.split("using ", 1)[1].split(" (", 1)[0] for ln in out.splitlines() if ln.startswith("using ")), ""
    )
    try:
        target = tomllib.loads(Path(cfg_path).read_text())["target"] if cfg_path else {}
    except (OSError, tomllib.TOMLDecodeError):
        target = {}
    setup["served"] = bool(target.get("serve"))
    setup["target"] = {k: target.get(k) for k in ("bench", "serve", "metric", "class_by", "sources") if k in target}
    setup["header"] = header_notes(out)
    rec.write()
    print(f"init: {setup['init_s']} s, served: {setup['served']}", flush=True)
    t = time.monotonic()
    kopt("run", tag, "--headless", "--proposer", "manual", root=root, env=env, timeout=budget.timeout(60))
    setup["engine_started_s"] = round(time.monotonic() - t, 2)
    rec.write()
    return root


async def session(root: Path, tag: str, env: dict[str, str], budget: Budget, rec: Record) -> None:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.types import Implementation

    def parsed(result: Any) -> Any:
        texts = [getattr(c, "text", "") for c in result.content]
        if result.is_error:
            raise SystemExit(f"MCP error: {''.join(texts)}")
        try:
            return json.loads("".join(texts))
        except json.JSONDecodeError:
            pass
        try:  # a list is one content item per element
            return [json.loads(t) for t in texts]
        except json.JSONDecodeError:
            return "".join(texts)

    params = StdioServerParameters(
        command=sys.executable, cwd=str(REPO), env=env, args=[*CLI, "--root", str(root), "mcp", tag]
    )
    steps: list[dict[str, Any]] = rec.doc["steps"]
    async with Client(params, client_info=Implementation(name="scripted-agent", version="1")) as client:
        t = time.monotonic()
        while not (st := parsed(await client.call_tool("status")))["ready_for_edits"]:
            if not st["engine_alive"]:
                raise SystemExit(f"the engine is not alive: {st['why_not_ready']}")
            await anyio.sleep(0.5)
        rec.doc["setup"]["ready_for_edits_s"] = round(time.monotonic() - t, 2)  # the baseline's measuring
        rec.write()
        for name, value, hypothesis in EDITS:
            while not (st := parsed(await client.call_tool("status")))["ready_for_edits"]:
                if not st["engine_alive"]:
                    raise SystemExit(f"the engine is not alive: {st['why_not_ready']}")
                await anyio.sleep(0.5)
            t = time.monotonic()
            context = parsed(await client.call_tool("context"))
            context_s = round(time.monotonic() - t, 2)
            kernel = Path(st["worktree"]) / "softmax" / "kernel.py"
            edited = set_global(kernel.read_text(), name, value)
            if edited is None:
                print(f"skip: no `{name} = N` line in BEST's kernel", flush=True)
                continue
            kernel.write_text(edited)
            step: dict[str, Any] = {
                "edit": f"{name} = {value}",
                "hypothesis": hypothesis,
                "context_chars": len(str(context)),
                "context_s": context_s,
                "progress": [],
                "result": None,
            }
            steps.append(step)
            t0 = time.monotonic()

            async def progress(
                _p: float, _t: float | None, message: str | None, step: dict[str, Any] = step, t0: float = t0
            ) -> None:
                step["progress"].append([round(time.monotonic() - t0, 2), message or ""])
                print(f"  {time.monotonic() - t0:6.1f} s  {message}", flush=True)
                review = REVIEW.match(message or "")
                if review and "review" not in step:  # the engineer's part: reject what is not proven
                    step["review"] = {"at_s": round(time.monotonic() - t0, 2), "answer": "reject"}
                    answer = await anyio.to_thread.run_sync(
                        lambda: kopt_answer(root, tag, f"v{review['v']}", env, budget)
                    )
                    step["review"]["said"] = answer
                    print(f"  engineer: kopt reject {tag} v{review['v']}: {answer}", flush=True)

            print(f"submit: {name} = {value}: {hypothesis}", flush=True)
            result = parsed(
                await client.call_tool(
                    "submit", {"hypothesis": hypothesis, "scope": "global"}, progress_callback=progress
                )
            )
            step["wall_s"] = round(time.monotonic() - t0, 2)
            step["result"] = result
            rec.write()
            print(
                f"  -> v{result['iteration']} {result['status']} in {step['wall_s']} s: {result['reason']}", flush=True
            )
        rec.doc["history"] = parsed(await client.call_tool("history", {"n": 10}))
        rec.write()


def engine_records(root: Path, tag: str) -> list[dict[str, Any]]:
    """Each iteration as the engine recorded it (run.db): status, its phases' seconds, the looks."""
    import sqlite3

    db = root / tag / "run.db"
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = con.execute("SELECT version, status, started_at, finished_at, record FROM iterations ORDER BY version")
        out = []
        for version, status, started, finished, record in rows:
            rec = json.loads(record or "{}")
            decision = rec.get("decision") or {}
            out.append(
                {
                    "version": version,
                    "status": status,
                    "started_at": started,
                    "finished_at": finished,
                    "timings": rec.get("timings"),
                    "rounds": decision.get("rounds"),
                    "verdict": decision.get("verdict"),
                    "classes": {
                        k: {x: v.get(x) for x in ("ratio", "lo", "hi", "verdict")}
                        for k, v in (decision.get("classes") or {}).items()
                        if isinstance(v, dict)
                    },
                }
            )
        return out
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mcp-softmax"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--tag", default="mcp-softmax")
    ap.add_argument("--bench", default="{python} kopt_bench.py", help="the bench init reads ({python}: this Python)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="the whole script's wall-time budget")
    ap.add_argument("--cpu", action="store_true", help="no GPU: Triton's interpreter")
    args = ap.parse_args()
    import anyio

    env = dict(os.environ)
    if args.cpu:
        env["TRITON_INTERPRET"] = "1"
    bench = args.bench.replace("{python}", sys.executable)
    budget = Budget(args.budget_s)
    rec = Record(args.out, {"tag": args.tag, "cpu": args.cpu, "budget_s": args.budget_s, "python": sys.version})

    def on_term(signum: int, _frame: Any) -> None:
        raise OutOfTime(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    root: Path | None = None
    try:
        root = prepare(args.work, args.tag, bench, env, budget, rec)

        async def bounded() -> str:
            with anyio.move_on_after(max(budget.left(RESERVE_S), 1)) as scope:
                await session(root, args.tag, env, budget, rec)
            return "budget" if scope.cancelled_caught else "done"

        rec.doc["ended"] = anyio.run(bounded)
    except OutOfTime as e:
        rec.doc["ended"] = f"out of time: {e}"
    except SystemExit as e:
        rec.doc["ended"] = f"error: {e}"
    except BaseException as e:  # noqa: BLE001 - recorded, then re-raised below
        rec.doc["ended"] = f"error: {type(e).__name__}: {e}"
        rec.write()
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        rec.write()
        if root is not None:
            try:
                stop = subprocess.run(
                    [sys.executable, *CLI, "--root", str(root), "stop", args.tag],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=max(5.0, min(20.0, budget.left(3))),
                )
                rec.doc["stop"] = (stop.stdout or stop.stderr).strip()[-500:]
            except subprocess.TimeoutExpired:
                rec.doc["stop"] = "kopt stop did not return in time"
            try:
                rec.doc["status"] = json.loads(
                    kopt("status", args.tag, "--json", root=root, env=env, timeout=max(3.0, min(10.0, budget.left(1))))
                )
            except (OutOfTime, SystemExit, ValueError) as e:
                rec.doc["status"] = f"not read: {e}"
            try:
                rec.doc["engine"] = engine_records(root, args.tag)
            except Exception as e:  # noqa: BLE001 - a record, not a reason to lose the rest
                rec.doc["engine"] = f"not read: {type(e).__name__}: {e}"
            rec.write()
    print(json.dumps({k: rec.doc[k] for k in ("ended", "elapsed_s", "setup")}, indent=2, default=str))
    for s in rec.doc["steps"]:
        r = s.get("result") or {}
        print(f"{s['edit']}: {r.get('status', 'no verdict')} in {s.get('wall_s', '-')} s")
    return 0 if rec.doc["ended"] == "done" else 1


if __name__ == "__main__":
    raise SystemExit(main())
