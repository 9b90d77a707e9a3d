"""Hostile candidate code, run the way the loop runs a bench (runner.command.run in the tree with
sandbox.for_bench and that tree's cache), under real bubblewrap."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading

import psutil
import pytest

from kopt_supervisor.engine.runner import process_tree

from .conftest import NEEDS_BWRAP, Run, git

pytestmark = NEEDS_BWRAP


def test_an_output_cache_in_tmp_shm_home_or_ipc_is_gone_by_the_next_run(run_layout: Run):
    r = run_layout
    places = [
        "/tmp/kopt_cache",
        "$TMPDIR/kopt_cache2",
        "/var/tmp/kopt_cache3",
        "/dev/shm/kopt_cache4",
        "$HOME/.kopt_cache5",
        "/run/kopt_cache6",
    ]
    write = "; ".join(f"echo cached-output > {p}" for p in places)
    has_ipcmk = shutil.which("ipcmk") is not None
    first = r.run(write + ("; ipcmk -M 4096 >/dev/null" if has_ipcmk else "") + "; exit 0", r.bench(), name="bench_r0")
    assert first.ok, first.why() + first.tail()
    check = "; ".join(f"[ -e {p} ] && echo FOUND {p}" for p in places)
    second = r.run(
        check + ("; ipcs -m | grep -c '^0x' | sed 's/^/SEGMENTS /'" if has_ipcmk else "") + "; exit 0",
        r.bench(),
        name="bench_r1",
    )
    assert second.ok
    out = second.stdout_path.read_text()
    assert "FOUND" not in out, out
    if has_ipcmk:
        assert "SEGMENTS 0" in out, out
    for p in ("/tmp/kopt_cache", "/var/tmp/kopt_cache3", "/dev/shm/kopt_cache4", "/run/kopt_cache6"):
        assert not os.path.exists(p), f"{p} reached the host"


def test_no_network_unless_the_target_asks_for_it(run_layout: Run):
    r = run_layout
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        server.settimeout(10)
        try:
            while True:
                conn, _ = server.accept()
                accepted.append(conn)
        except OSError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    probe = r.py(f"""
import socket, sys
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    print("CONNECTED")
except OSError as e:
    print("refused:", e)
""")
    try:
        for confine in (r.bench(), r.proposer(network=False)):  # [propose].network = false too
            res = r.run(probe, confine, name="bench_r0")
            assert res.ok and "CONNECTED" not in res.stdout_path.read_text()
        assert accepted == []
        res = r.run(probe, r.bench(network=True), name="bench_r1")  # [target].network = true
        assert "CONNECTED" in res.stdout_path.read_text()
        assert len(accepted) == 1
    finally:
        server.close()
        for c in accepted:
            c.close()  # type: ignore[attr-defined]


def test_writes_outside_the_writable_paths_fail_and_say_which_key_allows_them(run_layout: Run):
    r = run_layout
    outside = r.tmp / "shared_data"
    outside.mkdir()
    (outside / "input.bin").write_bytes(b"data")
    script = r.py(f"""
import os
open("{outside}/result.bin", "w").write("x")
""")
    res = r.run(script, r.bench(readable=[r.tmp]), name="bench_r0")
    assert not res.ok
    assert not (outside / "result.bin").exists()
    why = res.why()
    assert f"it tried to write {outside}/result.bin" in why and "[target].writable" in why, why
    res = r.run(script, r.bench(readable=[r.tmp], writable=[str(outside)]), name="bench_r1")
    assert res.ok, res.why()
    assert (outside / "result.bin").read_text() == "x"


def test_a_bench_writes_only_its_own_tree_and_cache(run_layout: Run):
    r = run_layout
    before = r.snapshot()
    cand_cache, best_cache = r.cache(r.cand), r.cache(r.best)
    script = f"""
