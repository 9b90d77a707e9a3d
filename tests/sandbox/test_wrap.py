"""The sandbox's pure parts and its rule at start: the bwrap command line, the constructors'
refusals, the per-tree cache layout, the helpers that read a confined run's failure, and
`probe`/`start_rule` on a machine without (working) bubblewrap. None needs bwrap."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput, sandbox
from kopt_supervisor.engine.sandbox import Confinement, wrap
from kopt_supervisor.engine.sandbox.confinement import watched

from .conftest import Run


def _mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(option, destination) of every mount in a bwrap argv, in order."""
    out, i = [], 0
    two = {"--bind", "--ro-bind", "--dev-bind"}
    one = {"--tmpfs", "--dev", "--proc", "--dir", "--remount-ro"}
    while i < len(argv) and argv[i] != "--":
        if argv[i] in two:
            out.append((argv[i], argv[i + 2]))
            i += 3
        elif argv[i] in one:
            out.append((argv[i], argv[i + 1]))
            i += 2
        else:
            i += 1
    return out


def test_every_confinement_has_the_namespaces_caps_and_private_dirs():
    argv = wrap(["python", "bench.py"], Confinement(), cwd="/")
    assert argv[0] == sandbox.confinement.default_path()
    assert argv[argv.index("--") + 1 :] == watched(["python", "bench.py"], sandbox.read_end())
    for flag in ("--die-with-parent", "--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-net"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    m = _mounts(argv)
    assert m[0] == ("--ro-bind", "/")
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run"):
        assert ("--tmpfs", d) in m
    assert ("--ro-bind", "/proc/sys") in m and m.index(("--ro-bind", "/proc/sys")) > m.index(("--proc", "/proc"))
    assert m.index(("--tmpfs", "/dev/shm")) > m.index(("--dev", "/dev"))
    env = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert env["TMPDIR"] == "/tmp" and env["PYTHONNOUSERSITE"] == "1"
    assert "--share-net" not in argv and "--unshare-net" not in wrap(["x"], Confinement(network=True))


def test_mount_order_hidden_wins_and_binds_beneath_come_after(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "cand").mkdir(parents=True)
    (ws / "cand" / ".git").write_text("gitdir: /nowhere\n")
    c = Confinement(writable=(ws / "cand", ws), readonly=(ws / "cand" / ".git",), hidden=(ws,), readable=(tmp_path,))
    m = _mounts(wrap(["true"], c))
    assert ("--bind", str(ws)) not in m  # hidden wins at the same path
    order = [
        m.index(x)
        for x in (
            ("--ro-bind", str(tmp_path)),
            ("--tmpfs", str(ws)),
            ("--bind", str(ws / "cand")),
            ("--ro-bind", str(ws / "cand" / ".git")),
            ("--remount-ro", str(ws)),
        )
    ]
    assert order == sorted(order)


def test_gpu_device_nodes_are_found_and_passed_through(tmp_path: Path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "kfd", "null", "sda"):
        (dev / name).write_text("")
    for d in ("nvidia-caps", "dri"):
        (dev / d).mkdir()
    found = {p.name for p in sandbox.gpu_devices(dev)}
    assert found == {"nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps", "kfd", "dri"}
    m = _mounts(wrap(["x"], Confinement(devices=tuple(sandbox.gpu_devices(dev)))))
    assert ("--dev-bind", str(dev / "nvidia0")) in m and ("--dev-bind", str(dev / "dri")) in m


def test_a_private_git_copy_needs_prepare_and_prepare_cleans_up(run_layout: Run):
    r = run_layout
    c = r.proposer()
    assert c.private_git is not None and c.private_git.common == (r.repo / ".git").resolve()
    with pytest.raises(ValueError, match="prepare"):
        wrap(["git", "status"], c)
    with sandbox.prepare(c) as ready:
        scratch = ready.scratch
        assert scratch is not None and (scratch / "admin" / "index").exists()
        assert scratch.parent == r.ws / sandbox.SCRATCH  # in the workspace: hidden, and recovery clears it
        assert (scratch / "admin" / "commondir").read_text().strip() == sandbox.GIT_COMMON_MOUNT
        assert (scratch / "objects" / "info" / "alternates").read_text().strip() == str(
            c.private_git.common / "objects"
        )
        assert r.plan.is_file() and r.plan.read_text() == ""  # a bound file must exist: created empty
        assert r.out.is_dir()
        m = _mounts(wrap(["git", "status"], ready))
        assert ("--bind", str(c.private_git.admin)) in m
        for name in ("objects", "refs", "logs", "packed-refs"):
            assert ("--bind", f"{sandbox.GIT_COMMON_MOUNT}/{name}") in m
        assert (scratch / "refs" / "heads").is_dir() and "kopt/T" in (scratch / "packed-refs").read_text()
    assert not scratch.exists()


def test_constructors_refuse_paths_that_would_open_the_workspace(run_layout: Run):
    r = run_layout
    with pytest.raises(BadInput, match="not inside the run's workspace"):
        sandbox.for_proposer(worktree=r.cand, workspace=r.ws, prompt=r.prompt, plan=r.tmp / "plan.md")
    for bad in ("~", "/usr", "/dev/shm", str(r.ws / "memory")):
        expect = "must not see" if "memory" in bad else ("names" if bad != "~" else "")
        try:
            r.bench(writable=[bad])
        except BadInput as e:
            assert "[target].writable" in str(e) and expect in str(e)
        else:
            assert bad == "~", f"{bad} was accepted"
    with pytest.raises(BadInput, match="stays read-only"):
        r.bench(writable=[str(r.repo / ".git" / "hooks")])


def test_cache_dirs_are_per_side_and_tree(tmp_path: Path):
    a = sandbox.cache_dir(tmp_path, "cand", "a" * 40)
    assert a == tmp_path / "cache" / ("cand-" + "a" * 20)
    assert sandbox.cache_dir(tmp_path, "best", "a" * 40) != a
    assert sandbox.cache_dir(tmp_path, "ab", "a" * 40, "b" * 40).name == f"ab-{'a' * 20}-{'b' * 20}"
    for side, tree in (("../x", "abcdef1"), ("cand", "../../etc"), ("cand", "xyz")):
        with pytest.raises(ValueError):
            sandbox.cache_dir(tmp_path, side, tree)
    env = sandbox.cache_env("/c")
    assert env["TRITON_CACHE_DIR"] == "/c/triton" and env["PYTHONPYCACHEPREFIX"] == "/c/pycache"
    assert all(v.startswith("/c/") for v in env.values())


def test_prune_caches_keeps_only_the_named(tmp_path: Path):
    keep = sandbox.cache_dir(tmp_path, "best", "a" * 40)
    drop = sandbox.cache_dir(tmp_path, "cand", "b" * 40)
    for d in (keep, drop):
        (d / "triton").mkdir(parents=True)
    removed = sandbox.prune_caches(tmp_path, [keep])
    assert removed == [drop] and keep.exists() and not drop.exists()


def test_denied_write_finds_the_path_in_common_messages():
    cases = {
        "OSError: [Errno 30] Read-only file system: '/data/out.bin'": "/data/out.bin",
        "touch: cannot touch '/home/u/x': Read-only file system": "/home/u/x",
        "/bin/sh: 1: cannot create /opt/y: Read-only file system": "/opt/y",
        "mkdir: cannot create directory ‘/srv/z’: Read-only file system": "/srv/z",
        "error: open /var/lib/q: read-only file system": "/var/lib/q",
        "PermissionError: [Errno 13] Permission denied: '/x'": None,
        "no error here": None,
    }
    for text, want in cases.items():
        assert sandbox.denied_write(text) == want, text
    assert (
        sandbox.bwrap_error("x\nbwrap: execvp nope: No such file or directory\n")
        == "bwrap: execvp nope: No such file or directory"
    )


def test_read_output_refuses_links_and_fifos(tmp_path: Path):
    secret = tmp_path / "run.db"
    secret.write_bytes(b"store")
    link = tmp_path / "look.csv"
    link.symlink_to(secret)
    with pytest.raises(OSError):
        sandbox.read_output(link, 100)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        sandbox.read_output(fifo, 100)  # returns at once: never blocks on a FIFO
    ok = tmp_path / "ok.csv"
    ok.write_bytes(b"x" * 1000)
    assert sandbox.read_output(ok, 10) == b"x" * 10


def test_host_unix_sockets_are_read_from_proc_net_unix(tmp_path: Path):
    path = tmp_path / "d.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    fake = tmp_path / "unix"
    fake.write_text(
        "Num RefCount Protocol Flags Type St Inode Path\n"
        f"0000: 00000002 00000000 00010000 0001 01 1 {path}\n"
        "0000: 00000002 00000000 00010000 0001 01 2 @abstract\n"
        "0000: 00000002 00000000 00010000 0001 01 3 /gone/sock\n"
    )
    try:
        assert sandbox.host_unix_sockets(fake) == [path]
        assert stat.S_ISSOCK(path.stat().st_mode)
    finally:
        s.close()


def test_without_bwrap_the_rule_refuses_and_no_sandbox_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    monkeypatch.setenv(sandbox.HIDE_BUNDLED_ENV, "1")  # nor the bundled one
    support = sandbox.probe()
    assert not support.works and support.bwrap is None and support.cause == "missing"
    assert "no bwrap on PATH" in support.reason and "apt install bubblewrap" in support.hint
    for kind in ("command", "tune"):
        with pytest.raises(sandbox.SandboxUnavailable) as e:
            sandbox.start_rule(support, proposer_kind=kind, no_sandbox=False)
        msg = str(e.value)
        assert "\n" not in msg and "--no-sandbox" in msg and "apt install bubblewrap" in msg
        assert ("command" in msg) == (kind == "command")
    mode = sandbox.start_rule(support, proposer_kind="command", no_sandbox=True)
    assert not mode.confined and "--no-sandbox" in mode.summary and "UNSANDBOXED" in mode.summary


def test_a_bwrap_that_cannot_make_namespaces_is_reported_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.8.0'; exit 0; }\n"
        "echo 'bwrap: No permissions to creating new namespace, likely because the kernel does not "
        "allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv(sandbox.HIDE_BUNDLED_ENV, "1")  # the bundled one would work here
    support = sandbox.probe()
    assert support.bwrap == str(fake) and support.version == "bubblewrap 0.8.0"
    assert not support.works and "No permissions to creating new namespace" in support.reason
    assert "user namespaces" in support.hint
    with pytest.raises(sandbox.SandboxUnavailable, match="No permissions to creating new namespace"):
        sandbox.start_rule(support, proposer_kind="command", no_sandbox=False)


def test_a_working_bwrap_passes_the_rule():
    support = sandbox.SandboxSupport(True, "/usr/bin/bwrap", "bubblewrap 0.8.0", True, False)
    mode = sandbox.start_rule(support, proposer_kind="command", no_sandbox=False)
    assert mode.confined and "bubblewrap 0.8.0" in mode.summary
    assert not sandbox.start_rule(support, proposer_kind="command", no_sandbox=True).confined


def test_the_sandbox_keys_of_kopt_toml():
    from kopt_supervisor.engine.config.toml_io import dumps as dumps_config
    from kopt_supervisor.engine.config.toml_io import loads as loads_config

    base = '[target]\nbench = "x"\nmetric = "m"\n'
    c = loads_config(base)
    assert (c.target.network, c.target.writable, c.propose.network, c.propose.writable) == (False, [], True, [])
    c = loads_config(
        base + 'writable = ["~/.triton", "/data/out"]\nnetwork = true\n'
        '[propose]\nwritable = ["~/.claude"]\nnetwork = false\n'
    )
    assert c.target.writable == ["~/.triton", "/data/out"] and c.target.network and not c.propose.network
    assert loads_config(dumps_config(c)) == c
    for bad, key in (
        ('writable = ["rel/path"]', "[target].writable"),
        ('writable = ["~"]', "[target].writable"),
        ('writable = [""]', "[target].writable"),
        ('network = "yes"', "[target].network"),
    ):
        with pytest.raises(BadInput, match=key.replace("[", r"\[").replace("]", r"\]")):
            loads_config(base + bad + "\n")


def test_clear_scratch_removes_what_a_crash_left(run_layout: Run):
    r = run_layout
    c = r.proposer()
    cm = sandbox.prepare(c)
    ready = cm.__enter__()  # a run killed with kopt: prepare's cleanup never runs
    assert ready.scratch is not None and ready.scratch.exists()
    assert sandbox.clear_scratch(r.ws) == 1
    assert not ready.scratch.exists() and list((r.ws / sandbox.SCRATCH).iterdir()) == []
    assert sandbox.clear_scratch(r.tmp) == 0


def test_kopt_and_its_python_under_tmp_stay_readable_in_the_private_tmp(monkeypatch, tmp_path):
    # a clone and its virtualenv under /tmp (every sandbox gets an empty /tmp): the bench must
    # still import kopt's harness and run on that Python; nothing else of /tmp shows
    import sys as _sys

    from kopt_supervisor.engine import sandbox

    venv = tmp_path / "venv"
    venv.mkdir()
    monkeypatch.setattr(_sys, "prefix", str(venv))
    m = _mounts(wrap(["python", "bench.py"], Confinement(), cwd="/"))
    assert ("--ro-bind", os.path.realpath(venv)) in m
    assert m.index(("--ro-bind", os.path.realpath(venv))) > m.index(("--tmpfs", "/tmp"))
    assert not [d for o, d in m if o == "--ro-bind" and d == "/tmp"]
    kept = sandbox.confinement._software_to_keep()
    assert str(venv) in kept and all(any(r.startswith(p) for p in sandbox.PRIVATE_DIRS) for r in kept)


def test_the_folder_that_holds_kopts_code_is_what_stays_readable(monkeypatch):
    # kopt's code lies in whatever folder every sandbox empties (here: pretend its parent is
    # one): the folder kept is the one that holds engine/, not engine/ nor a folder above it
    import kopt_supervisor.engine as engine_pkg
    from kopt_supervisor.engine.sandbox import confinement

    holder = Path(engine_pkg.__file__).resolve().parents[1]
    monkeypatch.setattr(confinement, "PRIVATE_DIRS", (str(holder.parent),))
    assert str(holder) in confinement._software_to_keep()
    assert str(holder.parent) not in confinement._software_to_keep()


def test_an_editable_install_keeps_its_whole_project_readable(monkeypatch):
    # a clone under /tmp installed with `pip install -e .`: its src/, tools and tests stay readable
    # (the suite's fake agents run from its tests/), and nothing above the project
    from kopt_supervisor.engine.sandbox import confinement

    project = confinement.editable_project()
    if project is None:
        pytest.skip("kopt is not installed in editable mode here")
    assert (project / "src" / "kopt_supervisor" / "engine" / "sandbox" / "confinement.py").is_file()
    monkeypatch.setattr(confinement, "PRIVATE_DIRS", (str(project.parent),))
    kept = confinement._software_to_keep()
    assert str(project) in kept and str(project.parent) not in kept
    # a project that does not hold the running code is not kopt's
    monkeypatch.setattr(confinement, "editable_project", lambda: project.parent / "elsewhere")
    assert str(project.parent / "elsewhere") not in confinement._software_to_keep()
