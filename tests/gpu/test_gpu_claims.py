"""Host-wide GPU claims: flock'd files that die with their process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from kopt_supervisor.engine.gpu.claims import ClaimRegistry, claim_key

ROOT = Path(__file__).resolve().parents[2]
HOLD = (
    "import sys, time; sys.path.insert(0, sys.argv[1]);"
    "from kopt_supervisor.engine.gpu.claims import ClaimRegistry;"
    "r = ClaimRegistry(sys.argv[2], owner='kopt run tag-b'); print(r.claim(sys.argv[3]), flush=True);"
    "time.sleep(60)"
)


def hold(directory: Path, key: str) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ROOT), str(directory), key], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "True"
    return p


def test_claim_key_is_a_safe_file_name():
    assert claim_key("", "GPU-3f1c2b8e-9d4a", 0) == "GPU-3f1c2b8e-9d4a"
    assert claim_key("fake-ab12", "GPU-fake-0", 0) == "fake-ab12-GPU-fake-0"
    assert claim_key("", None, 3) == "index-3"
    assert "/" not in claim_key("", "../../etc/passwd", 0)


def test_claim_probe_release_in_one_process(tmp_path):
    a = ClaimRegistry(tmp_path, owner="run a")
    b = ClaimRegistry(tmp_path, owner="run b")
    assert a.claim("gpu0") and a.claim("gpu0")  # idempotent for its holder
    assert not b.claim("gpu0")
    assert a.probe("gpu0") is None  # not "someone else"
    assert b.probe("gpu0")["owner"] == "run a"
    a.release("gpu0")
    assert b.probe("gpu0") is None and b.claim("gpu0")
    b.release_all()
    assert b.mine == set()


def test_another_process_holds_until_it_dies(tmp_path):
    holder = hold(tmp_path, "gpu1")
    try:
        me = ClaimRegistry(tmp_path, owner="run a")
        info = me.probe("gpu1")
        assert info["pid"] == holder.pid and info["owner"] == "kopt run tag-b"
        assert not me.claim("gpu1")
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert me.probe("gpu1") is None  # the kernel released the dead holder's lock
    assert me.claim("gpu1")
    me.release_all()


def test_the_claim_file_says_who_holds_it_and_is_shared(tmp_path):
    r = ClaimRegistry(tmp_path / "claims", owner="kopt run demo")
    assert r.claim("GPU-x")
    path = tmp_path / "claims" / "GPU-x.lock"
    info = json.loads(path.read_text())
    assert info["pid"] == os.getpid() and info["owner"] == "kopt run demo" and "since" in info
    assert path.stat().st_mode & 0o666 == 0o666
    assert (tmp_path / "claims").stat().st_mode & 0o1777 == 0o1777
    r.release("GPU-x")
    assert path.read_text() == ""


def test_a_probe_never_takes_the_claim(tmp_path):
    r = ClaimRegistry(tmp_path)
    assert r.probe("never-claimed") is None
    assert not (tmp_path / "never-claimed.lock").exists()
    holder = hold(tmp_path, "gpu2")
    try:
        for _ in range(3):
            assert r.probe("gpu2")["pid"] == holder.pid
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