echo forged > {r.best}/bench.py && echo WROTE-BEST
echo forged > {r.ws}/run.db && echo WROTE-DB
echo forged > {r.repo}/bench.py && echo WROTE-REPO
mkdir -p {best_cache} && echo poisoned > {best_cache}/x && echo WROTE-BEST-CACHE
echo 'a,1.0' > results.csv && echo WROTE-CSV
echo compiled > $TRITON_CACHE_DIR.marker 2>/dev/null; mkdir -p $TRITON_CACHE_DIR && echo kernel > $TRITON_CACHE_DIR/k && echo WROTE-CACHE
exit 0
"""
    res = r.run(script, r.bench(), name="bench_r0")
    out = res.stdout_path.read_text()
    assert "WROTE-CSV" in out and "WROTE-CACHE" in out, out + res.tail()
    for marker in ("WROTE-BEST\n", "WROTE-DB", "WROTE-BEST-CACHE"):
        assert marker not in out, out
    assert r.snapshot() == before
    # the repo lies under /tmp here, which is private: a write there lands in the sandbox's own /tmp
    assert (r.repo / "bench.py").read_text().startswith("print(")
    assert (r.cand / "results.csv").exists()
    assert (cand_cache / "triton" / "k").read_text() == "kernel\n"
    assert not best_cache.exists() or not (best_cache / "x").exists()


def test_a_candidates_cache_is_never_read_by_best_or_another_tree(run_layout: Run):
    r = run_layout
    show = "cat $TRITON_CACHE_DIR/k 2>/dev/null || echo EMPTY; echo $TRITON_CACHE_DIR"
    res = r.run("mkdir -p $TRITON_CACHE_DIR && echo cand-kernel > $TRITON_CACHE_DIR/k", r.bench(), name="b0")
    assert res.ok
    again = r.run(show, r.bench(), name="b1")  # the same tree: its own cache, warm
    assert again.stdout_path.read_text().startswith("cand-kernel")
    on_best = r.run(show, r.bench(r.best), cwd=r.best, name="b2")
    assert on_best.stdout_path.read_text().startswith("EMPTY")
    (r.cand / "kernel.py").write_text("def kernel(x):\n    return -x\n")
    git(r.cand, "add", "-A")  # a new candidate tree
    other = r.run(show, r.bench(), name="b3")
    assert other.stdout_path.read_text().startswith("EMPTY")


def test_sigstop_to_a_process_outside_cannot_reach_it(run_layout: Run):
    r = run_layout
    outside = subprocess.Popen(["sleep", "30"])
    try:
        script = r.py(f"""
import os, signal
for pid in ({outside.pid}, {os.getpid()}, 1):
    try:
        os.kill(pid, signal.SIGSTOP if pid != 1 else 0)
        print("signalled", pid, open(f"/proc/{{pid}}/comm").read().strip())
    except OSError as e:
        print("no", pid, e.strerror)
""")
        res = r.run(script, r.bench(), name="bench_r0")
        assert res.ok, res.why()
        out = res.stdout_path.read_text()
        assert f"signalled {outside.pid}" not in out and f"signalled {os.getpid()}" not in out, out
        assert (
            "signalled 1 kopt-init" in out
        )  # PID 1 is the sandbox's own init (kopt's: the lifeline of sandbox/confinement.py)
        assert psutil.Process(outside.pid).status() != psutil.STATUS_STOPPED
    finally:
        outside.kill()
        outside.wait()


def test_kill_minus_one_ends_only_the_sandbox(run_layout: Run):
    r = run_layout
    outside = subprocess.Popen(["sleep", "30"])
    host_ns = os.readlink("/proc/self/ns/pid")
    # Guarded: on this shared machine `kill -9 -1` must never run outside a PID namespace.
    script = f"""
