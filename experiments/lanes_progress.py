"""Lanes that multiply progress (issue 27, docs/lanes.md, docs/results-multi-gpu.md): the time a
bundled demo takes from its naive start to a speedup with 1 lane and with 4, where each lane's
time went and the share wasted on stale candidates; and an A/A run (comment-only candidates).

    python -m experiments.lanes_progress rms1  --out DIR [--budget-s 540]   # RMSNorm, 1 lane
    python -m experiments.lanes_progress rms4  --out DIR                    # RMSNorm, 4 lanes (rms2: 2)
    python -m experiments.lanes_progress adaln1 | adaln4 --out DIR          # adaLN, 1 | 4 lanes
    python -m experiments.lanes_progress aa4   --out DIR                    # A/A: 4 lanes, >= 40 candidates
    python -m experiments.lanes_progress aa1   --out DIR                    # A/A: the same lane alone
    python -m experiments.lanes_progress rms1 --smoke                       # here, no GPU: a short CPU run

On the device (bash experiments/lanes_progress.sh PART: it installs the carried wheels first).
Each part runs `kopt run TAG --foreground` of a fresh demo workspace (the bundled kernel's
naive start, the tune proposer, the profiler off) under `--budget-s` (default 540 s: each part
stays under the device tool's 10 minutes), and stops it with `kopt stop` once the best speedup
reaches `--target` (3.4 for RMSNorm, `LANES_TARGET` to change it) or the time is up. It writes
DIR/<part>.json, rewritten every poll (a part cut short keeps what it measured):

- command, host, GPUs (nvidia-smi -L), date, kopt version, lanes;
- `gpu_time` (engine.api.progress: the speedup per keep against wall and GPU time, each lane's
  time by bucket, the stale share), `time_to_target_s` (wall seconds to the first keep at or
  above the target; null when not reached), the verdicts;
- A/A parts: candidates, kept (every keep is a false keep), and per class the spread of the
  looks (the standard deviation of log(candidate / best) over every look of every candidate),
  which `aa4` against `aa1` says how much busy neighbour GPUs move.

Compare 4 lanes with 1 by `time_to_target_s` of rms4 against rms1 (the issue bounds it at 0.4).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kopt_supervisor.engine import api  # noqa: E402
from kopt_supervisor.engine.store import Store  # noqa: E402
from kopt_supervisor.engine.workspace import Workspace  # noqa: E402
from kopt_supervisor.kernels import catalog  # noqa: E402

PARTS = {
    f"{name}{lanes}": (kernel, lanes, aa)
    for name, kernel, aa in (
        ("rms", "rmsnorm", False),
        ("adaln", "adaln", False),
        ("aa", "rmsnorm", True),
        ("ray", "rmsnorm", False),
    )
    for lanes in (1, 2, 4)
}
"""rms1 | rms2 | rms4, adaln1 | adaln2 | adaln4, aa1 | aa2 | aa4: the kernel, its lanes, A/A or not (the 2-lane
parts for a host of two GPUs, the 4-GPU kinds being withheld at times). ray4 (ray2): rms4 (rms2)
through a Ray cluster made on this host (`RayCluster`), one of its lane workers killed mid-decision."""
RAY_PORT = 6391
KILL_AFTER_S = 60.0
"""ray parts: the first lane worker found mid-look this many seconds after the run started is killed."""


class RayCluster:
    """A Ray cluster on this host as docs/lanes.md sets one up across hosts: a head with no GPU
    (the engine's host) and two worker nodes, each owning half of the host's GPUs (its raylet
    started with CUDA_VISIBLE_DEVICES; without GPUs, `--smoke`, two nodes of logical ones)."""

    def __init__(self, out: Path, n_gpus: int) -> None:
        self.out, self.n_gpus = out, n_gpus
        self.address = f"127.0.0.1:{RAY_PORT}"
        self.nodes: list[dict[str, Any]] = []
        self.killed: list[dict[str, Any]] = []
        self.seen: list[str] = []
        """The lane workers' process titles at the last try to kill one."""

    def _ray(self, *args: str, env: dict[str, str] | None = None) -> str:
        beside = Path(sys.executable).parent / "ray"
        argv = [str(beside) if beside.is_file() else (shutil.which("ray") or "ray"), *args]
        res = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, **(env or {}), "RAY_USAGE_STATS_ENABLED": "0"},
        )
        with (self.out / "ray_cluster.log").open("a") as log:
            log.write(f"$ {' '.join(argv)}\n{res.stdout[-3000:]}{res.stderr[-3000:]}\n")
        if res.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {res.stderr[-1500:]}")
        return res.stdout

    def start(self) -> None:
        self._ray(
            "start",
            "--head",
            f"--port={RAY_PORT}",
            "--num-cpus=1",
            "--num-gpus=0",
            "--include-dashboard=false",
            "--disable-usage-stats",
        )
        n = max(self.n_gpus, 4)  # no GPU (--smoke): two nodes of two logical GPUs each
        halves = [list(range(n))[: n // 2], list(range(n))[n // 2 :]]
        for half in halves:
            devices = ",".join(map(str, half))
            self._ray(
                "start",
                f"--address={self.address}",
                f"--num-gpus={len(half)}",
                "--num-cpus=8",
                "--dashboard-agent-listen-port=0",
                env={"CUDA_VISIBLE_DEVICES": devices},
            )
            self.nodes.append({"gpus": devices})
        self.status = self._ray("status", f"--address={self.address}")

    def lane_workers(self) -> list[tuple[int, str]]:
        """(pid, process title) of each LaneWorker actor's process (Ray names them ray::LaneWorker...)."""
        out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, timeout=30).stdout
        found = []
        for line in out.splitlines():
            pid, _, args = line.strip().partition(" ")
            if args.startswith("ray::LaneWorker"):
                found.append((int(pid), args.strip()))
        return found

    def kill_one_mid_look(self, t_s: float) -> bool:
        """SIGKILL the first lane worker caught mid-look (its title names the method it runs)."""
        found = self.lane_workers()
        self.seen = [title for _, title in found]
        for pid, title in found:
            if ".look" in title:
                os.kill(pid, 9)
                self.killed.append({"pid": pid, "title": title, "t_s": round(t_s, 1)})
                return True
        return False

    def stop(self) -> None:
        try:
            self._ray("stop", "--force")
        except (SystemExit, subprocess.TimeoutExpired):
            pass


AA_CANDIDATES = 40
SOLUTION = "solution/rmsnorm.py"
"""The file an A/A candidate appends its comment to (experiments/h100_wave3/candidates.py)."""
POLL_S = 2.0
AA_PROPOSER = r"""
import os, pathlib
n = os.environ["KOPT_ITERATION"]
# a comment-only change (the A/A of docs/h100-wave3): the solution's code is the same
sol = pathlib.Path("SOLUTION")
sol.write_text(sol.read_text() + f"\n# A/A {n}: a comment-only change (the same kernel code)\n")
pathlib.Path(os.environ["KOPT_PLAN"]).write_text(f"A/A {n}: a comment-only change; the kernel's code is the same\n"
                                                 "scope: global\n")
"""


def kopt(root: Path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kopt_supervisor.kopt_tui.cli", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO_ROOT,
    )


def set_lanes(text: str, lanes: int) -> str:
    if re.search(r"^\[parallel\]", text, re.M):
        return re.sub(r"(\[parallel\]\n(?:#.*\n)*)lanes = \d+", rf"\g<1>lanes = {lanes}", text)
    return text + f"\n[parallel]\nlanes = {lanes}\n"


def aa_propose(text: str, script: Path) -> str:
    """The demo's config with the comment-only proposer, no stop on regressions (an A/A's
    "regressions" are false ones, counted, not a reason to stop) and AA_CANDIDATES iterations."""
    command = json.dumps(f"{sys.executable} {script}")
    text = re.sub(r'\[propose\]\nkind = "tune"\n', f'[propose]\nkind = "command"\ncommand = {command}\n', text)
    text = re.sub(r"consecutive_regressions = \d+", "consecutive_regressions = 1000", text)
    return re.sub(r"max_iters = \d+", f"max_iters = {AA_CANDIDATES}", text)


def on_ray(text: str, address: str) -> str:
    """The demo's config with its lanes on the Ray cluster at `address`."""
    return re.sub(
        r"(\[parallel\]\n(?:#.*\n)*lanes = \d+\n)",
        rf'\g<1>backend = "ray"\naddress = "{address}"\nconnect_timeout_s = 60\n',
        text,
    )


def prepare(root: Path, kernel: str, lanes: int, aa: bool, gpu: bool, ray_address: str | None = None) -> Workspace:
    """A fresh demo repo of `kernel` at its naive start (profiler off), with `lanes` lanes and
    (A/A) the comment-only proposer; its workspace made by `kopt init`."""
    from kopt_supervisor.engine import gitops
    from kopt_supervisor.engine.api import HEADLESS_REVIEW_S

    repo = root.parent / f"repo-{kernel}-{lanes}{'-aa' if aa else ''}{'-ray' if ray_address else ''}"
    repo.mkdir(parents=True, mode=0o700)
    catalog.materialize(kernel, repo, naive=True, cpu=not gpu, review_timeout_s=HEADLESS_REVIEW_S, profile=False)
    text = set_lanes((repo / "kopt.toml").read_text(), lanes)
    if ray_address:
        text = on_ray(text, ray_address)
        assert 'backend = "ray"' in text, "the demo's [parallel] section changed: update on_ray"
    if aa:
        # in the target repo: the proposer runs confined in its candidate worktree (a private /tmp)
        (repo / "aa_proposer.py").write_text(AA_PROPOSER.replace("SOLUTION", SOLUTION))
        text = aa_propose(text, Path("aa_proposer.py"))
        assert 'kind = "command"' in text, "the demo's [propose] section changed: update aa_propose"
    (repo / "kopt.toml").write_text(text)
    gitops.init_repo(repo, f"{kernel}: bundled kopt demo kernel, naive configuration")
    tag = f"{kernel}-{lanes}{'-aa' if aa else ''}{'-ray' if ray_address else ''}"
    res = kopt(root, "init", "--repo", str(repo), "--tag", tag)
    if res.returncode != 0:
        raise SystemExit(f"kopt init failed: {res.stdout[-2000:]}{res.stderr[-2000:]}")
    return Workspace(root, tag)


def look_spread(ws: Workspace) -> dict[str, float | None]:
    """Per class: the standard deviation of log(candidate / best) over every eval look."""
    per: dict[str, list[float]] = {}
    with Store(ws.db_path, readonly=True) as store:
        for it in store.iterations():
            if it.version == 0:
                continue
            cells: dict[tuple[int, int, str], dict[str, Any]] = {}
            for s in store.samples(it.version, "eval"):
                c = cells.setdefault((s["round"], s["block"], s["config"]), {"cls": s["cls"]})
                c[s["side"]] = s["value"]
            looks: dict[tuple[int, str], list[float]] = {}
            for (r, _, _), c in cells.items():
                if c.get("best") and c.get("cand") and c["best"] > 0 and c["cand"] > 0:
                    looks.setdefault((r, c["cls"]), []).append(math.log(c["cand"] / c["best"]))
            for (_, cls), logs in looks.items():
                per.setdefault(cls, []).append(statistics.median(logs))
    return {cls: (statistics.stdev(v) if len(v) > 1 else None) for cls, v in sorted(per.items())}


def gpus() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in out.splitlines() if line.strip()]


