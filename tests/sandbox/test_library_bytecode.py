"""The shared library bytecode (engine/sandbox/bytecode.py): a new tree reads the library
modules kopt compiled, and no candidate run can put its own bytes there. The hostile cases
run the way the loop runs a bench (runner.command.run in the tree, sandbox.for_bench with the
tree's cache) under real bubblewrap; the rules on units, names and freshness without."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine import sandbox
from kopt_supervisor.engine.sandbox import bytecode

from .conftest import NEEDS_BWRAP, Run, git

JSON_INIT = Path(json.__file__)
DECODER = JSON_INIT.parent / "decoder.py"
STDLIB = bytecode.layout().unit_of(JSON_INIT)
LOADS = "import json; print('LOADS', json.loads('[1, 2]'))"


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared cache of this test's own (the session's is shared by every test)."""
    monkeypatch.setenv(bytecode.ENV, str(tmp_path / "shared"))
    folder = bytecode.shared_dir()
    assert folder is not None
    return folder


def compiled_by_kopt() -> None:
    """Wait for the units kopt is compiling in the background: up to 240 s (under the whole
    suite on a loaded 2-core machine 120 s was not always enough, run FR), then say so."""
    deadline = time.monotonic() + 240
    for t in threading.enumerate():
        if t.name == "kopt-bytecode":
            t.join(timeout=max(0.0, deadline - time.monotonic()))
            assert not t.is_alive(), "kopt's background compile of the library bytecode took over 240 s"


def prefix_of(r: Run, tree: Path) -> Path:
    return r.cache(tree) / "pycache"


def new_tree(r: Run, text: str) -> None:
    (r.cand / "kernel.py").write_text(text)
    git(r.cand, "add", "-A")