[ "$(readlink /proc/self/ns/pid)" != "{host_ns}" ] || exit 99
[ "$(cat /proc/1/comm)" = kopt-init ] || exit 98
sleep 30 &
kill -9 -1
echo after
"""
    confine = r.bench()
    assert "--unshare-pid" in __import__("kopt_supervisor.engine.sandbox", fromlist=["wrap"]).wrap(["x"], confine)
    try:
        res = r.run(script, confine, name="bench_r0", timeout_s=20)
        assert res.returncode not in (98, 99), "not in its own PID namespace: the test refused to go on"
        assert res.duration_s < 10
        assert outside.poll() is None, "a process outside the sandbox was killed"
    finally:
        outside.kill()
        outside.wait()


def test_capabilities_are_dropped_and_proc_sys_is_read_only(run_layout: Run):
    r = run_layout
    # opened for writing, never written: a failure here leaves the host's sysctls as they were
    script = r.py("""
import os, subprocess
print("CapEff", [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0])
for p in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/hostname"):
    try:
        os.close(os.open(p, os.O_WRONLY))
        print("WRITABLE", p)
    except OSError as e:
        print("refused", p, e.strerror)
rc = subprocess.run(["mount", "-o", "remount,rw", "/"], capture_output=True).returncode
print("remount", rc)
""")
    for confine in (r.bench(), r.proposer()):
        res = r.run(script, confine, name="caps")
        out = res.stdout_path.read_text()
        assert "CapEff 0000000000000000" in out, out
        assert "WRITABLE" not in out, out
        assert "remount 0" not in out, out


def test_a_unix_socket_in_sight_is_covered(run_layout: Run):
    r = run_layout
    sock_dir = r.tmp / "sockets"
    sock_dir.mkdir()
    path = sock_dir / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    probe = r.py(f"""
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("{path}")
    print("CONNECTED")
except OSError as e:
    print("refused", e.strerror)
""")
    try:
        res = r.run(probe, r.bench(readable=[r.tmp]), name="b0")  # discovered from /proc/net/unix
        assert "CONNECTED" not in res.stdout_path.read_text(), res.stdout_path.read_text()
        res = r.run(probe, r.bench(readable=[r.tmp], sockets=[]), name="b1")  # the control: not covered
        assert "CONNECTED" in res.stdout_path.read_text()
    finally:
        server.close()


def test_bytecode_planted_beside_a_source_is_never_loaded(run_layout: Run):
    r = run_layout
    import py_compile
    import sys

    (r.cand / "mod.py").write_text("VALUE = 'source'\n")
    evil = r.tmp / "evil.py"
    evil.write_text("VALUE = 'planted bytecode'\n")
    tag = sys.implementation.cache_tag
    (r.cand / "__pycache__").mkdir()
    # an unchecked-hash pyc is loaded whatever the source says: unconfined Python runs it
    py_compile.compile(
        str(evil),
        cfile=str(r.cand / "__pycache__" / f"mod.{tag}.pyc"),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    command = f"{sys.executable} -c 'import mod; print(mod.VALUE)'"
    control = subprocess.run(
        command,
        shell=True,
        cwd=r.cand,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"},
    )
    assert control.stdout.strip() == "planted bytecode"
    res = r.run(command, r.bench(), name="b0")
    assert res.ok, res.why() + res.tail()
    assert res.stdout_path.read_text().strip() == "source"


def test_a_runaway_confined_bench_is_killed_whole_on_timeout(run_layout: Run):
    r = run_layout
    seen: set[int] = set()
    pgid: list[int] = []

    def watch() -> None:
        if pgid:
            seen.update(p.pid for p in process_tree(pgid[0]))

    res = r.run(
        "setsid sleep 60 & sleep 60",
        r.bench(),
        name="b0",
        timeout_s=1.0,
        poll=watch,
        poll_interval_s=0.1,
        on_start=pgid.append,
    )
    assert res.timed_out and res.returncode is None
    assert "timed out" in res.why()
    assert seen and all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in seen)


@pytest.mark.parametrize("missing", ["a-program-that-does-not-exist"])
def test_a_program_missing_inside_the_sandbox_is_named(run_layout: Run, missing: str):
    r = run_layout
    res = r.run([missing, "--flag"], r.bench(), name="b0")  # type: ignore[arg-type]  # argv form
    assert not res.ok
    assert missing in res.why() and "the sandbox" in res.why(), res.why()
