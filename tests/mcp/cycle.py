"""The full cycle the MCP judge's end-to-end tests drive (over stdio and over HTTP) and the
same cycle through `kopt submit`: a regression, a keep, and a borderline candidate that goes
to review and is accepted from the CLI while the submit waits. The engine runs the manual
proposer in a thread of the test; the MCP server is a real `kopt mcp` process."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from kopt_supervisor.engine import api
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import REPO_ROOT
from tests.tui.live import wait_for as wait_until


@dataclass(frozen=True)
class Step:
    factor: float
    """Both classes' time multiplied by this (the fake kernel's speed)."""
    hypothesis: str
    expect: str
    """The iteration's final status."""


STEPS = (
    Step(1.05, "wider tiles for every row size", "regression"),
    Step(0.95, "unrolled inner loop over the row", "keep"),
    Step(0.995, "one fewer barrier per row", "accepted"),
)


def edit(ws: Workspace | Path, factor: float) -> None:
    """Both classes' time times `factor` in the worktree (a workspace: its cand/)."""
    path = (ws.cand if isinstance(ws, Workspace) else ws) / "kernel.json"
    k = json.loads(path.read_text())
    k["speed"] = {c: v * factor for c, v in k["speed"].items()}
    path.write_text(json.dumps(k))


def start_engine(ws: Workspace) -> threading.Thread:
    t = threading.Thread(
        target=run_engine, args=(ws,), kwargs={"proposer": "manual", "max_iters": len(STEPS)}, daemon=True
    )
    t.start()
    return t


def ready(ws: Workspace) -> bool:
    """The engine waits for a submit (what the `status` tool reports as ready_for_edits)."""
    st = api.status(ws)
    p = st.get("progress") or {}
    return st["state"] == "running" and p.get("phase") == "propose" and "kopt submit" in str(p.get("step"))


def accept_when_asked(ws: Workspace, root: Path, version: int) -> None:
    wait_until(lambda: api.status(ws)["pending_reviews"] == [version], what=f"v{version}'s review")
    assert kopt(["--root", str(root), "accept", ws.tag, f"v{version}", "--why", "a consistent small win"]) == 0


def server_argv(root: Path, *extra: str) -> list[str]:
    return ["-m", "kopt_supervisor.kopt_tui.cli", "--root", str(root), "mcp", "t", *extra]