def poisoned_pyc(source: Path, body: str) -> bytes:
    """Bytecode Python would accept for `source` as it is on disk (its mtime and size in the
    header) whose code is `body`."""
    st = source.stat()
    header = b"".join(
        [
            bytes(importlib.util.MAGIC_NUMBER),
            (0).to_bytes(4, "little"),
            (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little"),
            (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"),
        ]
    )
    return header + marshal.dumps(compile(body, str(source), "exec"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@NEEDS_BWRAP
def test_a_new_tree_reads_the_library_bytecode_kopt_compiled_after_the_first(run_layout: Run, shared: Path):
    r = run_layout
    first = r.run(r.py(LOADS), r.bench(), name="b0")
    assert first.ok, first.why() + first.tail()
    compiled_by_kopt()
    assert STDLIB is not None and bytecode.complete(shared, STDLIB)
    entry = shared / bytecode.pyc_of(JSON_INIT)
    assert entry.is_file() and bytecode._fresh(entry, JSON_INIT)
    new_tree(r, "def kernel(x):\n    return x + 1\n")
    second = r.run(f"{sys.executable} -v -c {LOADS!r}", r.bench(), name="b1")
    assert second.ok, second.why()
    place = prefix_of(r, r.cand) / bytecode.pyc_of(JSON_INIT)
    assert f"code object from '{place}'" in second.stderr_path.read_text()  # read, not compiled
    assert "LOADS [1, 2]" in second.stdout_path.read_text()
    assert not place.is_file() or place.stat().st_size == 0  # on the host: a mount point at most


@NEEDS_BWRAP
def test_a_candidate_can_write_none_of_the_shared_bytecode(run_layout: Run, shared: Path):
    r = run_layout
    assert r.run(r.py(LOADS), r.bench(), name="b0").ok
    compiled_by_kopt()
    entry = shared / bytecode.pyc_of(JSON_INIT)
    before = digest(entry)
    new_tree(r, "def kernel(x):\n    return x * 3\n")
    place = prefix_of(r, r.cand) / bytecode.pyc_of(JSON_INIT)
    attack = r.py(f"""
import os
place = {str(place)!r}
for what, act in [
    ("write in place", lambda: open(place, "r+b").write(b"X")),
    ("chmod", lambda: os.chmod(place, 0o777)),
    ("unlink", lambda: os.unlink(place)),
    ("replace", lambda: os.replace(place, place + ".x")),
    ("a new file beside", lambda: open(os.path.join(os.path.dirname(place), "new.pyc"), "w").write("x")),
    ("the shared cache itself", lambda: open({str(entry)!r}, "r+b").write(b"X")),
]:
    try:
        act()
        print("WROTE", what)
    except OSError as e:
        print("REFUSED", what, e.strerror)
""")
    res = r.run(attack, r.bench(), name="b1")
    assert res.ok, res.why() + res.tail()
    out = res.stdout_path.read_text()
    assert "WROTE" not in out and out.count("REFUSED") == 6, out
    assert digest(entry) == before


@NEEDS_BWRAP
def test_poisoned_library_bytecode_in_a_candidates_own_cache_never_reaches_best(run_layout: Run, shared: Path):
    """The run's bytes never enter the shared cache: kopt compiles the sources again. The
    candidate's run is the first (nothing shared yet); it leaves poisoned bytecode for json
    as regular files, a link named like a library module's, a library name whose source is
    no library file, and its own module's."""
    r = run_layout
    poison = poisoned_pyc(JSON_INIT, "def loads(s, **kw):\n    return 'POISON'\n")
    poison_decoder = poisoned_pyc(DECODER, "raise SystemExit('POISON decoder')\n")
    evil = r.cand / "evil.pyc"
    planted = bytecode.pyc_of(Path("/etc/kopt-planted.py"))
    attack = r.py(f"""
import json, os, sys
prefix = sys.pycache_prefix
def put(rel, data):
    path = os.path.join(prefix, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    with open(path, "wb") as f:
        f.write(data)
put({bytecode.pyc_of(JSON_INIT)!r}, {poison!r})
put({bytecode.pyc_of(DECODER)!r}, {poison_decoder!r})
open({str(evil)!r}, "wb").write({poison!r})
link = os.path.join(prefix, {bytecode.pyc_of(JSON_INIT.parent / "scanner.py")!r})
if os.path.lexists(link):
    os.unlink(link)
os.symlink({str(evil)!r}, link)
put({planted!r}, {poison!r})
put({bytecode.pyc_of(r.cand / "kernel.py")!r}, {poison!r})
print("PLANTED")
""")
    res = r.run(attack, r.bench(), name="b0")
    assert res.ok and "PLANTED" in res.stdout_path.read_text(), res.why() + res.tail()
    compiled_by_kopt()
    for source, bad in ((JSON_INIT, poison), (DECODER, poison_decoder)):
        entry = shared / bytecode.pyc_of(source)
        assert bytecode._fresh(entry, source) and entry.read_bytes() != bad
    assert not (shared / "etc").exists() and not (shared / bytecode.pyc_of(r.cand / "kernel.py")).exists()
    units = bytecode.complete_units(shared)  # the standard library, and what site imports at start
    assert STDLIB in units and all(u.is_relative_to(STDLIB) or u.parent in bytecode.layout().per_entry for u in units)
    # best, a tree of its own, and a later candidate get the real module
    best = r.run(r.py(LOADS), r.bench(r.best), cwd=r.best, name="b1")
    assert "LOADS [1, 2]" in best.stdout_path.read_text(), best.why() + best.tail()
    new_tree(r, "def kernel(x):\n    return x - 1\n")
    again = r.run(attack, r.bench(), name="b2")  # now its writes over json fail: read-only
    assert not again.ok or "PLANTED" not in again.stdout_path.read_text()
    new_tree(r, "def kernel(x):\n    return x - 2\n")
    later = r.run(r.py(LOADS), r.bench(), name="b3")
    assert "LOADS [1, 2]" in later.stdout_path.read_text(), later.tail()


# ---------------------------------------------------------------------------------------
# The rules, without a sandbox
def fake_layout(tmp: Path) -> bytecode.Layout:
    """A standard library with a site-packages folder inside it (a Python without a venv)."""
    std = tmp / "lib" / "python3"
    sites = std / "site-packages"
    for path, text in [
        (std / "json" / "__init__.py", "X = 1\n"),
        (std / "csv.py", "Y = 2\n"),
        (std / "test" / "test_big.py", "Z = 3\n"),
        (sites / "torch" / "__init__.py", "T = 4\n"),
        (sites / "torch" / "nn" / "functional.py", "F = 5\n"),
        (sites / "six.py", "S = 6\n"),
        (sites / "broken.py", "def (:\n"),
    ]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return bytecode.Layout(whole=(std,), per_entry=(sites,))


def test_a_source_belongs_to_the_unit_of_its_deepest_root(tmp_path: Path):
    lay = fake_layout(tmp_path)
    std, sites = lay.whole[0], lay.per_entry[0]
    assert lay.unit_of(std / "json" / "__init__.py") == std
    assert lay.unit_of(sites / "torch" / "nn" / "functional.py") == sites / "torch"
    assert lay.unit_of(sites / "six.py") == sites / "six.py"
    assert lay.unit_of(tmp_path / "tree" / "kernel.py") is None
    assert lay.nested_in(std) == (sites,)


def test_names_that_climb_out_or_are_not_this_interpreters_are_no_source():
    tag = bytecode.TAG
    assert bytecode._source_of("usr/lib/python3/json/__init__" + tag) == Path("/usr/lib/python3/json/__init__.py")
    for bad in ("../etc/x" + tag, "usr/../../etc/x" + tag, "usr/./x" + tag, "/etc/x" + tag, "usr/x.cpython-0.pyc"):
        assert bytecode._source_of(bad) is None, bad


def test_a_unit_is_compiled_whole_from_its_sources_and_bound_until_its_source_changes(tmp_path: Path):
    lay = fake_layout(tmp_path)
    std, sites = lay.whole[0], lay.per_entry[0]
    shared, prefix = tmp_path / "shared", tmp_path / "tree" / "pycache"
    run_wrote = prefix / bytecode.pyc_of(std / "csv.py")  # a run compiled csv into its prefix
    run_wrote.parent.mkdir(parents=True)
    run_wrote.write_bytes(b"the run's own bytes")
    (prefix / bytecode.pyc_of(sites / "torch" / "nn" / "functional.py")).parent.mkdir(parents=True)
    (prefix / bytecode.pyc_of(sites / "torch" / "nn" / "functional.py")).write_bytes(b"x")
    (prefix / bytecode.pyc_of(sites / "six.py")).symlink_to(run_wrote)  # a link: no name taken
    outside = tmp_path / "tree" / "k.py"  # a library name that leads out of the library
    outside.write_text("K = 0\n")
    (sites / "linked.py").symlink_to(outside)
    (prefix / bytecode.pyc_of(sites / "linked.py")).write_bytes(b"x")
    assert bytecode.harvest(prefix, shared, lay=lay, wait=True) == [std, sites / "torch"]
    for source in (std / "json" / "__init__.py", std / "csv.py", sites / "torch" / "nn" / "functional.py"):
        assert bytecode._fresh(shared / bytecode.pyc_of(source), source), source
    assert not (shared / bytecode.pyc_of(std / "test" / "test_big.py")).exists()  # test suites left out
    assert not (shared / bytecode.pyc_of(sites / "torch" / "__init__.py")).parent.joinpath("x").exists()
    assert not (shared / bytecode.pyc_of(sites / "six.py")).exists()
    assert (shared / bytecode.unit_place(sites)).is_dir()  # the nested root's mount point
    mounts = bytecode.binds(prefix, shared, lay)
    assert (shared / bytecode.unit_place(std), prefix / bytecode.unit_place(std), False) in mounts
    assert (prefix / bytecode.unit_place(sites), prefix / bytecode.unit_place(sites), True) in mounts
    torch = sites / "torch"
    assert (shared / bytecode.unit_place(torch), prefix / bytecode.unit_place(torch), False) in mounts
    assert bytecode.harvest(prefix, shared, lay=lay, wait=True) == []  # complete: nothing asked again
    (torch / "new.py").write_text("N = 7\n")  # torch upgraded: its folder changes
    os.utime(torch, ns=(1, 1))
    assert not bytecode.complete(shared, torch)
    assert all(dest != prefix / bytecode.unit_place(torch) for _, dest, _ in bytecode.binds(prefix, shared, lay))
    assert bytecode.harvest(prefix, shared, lay=lay, wait=True) == [torch]
    assert bytecode._fresh(shared / bytecode.pyc_of(torch / "new.py"), torch / "new.py")
    assert bytecode.complete(shared, torch)


def test_a_workspace_binds_only_the_units_frozen_after_its_baseline(tmp_path: Path):
    """Which units are bound is state every later run sees: one that grew with any run's imports
    was a switch a candidate could flip for a kept tree (test_review_s31_hostile). A workspace's
    units are fixed once its baseline ran: what the baseline compiled (asked for in the
    background) and what was complete then; a unit a later run makes complete is never bound there."""
    lay = fake_layout(tmp_path)
    std, torch = lay.whole[0], lay.per_entry[0] / "torch"
    shared, ws = tmp_path / "shared", tmp_path / "ws"
    base, cand = ws / "cache" / "best-1" / "pycache", ws / "cache" / "cand-2" / "pycache"
    for prefix, source in ((base, std / "csv.py"), (cand, torch / "nn" / "functional.py")):
        (prefix / bytecode.pyc_of(source)).parent.mkdir(parents=True)
        (prefix / bytecode.pyc_of(source)).write_bytes(b"x")
    ws.mkdir(exist_ok=True)
    assert bytecode.frozen(ws) is None
    frozen = bytecode.freeze(ws, shared, [base], lay)  # the baseline's runs: std (compiling in the background)
    assert frozen == {std} == bytecode.frozen(ws)
    bytecode.harvest(base, shared, lay=lay, wait=True)
    bytecode.harvest(cand, shared, lay=lay, wait=True)  # a candidate's import makes torch complete
    assert bytecode.complete(shared, torch) and bytecode.complete(shared, std)
    bound = {dest for _, dest, _ in bytecode.binds(base, shared, lay, frozen)}
    assert place_in(base, std) in bound and place_in(base, torch) not in bound
    assert place_in(base, torch) in {d for _, d, _ in bytecode.binds(base, shared, lay)}  # unfrozen: bound
    assert bytecode.freeze(ws, shared, [base, cand], lay) == {std}  # written once
    (ws / bytecode.FROZEN).write_text("not json")
    assert bytecode.frozen(ws) is None


def place_in(prefix: Path, unit: Path) -> Path:
    return prefix / bytecode.unit_place(unit)


def test_a_module_that_does_not_compile_is_never_a_complete_unit(tmp_path: Path):
    lay = fake_layout(tmp_path)
    broken = lay.per_entry[0] / "broken.py"
    shared = tmp_path / "shared"
    bytecode.compile_unit(shared, broken, lay)
    assert not bytecode.complete(shared, broken) and bytecode.complete_units(shared) == []


def test_only_a_unit_of_the_layout_is_compiled_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    lay = fake_layout(tmp_path)
    monkeypatch.setattr(bytecode, "layout", lambda: lay)
    shared = tmp_path / "shared"
    elsewhere = tmp_path / "tree"
    (elsewhere / "kernel.py").parent.mkdir()
    (elsewhere / "kernel.py").write_text("K = 1\n")
    assert bytecode.main([str(shared), str(elsewhere), str(lay.per_entry[0] / "six.py")]) == 0
    assert bytecode.complete_units(shared) == [lay.per_entry[0] / "six.py"]


def test_the_shared_cache_is_off_on_request_and_follows_xdg_otherwise(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv(bytecode.ENV, "off")
    assert bytecode.shared_dir() is None
    assert sandbox.for_bench(workspace=tmp_path / "ws", cache=tmp_path / "ws" / "c").library_bytecode is None
    monkeypatch.delenv(bytecode.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert bytecode.shared_dir() == (tmp_path / "xdg" / "kopt" / "bytecode" / sys.implementation.cache_tag).resolve()


def test_a_compile_into_one_shared_folder_never_stands_in_for_another(tmp_path: Path, monkeypatch) -> None:
    """Units in progress are (shared folder, unit) pairs: by unit alone, a compile into one
    folder made a request for another return at once with nothing compiled there (the next
    test on the same worker found its folder empty: runs FR and FS)."""
    asked: list[str] = []
    monkeypatch.setattr(bytecode.subprocess, "run", lambda cmd, **kw: asked.append(cmd[5]))
    a, b = tmp_path / "a", tmp_path / "b"
    assert STDLIB is not None
    monkeypatch.setattr(bytecode, "_busy", {(a, STDLIB)})  # a's compile of the stdlib in progress
    bytecode._compile_all(b, [STDLIB])
    bytecode._compile_all(a, [STDLIB])
    assert asked == [str(b)]  # b's compiled; a's left to the compile already running
    assert bytecode._busy == {(a, STDLIB)}  # b's pair released when done
