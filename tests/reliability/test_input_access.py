"""Input and access: every config error names its key; tags and paths cannot escape the
workspace root; nothing from a plan, a hypothesis or a CSV value reaches a shell; the
workspace and run.db are private (0700/0600); kopt opens no network port."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import time
import types
import typing
from pathlib import Path

import psutil
import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.daemon import engine_alive, run_engine
from kopt_supervisor.engine.store import Store
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import REPO_ROOT, git, make_fake_repo
from tests.reliability.helpers import FAST, check_invariants, init, iterations

MIN = '[target]\nbench = "python b.py"\nmetric = "us"\n'


def _leaves(cls: type, where: str = "") -> list[tuple[str, str, typing.Any]]:
    """(section, key, type) for every key of the schema."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        typ = hints[f.name]
        if dataclasses.is_dataclass(typ):
            out += _leaves(typ, f"{where}.{f.name}" if where else f.name)
        else:
            out.append((where, f.name, typ))
    return out


KEYS = _leaves(Config)


def _base(typ: typing.Any) -> typing.Any:
    args = [a for a in typing.get_args(typ) if a is not type(None)]
    return _base(args[0]) if typing.get_origin(typ) in (typing.Union, types.UnionType) else typ


@pytest.mark.parametrize("section,key,typ", KEYS, ids=[f"{s}.{k}" for s, k, _ in KEYS])
def test_every_key_with_a_wrong_type_is_named(section, key, typ):
    bad = "1" if _base(typ) is str else '"x"'  # a number for a string, a string for anything else
    if section != "target":
        text = MIN + f"[{section}]\n{key} = {bad}\n"
    elif key in ("bench", "metric"):
        text = MIN.replace(f"{key} = ", f"{key} = {bad}\n# ")
    else:
        text = MIN + f"{key} = {bad}\n"
    with pytest.raises(BadInput) as info:
        loads_config(text, source="t/kopt.toml")
    msg = str(info.value)
    assert msg.startswith("t/kopt.toml: ") and "\n" not in msg
    assert f"[{section}].{key}" in msg, msg


@pytest.mark.parametrize(
    "text,key",
    [
        (MIN + 'csv = "/etc/*.csv"\n', "[target].csv"),
        (MIN + 'csv = "../other/*.csv"\n', "[target].csv"),
        (MIN + 'csv = "results/../../x.csv"\n', "[target].csv"),
        (MIN + '[propose.tune]\nparams = "/home/me/.bashrc"\n', "[propose.tune].params"),
        (MIN + '[propose.tune]\nparams = "../../x.json"\n', "[propose.tune].params"),
        (MIN + '[propose.tune]\nparams = "~/x.json"\n', "[propose.tune].params"),
    ],
)
def test_paths_in_the_config_cannot_leave_the_worktree(text, key):
    with pytest.raises(BadInput, match=re.escape(key)):
        loads_config(text)


@pytest.mark.parametrize("tag", ["..", "../x", "/etc", "~", "a/../b", "x\0y", "x\ny", "-rf", "a\\b"])
def test_tags_cannot_escape_the_root_in_any_command(fake_env, capsys, tag):
    repo, root = fake_env([])
    for argv in (["init", "--repo", str(repo), "--tag", tag], ["status", tag], ["stop", tag], ["attach", tag]):
        try:
            code = kopt(["--root", str(root), *argv])
        except SystemExit as e:  # argparse's own refusal ("-rf" reads as an option)
            code = e.code
        assert code == 2, argv
    assert not list(root.parent.glob("**/run.db"))