@contextlib.contextmanager
def http_server(root: Path, ws: Workspace) -> Iterator[tuple[str, str]]:
    """A real `kopt mcp t --http` process: (its URL, its bearer token) while it serves."""
    server = subprocess.Popen(
        [sys.executable, *server_argv(root, "--http")], cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        url = ""
        assert server.stderr is not None
        for _ in range(50):
            m = re.search(r"at (http://127\.0\.0\.1:\d+/mcp)", server.stderr.readline())
            if m:
                url = m.group(1)
                break
        assert url, "the server never said where it listens"
        token = (ws.dir / "mcp.token").read_text().strip()
        assert token and token in server.stderr.readline()
        yield url, token
    finally:
        server.terminate()
        server.wait(10)


def as_json(result: Any) -> tuple[Any, bool]:
    text = "".join(getattr(c, "text", "") for c in result.content)
    try:
        return json.loads(text), bool(result.is_error)
    except json.JSONDecodeError:
        return {"text": text}, bool(result.is_error)


def caller(client: Any) -> Call:
    """`Call` through an SDK client (progress messages appended to the list given)."""

    async def call(tool: str, args: dict[str, Any], said: list[str]) -> tuple[Any, bool]:
        async def progress(_p: float, _total: float | None, message: str | None) -> None:
            said.append(message or "")

        return as_json(await client.call_tool(tool, args, progress_callback=progress))

    return call


Call = Callable[[str, dict[str, Any], list[str]], Awaitable[tuple[dict[str, Any], bool]]]
"""(tool, arguments, progress messages out) -> (the tool's JSON result, is_error)."""


async def mcp_cycle(call: Call, ws: Workspace, root: Path) -> list[tuple[dict[str, Any], list[str]]]:
    """Each step through the MCP tools: status until ready, an edit, submit; the review's
    step is answered from the CLI while the submit waits. Returns each submit's result and
    its progress messages."""
    out = []
    for i, step in enumerate(STEPS, 1):
        for _ in range(400):
            st, err = await call("status", {}, [])
            assert not err, st
            if st["ready_for_edits"]:
                break
            await anyio.sleep(0.1)
        assert st["ready_for_edits"] and st["iteration"] == i, st
        if i == 1:
            text, err = await call("context", {}, [])
            assert not err and str(ws.cand) in text["text"] and "cls=large" in text["text"], text
        edit(ws, step.factor)
        said: list[str] = []
        args = {"hypothesis": step.hypothesis, "scope": "global"}
        if step.expect == "accepted":
            answered = threading.Thread(target=accept_when_asked, args=(ws, root, i), daemon=True)
            answered.start()
            result, err = await call("submit", args, said)
            answered.join(5)
        else:
            result, err = await call("submit", args, said)
        assert not err, result
        out.append((result, said))
    return out


def cli_cycle(ws: Workspace, root: Path) -> None:
    """The same steps through `kopt submit` (the engineer's path)."""
    for i, step in enumerate(STEPS, 1):
        wait_until(lambda: ready(ws), what=f"v{i}'s submit wait")
        edit(ws, step.factor)
        answered = None
        if step.expect == "accepted":
            answered = threading.Thread(target=accept_when_asked, args=(ws, root, i), daemon=True)
            answered.start()
        assert kopt(["--root", str(root), "submit", ws.tag, step.hypothesis]) == 0
        wait_until(lambda v=i: ended(ws, v), what=f"v{i}'s verdict")
        if answered is not None:
            answered.join(30)


def ended(ws: Workspace, version: int) -> bool:
    path = ws.memory_path(version)
    return path.exists() and json.loads(path.read_text())["status"] not in ("running", "borderline")


def check_results(results: list[tuple[dict[str, Any], list[str]]], ws: Workspace) -> None:
    """What each submit returned: the verdict, per-class deltas, the iteration's number; the
    review said so while it waited; a keep's commit is BEST."""
    for i, ((result, said), step) in enumerate(zip(results, STEPS, strict=True), 1):
        assert result["iteration"] == i and result["status"] == step.expect, result
        assert set(result["classes"]) == {"cls=small", "cls=large"}, result
        sign = 1 if step.factor > 1 else -1
        assert all(sign * c["delta_pct"] > 0 for c in result["classes"].values()), result
        assert said and said[0].startswith(f"v{i}: submitted (kernel.json)"), said
        assert any("measuring best against the candidate" in s for s in said), said
        assert "profiler" in result and result["seconds"] >= 0
    assert any("the engineer's review" in s for s in results[2][1]), results[2][1]
    assert results[1][0]["commit"] and results[2][0]["commit"]
    assert results[2][0]["decided_by"] == "engineer"
    assert results[-1][0]["ready_for_edits"] is False and "run stopped" in results[-1][0]["next"]
    assert results[0][0]["ready_for_edits"] is True, results[0][0]


VARYING = {
    "started_at",
    "finished_at",
    "commit",
    "best_commit_before",
    "proposal",
    "timings",
    "t",
    "seconds",
    "gpu_seconds",
    "wall_s",
    "cpu_s",
}
"""Record keys that differ between two runs of the same edits (times, commits made at another
second, the proposal's origin); numbers are compared as numbers-or-not, text with its digits
masked (the same measured noise is never drawn twice), and the class a verdict's reason
names first masked too (the larger measured change comes first)."""


def normalized(value: Any, key: str = "") -> Any:
    import re

    if isinstance(value, dict):
        return {k: normalized(v, k) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value if key in ("version", "parent", "repair_attempts") else "<number>"
    if isinstance(value, str):
        if key == "hypothesis":
            return value
        text = re.sub(r"[0-9a-f]{40}", "<sha>", value)
        text = re.sub(r"\d+(\.\d+)?", "#", text)
        if key == "reason":  # which classes it names, and how many, follow the measured noise
            text = re.sub(r"cls=\w+", "cls=<class>", text)
            text = re.sub(
                r"cls=<class> ([^,()]*?)(, cls=<class> [^,()]*?)+( faster| slower|\)|$)", r"cls=<class> \1\3", text
            )
        return text
    return value
