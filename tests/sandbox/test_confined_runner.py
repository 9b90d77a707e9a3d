"""The runner with a confinement: kopt's death, a crash's orphans, interruption, output
limits and the served (per-tree) protocol all keep working under bubblewrap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from kopt_supervisor.engine import sandbox
from kopt_supervisor.engine.runner import kill_orphans, process_tree
from kopt_supervisor.engine.runner.server import Server, ServerError

from .conftest import NEEDS_BWRAP, Run

pytestmark = NEEDS_BWRAP

MARKER = "KOPT_WORKSPACE"


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _wait_gone(pids: list[int], timeout_s: float = 3.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _alive(pids)


def test_the_sandbox_dies_with_kopt(run_layout: Run, tmp_path: Path):
    """kill -9 of the engine mid-bench: --die-with-parent takes bwrap, its init and every
    process inside (a setsid'd one too) with it; nothing is left for recovery to find."""
    r = run_layout
    report = tmp_path / "pids.json"
    engine = tmp_path / "engine.py"
    engine.write_text(f"""
import json, sys, time
from pathlib import Path
from kopt_supervisor.engine import sandbox
from kopt_supervisor.engine.runner.command import run as run_command
from kopt_supervisor.engine.runner import process_tree
ws = Path({str(r.ws)!r})
c = sandbox.for_bench(workspace=ws, cache=ws / "cache" / "cand-0000000", writable_trees=[ws / "cand"])
def poll():
    pids = [p.pid for p in process_tree(pgid[0])] if pgid else []
    if len(pids) >= 5:  # written whole, then renamed: the test never reads half a file
        Path({str(report) + ".part"!r}).write_text(json.dumps(pids))
        Path({str(report) + ".part"!r}).replace({str(report)!r})
pgid = []
run_command("setsid sleep 60 & sleep 60", cwd=ws / "cand", log_dir=ws / "logs" / "v1", name="bench", timeout_s=60,
            env={{"{MARKER}": str(ws)}}, poll=poll, poll_interval_s=0.1, on_start=pgid.append, confine=c)
""")
    proc = subprocess.Popen([sys.executable, str(engine)])
    try:
        deadline = time.monotonic() + 20
        while not report.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = json.loads(report.read_text())
        assert len(_alive(pids)) >= 5
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _wait_gone(pids) == [], "processes outlived the engine"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_kill_orphans_finds_a_sandbox_by_its_marker(run_layout: Run):
    """What recovery does after a crash: the group leader (bwrap) and the processes inside
    carry the marker in their environment; killing the group ends the namespace."""
    r = run_layout
    c = r.bench()
    with sandbox.prepare(c) as ready:
        argv = sandbox.wrap(["sh", "-c", "setsid sleep 60 & sleep 60"], ready, cwd=r.cand)
        env = {**os.environ, MARKER: str(r.ws)}
        proc = subprocess.Popen(argv, cwd=r.cand, env=env, start_new_session=True, pass_fds=(sandbox.read_end(),))
        try:
            deadline = time.monotonic() + 10
            while len(process_tree(proc.pid)) < 5 and time.monotonic() < deadline:
                time.sleep(0.05)
            tree = [p.pid for p in process_tree(proc.pid)]
            assert len(tree) >= 5
            inner = [p for p in process_tree(proc.pid) if p.name() == "sleep"]
            assert all(p.environ().get(MARKER) == str(r.ws) for p in inner)
            assert kill_orphans(proc.pid, (MARKER, "/some/other/workspace")) == 0
            assert len(_alive(tree)) == len(tree)
            assert kill_orphans(proc.pid, (MARKER, str(r.ws))) >= 2
            proc.wait(timeout=5)
            assert _wait_gone(tree) == []
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_poll_interrupts_a_confined_run_and_the_tree_dies(run_layout: Run):
    r = run_layout
    seen: list[int] = []
    pgid: list[int] = []

    class Stop(Exception):
        pass

    def poll() -> None:
        seen.extend(p.pid for p in process_tree(pgid[0]))
        if len(set(seen)) >= 5:
            raise Stop

    with pytest.raises(Stop):
        r.run("setsid sleep 60 & sleep 60", r.bench(), name="b0", poll=poll, poll_interval_s=0.1, on_start=pgid.append)
    assert _wait_gone(sorted(set(seen))) == []


def test_a_confined_flood_is_cut(run_layout: Run):
    r = run_layout
    res = r.run("yes kopt | head -c 20000000; sleep 5", r.bench(), name="b0", max_output_bytes=1_000_000)
    assert res.output_overflow and res.returncode is None
    assert res.stdout_path.stat().st_size <= 1_000_000


def test_a_served_trees_process_reads_its_tree_reaches_not_bests_and_writes_only_its_looks(run_layout: Run):
    """A served tree's process (the candidate's) runs candidate code: its own tree is
    read-only to it, best's tree and run.db are out of its reach, and it writes only the look
    folder kopt reads."""
    r = run_layout
    looks = r.logs / "cand"
    serve = r.py(f"""
import sys
best, cand = {str(r.best)!r}, {str(r.cand)!r}
for line in sys.stdin:
    words = line.split()
    if words[0] == "look":
        n, path = words[1], words[2]
        tries = []
        for target in (best + "/bench.py", cand + "/kernel.py", {str(r.ws / "run.db")!r}):
            try:
                open(target, "a").write("# forged")
                tries.append("WROTE " + target)
            except OSError as e:
                tries.append(e.strerror)
        try:
            open(best + "/bench.py").read()
            tries.append("READ best")
        except OSError as e:
            tries.append(e.strerror)
        src = open(cand + "/kernel.py").read()
        open(path, "w").write("config,latency_us\\na,0.9\\n")
        print("note", ";".join(tries), flush=True)
        print("done", n, flush=True)
""")
    before, kernel = r.snapshot(), (r.cand / "kernel.py").read_bytes()
    from kopt_supervisor.engine.sandbox import cache_dir, for_bench

    confine = for_bench(
        workspace=r.ws,
        cache=cache_dir(r.ws, "cand", "bbbbbbb"),
        readonly_trees=[r.cand],
        outputs=[looks],
        readable=[r.tmp],
    )
    pgid: list[int] = []
    server = Server(
        serve,
        cwd=r.cand,
        log_dir=r.logs,
        name="cand_serve",
        env={MARKER: str(r.ws)},
        on_start=pgid.append,
        confine=confine,
    )
    try:
        notes: list[str] = []
        reply = server.ask(
            f"look 0 {looks / 'r0.csv'}",
            timeout_s=20,
            is_reply=lambda ln: (notes.append(ln) or False) if ln.startswith("note") else ln == "done 0",
        )
        assert reply == "done 0"
        assert "WROTE" not in notes[0] and "READ" not in notes[0], notes
        assert (looks / "r0.csv").read_text().startswith("config,")
        tree = [p.pid for p in process_tree(pgid[0])]
    finally:
        server.close()
    assert _wait_gone(tree) == []
    assert r.snapshot() == before and (r.cand / "kernel.py").read_bytes() == kernel


def test_a_server_that_cannot_write_says_which_key_allows_it(run_layout: Run):
    r = run_layout
    target = r.tmp / "elsewhere.txt"
    serve = r.py(f"open({str(target)!r}, 'w').write('x')")
    server = Server(serve, cwd=r.best, log_dir=r.logs, name="best_serve", confine=r.bench(r.best, readable=[r.tmp]))
    with pytest.raises(ServerError, match=r"it tried to write .*elsewhere.txt.*\[target\]\.writable"):
        server.ask("look 0 /nowhere", timeout_s=20, is_reply=lambda ln: ln == "done 0")