def ray_summary(ws: Workspace, cluster: RayCluster) -> dict[str, Any]:
    """What the Ray part shows: the nodes, the worker killed, the looks taken again, that no
    look counted twice, and where every run went (hosts and GPUs from the records)."""
    with Store(ws.db_path, readonly=True) as store:
        its = store.iterations()
        lost = [e.message for e in store.events(limit=100_000) if e.kind == "lanes" and "was lost" in e.message]
        twice = 0
        for it in its:
            cells = [(x["round"], x["block"], x["config"], x["side"]) for x in store.samples(it.version, "eval")]
            twice += len(cells) - len(set(cells))
    return {
        "address": cluster.address,
        "nodes": cluster.nodes,
        "killed": cluster.killed,
        "worker_titles_seen": cluster.seen,
        "lost_and_taken_again": lost,
        "samples_counted_twice": twice,
        "gpus": sorted({str((it.record.get("gpu") or {}).get("uuid")) for it in its if it.record.get("gpu")}),
        "baseline_gpu": next(((it.record.get("gpu") or {}) for it in its if it.version == 0), None),
    }


def summary(
    ws: Workspace,
    part: str,
    args: argparse.Namespace,
    lanes: int,
    aa: bool,
    started: float,
    ended_by: str,
    cluster: RayCluster | None = None,
) -> dict[str, Any]:
    st = api.status(ws)
    with Store(ws.db_path, readonly=True) as store:
        its = store.iterations()
    progress = api.progress(its, "min")
    hit = progress.time_to(args.target) if not aa else None
    out: dict[str, Any] = {
        "part": part,
        "command": " ".join([sys.executable, "-m", "experiments.lanes_progress", *sys.argv[1:]]),
        "host": platform.node(),
        "gpus": gpus(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "kopt": _version(),
        "lanes": lanes,
        "target": None if aa else args.target,
        "wall_s": round(time.monotonic() - started, 1),
        "ended_by": ended_by,
        "state": st["state"],
        "stop_reason": st["stop_reason"],
        "best_speedup": st["best_speedup"],
        "time_to_target_s": hit.t_s if hit else None,
        "gpu_s_to_target": hit.gpu_s if hit else None,
        "verdicts": dict(Counter(str(it.status) for it in its if it.version)),
        "gpu_time": progress.to_dict(),
    }
    out["keeps"] = [
        {"version": it.version, "lane": it.record.get("lane"), "hypothesis": it.hypothesis}
        for it in its
        if it.version and it.kept
    ]
    if cluster is not None:
        out["ray"] = ray_summary(ws, cluster)
    if aa:
        out["candidates"] = sum(1 for it in its if it.version and it.final)
        out["kept"] = sum(1 for it in its if it.version and it.kept)
        out["look_spread"] = look_spread(ws)
    return out


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("kopt-supervisor")
    except metadata.PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=sorted(PARTS))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--target", type=float, default=float(os.environ.get("LANES_TARGET", "3.4")))
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--smoke", action="store_true", help="no GPU here: a short CPU run (Triton's interpreter)")
    args = ap.parse_args(argv)
    kernel, lanes, aa = PARTS[args.part]
    gpu = bool(gpus()) and not args.smoke
    on_ray = args.part.startswith("ray")
    if args.smoke:
        args.budget_s, args.target = min(args.budget_s, 240.0), min(args.target, 1.05)
    out = args.out or Path(tempfile.gettempdir()) / "lanes_progress_smoke"
    out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix=f"kopt-lanes-{args.part}-"))
    started = time.monotonic()
    deadline = started + args.budget_s - 45  # setup and the stop's own seconds
    root = work / "workspaces"
    root.mkdir(parents=True, exist_ok=True)
    cluster = RayCluster(out, len(gpus()) if gpu else 0) if on_ray else None
    kill_after = 10.0 if args.smoke else KILL_AFTER_S
    if cluster is not None:
        (out / "ray_cluster.log").write_text("")
        cluster.start()
    ws = prepare(root, kernel, lanes, aa, gpu, cluster.address if cluster else None)
    log = (out / f"{args.part}.engine.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kopt_supervisor.kopt_tui.cli",
            "--root",
            str(root),
            "run",
            ws.tag,
            "--foreground",
            *(["--max-iters", str(AA_CANDIDATES)] if aa else []),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    ended_by = "the run stopped"
    result: dict[str, Any] = {}
    try:
        while proc.poll() is None:
            time.sleep(POLL_S)
            elapsed = time.monotonic() - started
            if cluster is not None and not cluster.killed and elapsed > kill_after:
                cluster.kill_one_mid_look(elapsed)  # a worker lost mid-decision
            try:
                result = summary(ws, args.part, args, lanes, aa, started, "running", cluster)
            except Exception as e:  # noqa: BLE001 - a poll racing the engine's first writes
                result = {"part": args.part, "error": str(e)}
            (out / f"{args.part}.json").write_text(json.dumps(result, indent=1, default=str))
            reached = not aa and (result.get("best_speedup") or 0) >= args.target
            # a Ray part stops at its target only once a worker was killed (or could not be caught mid-look)
            reached = reached and (cluster is None or bool(cluster.killed) or elapsed > kill_after + 120)
            if reached or time.monotonic() > deadline:
                ended_by = f"best speedup reached {args.target}" if reached else f"the budget of {args.budget_s:g} s"
                kopt(root, "stop", ws.tag)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        log.close()
    result = summary(ws, args.part, args, lanes, aa, started, ended_by, cluster)
    if cluster is not None:
        cluster.stop()
    (out / f"{args.part}.json").write_text(json.dumps(result, indent=1, default=str))
    shutil.copy(ws.db_path, out / f"{args.part}.run.db")
    print(
        json.dumps(
            {
                k: result.get(k)
                for k in (
                    "part",
                    "lanes",
                    "best_speedup",
                    "time_to_target_s",
                    "ended_by",
                    "verdicts",
                    "candidates",
                    "kept",
                    "look_spread",
                    "ray",
                )
            },
            default=str,
        )
    )
    print("stale share:", (result.get("gpu_time") or {}).get("stale_share"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