def test_nothing_from_a_plan_hypothesis_or_csv_reaches_a_shell(tmp_path, monkeypatch):
    evil = "$(touch PWNED_a) `touch PWNED_b`; touch PWNED_c && touch PWNED_d | touch PWNED_e"
    base = tmp_path / "ws $(touch PWNED_root); `touch PWNED_root2` 'q\""
    repo = make_fake_repo(
        base / "target",
        toml_replace={
            **FAST,
            'proposer.py"': 'proposer.py {plan} {worktree} {prompt}"',
            'bench = "': 'env = {LABEL = "$(touch PWNED_env)"}\nbench = "',
        },
    )
    k = json.loads((repo / "kernel.json").read_text())
    k["label"] = evil  # the bench prints it in a config column of every CSV row
    (repo / "kernel.json").write_text(json.dumps(k))
    bench = (repo / "bench.py").read_text()
    assert 'out.append(f"s{i},' in bench
    (repo / "bench.py").write_text(bench.replace('out.append(f"s{i},', "out.append(f\"{k.get('label', '')}s{i},"))
    git(repo, "commit", "-qam", "labels")
    script = [
        f"do:plan = {evil + chr(10) + 'scope: global' + chr(10)!r}; speed['small'] *= 0.95; "
        "speed['large'] *= 0.95; json.dump(k, open('kernel.json', 'w'))",
        f"do:plan = 'x' + chr(10) + 'target_class: ' + {evil!r} + chr(10); speed['small'] *= 0.9; "
        "json.dump(k, open('kernel.json', 'w'))",
    ]
    (base / "target.script.json").write_text(json.dumps(script))
    monkeypatch.setenv("FAKE_SCRIPT", str(base / "target.script.json"))
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    ws = init(repo, base / "workspaces")
    assert run_engine(ws, max_iters=2) == 0
    its = iterations(ws)
    assert [it.status for it in its] == ["baseline", "keep", "fail_propose"], [
        it.record.get("decision", {}).get("reason") for it in its
    ]
    assert its[1].hypothesis == evil and evil[:72] in git(repo, "log", "-1", "--format=%B", "kopt/t")
    assert "is not a class of this bench" in its[2].record["decision"]["reason"]
    assert any(evil in key for key in its[0].record["configs"])  # the CSV value, read as data
    assert not [p for p in tmp_path.rglob("PWNED*")], "a value reached a shell"
    assert not list(Path(REPO_ROOT).glob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))
    check_invariants(ws, repo)


def test_workspace_and_run_db_are_private_even_with_umask_0(fake_env):
    repo, root = fake_env(["gain5"], toml_replace=FAST)
    old = os.umask(0)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    try:
        ws = init(repo, root)
        assert run_engine(ws, max_iters=1) == 0
        with Store(ws.db_path) as s:  # a writer's WAL and shared-memory files, while they exist
            s.set("probe", 1)
            for suffix in ("-wal", "-shm"):
                assert mode(ws.dir / f"run.db{suffix}") == 0o600, suffix
    finally:
        os.umask(old)
    assert mode(root) == 0o700 and mode(ws.dir) == 0o700
    for name in ("run.db", "run.db-wal", "run.db-shm", "engine.lock", "kopt.toml", "README.md", "performance.md"):
        p = ws.dir / name
        if p.exists():
            assert mode(p) == 0o600, (name, oct(mode(p)))
    for p in ws.memory.iterdir():
        assert mode(p) == 0o600, p
    for d in (ws.memory, ws.plans, ws.profiles, ws.logs):
        assert mode(d) == 0o700, d


def test_kopt_opens_no_network_port(fake_env, monkeypatch):
    repo, root = fake_env(["gain5"] * 20, toml_replace=FAST)
    ws = init(repo, root)
    monkeypatch.setenv("FAKE_SLEEP", "0.2")
    eng = subprocess.Popen(
        [sys.executable, "-m", "kopt_supervisor.engine.daemon", "--root", str(root), "t"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        end = time.monotonic() + 30
        while not engine_alive(ws)[0] and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(1.5)  # well into the loop: heartbeat, proposer, benchmarks
        proc = psutil.Process(eng.pid)
        assert proc.net_connections(kind="inet") == []  # no TCP/UDP socket, listening or not
        assert not [c for c in proc.net_connections(kind="all") if c.status == psutil.CONN_LISTEN]
        assert kopt(["--root", str(root), "status", "t"]) == 0
    finally:
        assert kopt(["--root", str(root), "stop", "t"]) == 0
        eng.wait(timeout=30)
    # and no code path can open one: no listening or socket API in the engine or the TUI, but
    # for `kopt mcp --http` (engine/mcp/server.py, started only by that command): its one
    # listening socket is bound to 127.0.0.1, behind a bearer token (tests/mcp)
    pattern = re.compile(
        r"socket\.socket|socketserver|http\.server|\.listen\(|\.bind\(|start_server|"
        r"create_server|urlopen|import requests|import httpx"
    )
    mcp = REPO_ROOT / "src" / "kopt_supervisor" / "engine" / "mcp" / "server.py"
    hits = [
        f"{p}:{i}"
        for d in ("engine", "kopt_tui")
        for p in (REPO_ROOT / "src" / "kopt_supervisor" / d).rglob("*.py")
        if p != mcp
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []
    binds = [line.strip() for line in mcp.read_text().splitlines() if ".bind(" in line]
    assert binds == ['sock.bind(("127.0.0.1", port))'], binds
