"""A scripted MCP client standing in for an interactive agent on the softmax example
(docs/agents.md, "kopt as an MCP judge"): the session the issue asks to run on the H100.

It copies examples/softmax into a fresh git repo, lets `kopt init --bench` propose its
kopt.toml, starts the engine detached with the manual proposer, then talks to `kopt mcp TAG`
over stdio with the official SDK's client exactly as an agent would: `context`, an edit of
softmax/kernel.py, `submit`, the verdict, the next edit. The edits are meta-parameter changes a
kernel engineer would try first (num_warps, rows per program); each submit's verdict, per-class
deltas and wall time are written as JSON to --out and printed.

    python experiments/mcp_session.py --work /tmp/mcp-softmax --out /tmp/mcp-softmax/session.json

No GPU: set TRITON_INTERPRET=1 (CPU timings, the loop still runs). Each step's wall time is the
submit's, measured here; the engine's own timings are in the run's records.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EDITS = (
    ("NUM_WARPS = 4", "NUM_WARPS = 1", "one warp per row: less shuffle traffic for short rows"),
    ("NUM_WARPS = 1", "NUM_WARPS = 8", "eight warps: more loads in flight for long rows"),
    ("ROWS_PER_PROGRAM = 1", "ROWS_PER_PROGRAM = 2", "two rows per program: fewer programs to launch"),
)


def kopt(*args: str, root: Path) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "kopt_supervisor.kopt_tui.cli", "--root", str(root), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise SystemExit(f"kopt {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def prepare(work: Path, tag: str) -> tuple[Path, Path]:
    if work.exists():
        shutil.rmtree(work)
    repo, root = work / "softmax", work / "workspaces"
    shutil.copytree(REPO / "examples" / "softmax", repo, ignore=shutil.ignore_patterns("results", "__pycache__"))
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "k",
        "GIT_AUTHOR_EMAIL": "k@k",
        "GIT_COMMITTER_NAME": "k",
        "GIT_COMMITTER_EMAIL": "k@k",
    }
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "softmax kernel"]):
        subprocess.run(cmd, cwd=repo, check=True, env=env)
    kopt("init", "--repo", str(repo), "--tag", tag, "--bench", f"{sys.executable} bench.py", "--yes", root=root)
    kopt("run", tag, "--headless", "--proposer", "manual", root=root)
    return repo, root


async def session(root: Path, tag: str, max_wait_s: float) -> list[dict[str, Any]]:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.types import Implementation

    def parsed(result: Any) -> Any:
        text = "".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:
            raise SystemExit(f"MCP error: {text}")
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    params = StdioServerParameters(
        command=sys.executable,
        cwd=str(REPO),
        env=dict(os.environ),
        args=["-m", "kopt_supervisor.kopt_tui.cli", "--root", str(root), "mcp", tag],
    )
    steps = []
    async with Client(params, client_info=Implementation(name="scripted-agent", version="1")) as client:
        for old, new, hypothesis in EDITS:
            end = time.monotonic() + max_wait_s
            while not (st := parsed(await client.call_tool("status")))["ready_for_edits"]:
                if time.monotonic() > end or not st["engine_alive"]:
                    raise SystemExit(f"never ready for edits: {st['why_not_ready']}")
                await anyio.sleep(1)
            context = parsed(await client.call_tool("context"))
            kernel = Path(st["worktree"]) / "softmax" / "kernel.py"
            text = kernel.read_text()
            if old not in text:  # a kept edit moved the parameter: edit from where BEST is
                print(f"skip: {old!r} not in BEST's kernel", flush=True)
                continue
            kernel.write_text(text.replace(old, new, 1))
            said: list[str] = []

            async def progress(_p: float, _t: float | None, message: str | None, said: list[str] = said) -> None:
                said.append(message or "")
                print(f"  {message}", flush=True)

            print(f"submit: {hypothesis}", flush=True)
            t0 = time.monotonic()
            result = parsed(
                await client.call_tool(
                    "submit", {"hypothesis": hypothesis, "scope": "global"}, progress_callback=progress
                )
            )
            steps.append(
                {
                    "edit": f"{old} -> {new}",
                    "hypothesis": hypothesis,
                    "wall_s": round(time.monotonic() - t0, 1),
                    "context_chars": len(context),
                    "progress": said,
                    "result": result,
                }
            )
            print(f"  -> v{result['iteration']} {result['status']}: {result['reason']}", flush=True)
    return steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mcp-softmax"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--tag", default="mcp-softmax")
    ap.add_argument("--max-wait-s", type=float, default=900.0, help="how long to wait for the engine to be ready")
    args = ap.parse_args()
    import anyio

    _, root = prepare(args.work, args.tag)
    try:
        steps = anyio.run(session, root, args.tag, args.max_wait_s)
    finally:
        subprocess.run(
            [sys.executable, "-m", "kopt_supervisor.kopt_tui.cli", "--root", str(root), "stop", args.tag],
            cwd=REPO,
            capture_output=True,
        )
    out = {"tag": args.tag, "steps": steps, "status": json.loads(kopt("status", args.tag, "--json", root=root))}
    text = json.dumps(out, indent=2, default=str)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
