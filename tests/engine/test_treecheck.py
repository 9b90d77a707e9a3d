"""The whole tree after every step: each hostile way of leaving something in a worktree, with
a real repository and kopt's worktrees, and the exact paths the report names."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine import gitops, treecheck
from kopt_supervisor.engine.treecheck import TreeReport, content_kind, inspect, module_names

BRANCH = "kopt/t"
BASE = {
    "bench.py": "import kernel\n",
    "kernel.py": "def kernel(x):\n    return x\n",
    "kernels/__init__.py": "",
    "kernels/attn.py": "A = 1\n",
    "README.md": "readme\n",
    ".gitignore": "*.log\n__pycache__/\nbuild/\n",
}
MODULES = frozenset({"json", "typing", "numpy", "torch", "requests", "yaml", "kernels", "os"})


def plain_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t", **extra)
    return env


def plain(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=plain_env(), capture_output=True, text=True, check=True).stdout


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    repo = tmp_path / "repo"
    for name, text in BASE.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    plain(repo, "init", "-q", "-b", "main")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-qm", "base")
    ws = tmp_path / "ws"
    ws.mkdir()
    base = gitops.head(repo)
    gitops.add_worktrees(repo, BRANCH, ws / "best", ws / "cand", base)
    return repo, ws / "best", ws / "cand", base


def write(root: Path, rel: str, text: str | bytes = "x\n", mode: int | None = None) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def test_an_untouched_tree_reports_nothing(trees: tuple[Path, Path, Path, str]) -> None:
    _, best, cand, base = trees
    for tree, strict in ((cand, False), (best, True)):
        report = inspect(tree, base, modules=MODULES, strict=strict)
        assert report.ok and not report.differs and report.reason() == ""
        assert report.new == () and report.modified == ()


def test_what_changed_tracked_untracked_and_ignored(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    write(cand, "kernel.py", "def kernel(x):\n    return x * 1\n")
    (cand / "README.md").unlink()
    write(cand, "notes.txt", "plain data\n")
    write(cand, "run.log", "ignored data\n")
    write(cand, "build/cache/out.bin", b"\x00\x01data")
    report = inspect(cand, base, modules=MODULES)
    assert report.modified == ("README.md", "kernel.py")
    assert report.untracked == ("notes.txt",)
    assert report.ignored == ("build/cache/out.bin", "run.log")
    assert report.executable == () and report.ok  # data, and edits of tracked files: the candidate's diff


def test_executable_content_of_every_kind(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    elf = b"\x7fELF\x02\x01\x01" + b"\x00" * 57
    write(cand, "__pycache__/kernel.cpython-311.pyc", b"\xa7\r\r\n" + b"\x00" * 12)  # beside a tracked source
    write(cand, "kernels/__pycache__/attn.cpython-311.pyc", b"\xa7\r\r\n" + b"\x00" * 12)
    write(cand, "helper.pyc", b"\xa7\r\r\n" + b"\x00" * 12)  # sourceless: imported directly
    write(cand, "zzz.pth", "import os; os.system('x')\n")
    write(cand, "libfast.so", elf)
    write(cand, "libfast.so.1", elf)
    write(cand, "fast.dylib", b"\xcf\xfa\xed\xfe")
    write(cand, "blob.bin", elf)  # a library by content, whatever its name
    write(cand, "run", "echo hi\n", mode=0o755)  # executable mode
    write(cand, "tool", "#!/bin/sh\necho hi\n")  # a shebang
    write(cand, "k.cu", "__global__ void k() {}\n")
    write(cand, "k.cpp", "int main() {}\n")
    write(cand, "sitecustomize.py", "print('before everything')\n")
    write(cand, "tests/conftest.py", "")
    write(cand, "dev.egg-link", "/elsewhere\n")
    write(cand, "Makefile", "all:\n")
    write(cand, "new_kernel.py", "K = 2\n")
    write(cand, "data.txt", "data\n")
    write(cand, "empty", "")
    report = inspect(cand, base, modules=MODULES)
    assert dict(report.executable) == {
        "__pycache__/kernel.cpython-311.pyc": "bytecode",
        "kernels/__pycache__/attn.cpython-311.pyc": "bytecode",
        "helper.pyc": "bytecode",
        "zzz.pth": ".pth file",
        "libfast.so": "native library",
        "libfast.so.1": "native library",
        "fast.dylib": "native library",
        "blob.bin": "native binary",
        "run": "executable file",
        "tool": "script",
        "k.cu": "C/C++/CUDA source",
        "k.cpp": "C/C++/CUDA source",
        "sitecustomize.py": "import hook",
        "tests/conftest.py": "import hook",
        "dev.egg-link": "egg or wheel",
        "Makefile": "build or test config",
        "new_kernel.py": "Python source",
    }
    assert [p for p, _ in report.executable] == sorted(p for p, _ in report.executable)
    assert set(report.ignored) == {"__pycache__/kernel.cpython-311.pyc", "kernels/__pycache__/attn.cpython-311.pyc"}
    assert not report.ok and report.reason().startswith("cand/: executable content (untracked or ignored): ")


@pytest.mark.parametrize("how", ["info-exclude", "candidate-gitignore", "global-excludes"])
def test_files_hidden_by_every_kind_of_ignore_rule_are_seen(
    trees: tuple[Path, Path, Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    repo, _, cand, base = trees
    if how == "info-exclude":
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "exclude").write_text("hidden*\n")
    elif how == "candidate-gitignore":
        write(cand, "kernels/.gitignore", "hidden*\n")
    else:
        home = tmp_path / "home"
        write(home, ".gitconfig", f"[core]\n\texcludesFile = {home / 'ignore'}\n")
        write(home, "ignore", "hidden*\n")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    write(cand, "kernels/hidden_json.py", "X = 1\n")
    write(cand, "kernels/hidden.pth", "import x\n")
    assert "hidden" not in plain(cand, "status", "--porcelain")  # live: git's usual view does not show them
    report = inspect(cand, base, modules=MODULES)
    assert set(report.ignored) == {"kernels/hidden_json.py", "kernels/hidden.pth"}
    assert dict(report.executable) == {"kernels/hidden.pth": ".pth file", "kernels/hidden_json.py": "Python source"}
    assert "kernels/hidden.pth (.pth file)" in report.reason()
    if how == "candidate-gitignore":
        assert report.untracked == ("kernels/.gitignore",)


def test_the_allow_list(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    write(cand, "kernels/flash.py", "F = 1\n")
    write(cand, "build/ext/fast.so", b"\x7fELF")
    write(cand, "kernels/json.py", "shadow = True\n")
    write(cand, "evil.pth", "import x\n")
    report = inspect(cand, base, allow=["kernels/*.py", "build/"], modules=MODULES)
    assert report.allowed == ("build/ext/fast.so", "kernels/flash.py", "kernels/json.py")
    assert report.executable == (("evil.pth", ".pth file"),)
    assert report.shadowing == (("json", "kernels/json.py"),)  # a shadow is refused even when allowed
    assert report.problems() == {
        "executable content (untracked or ignored)": ["evil.pth"],
        "modules shadowing importable ones": ["kernels/json.py"],
    }
    assert report.reason() == (
        "cand/: executable content (untracked or ignored): evil.pth (.pth file); "
        "modules shadowing importable ones: json (kernels/json.py)"
    )


def test_modules_that_shadow_by_name_anywhere(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    write(cand, "json.py", "")  # beside the bench
    write(cand, "kernels/typing.py", "")  # a folder that a bench script there puts on sys.path
    write(cand, "numpy/__init__.py", "")  # a new package
    write(cand, "torch/nn.py", "")  # a new namespace portion
    write(cand, "sub/requests.cpython-311-x86_64-linux-gnu.so", b"\x7fELF")  # an extension module
    write(cand, "yaml.pyc", b"\xa7\r\r\n")  # a sourceless module
    write(cand, "kernels/new_attn.py", "")  # inside a folder the base has: `kernels` is no new module
    write(cand, "__pycache__/os.cpython-311.pyc", b"\xa7\r\r\n")  # serves os.py only if one exists: not a name
    write(cand, "x.py/__init__.py", "")  # a folder named x.py: no importable name
    write(cand, "json.py.d/readme.txt", "")
    write(cand, "helper.py", "")
    report = inspect(cand, base, modules=MODULES)
    assert report.shadowing == (
        ("json", "json.py"),
        ("numpy", "numpy/"),
        ("requests", "sub/requests.cpython-311-x86_64-linux-gnu.so"),
        ("torch", "torch/"),
        ("typing", "kernels/typing.py"),
        ("yaml", "yaml.pyc"),
    )
    assert "json (json.py)" in report.reason()


@pytest.mark.parametrize("hide", ["candidate-gitignore", "info-exclude", "not hidden"])
def test_a_shadowing_module_is_named_however_it_is_hidden(trees: tuple[Path, Path, Path, str], hide: str) -> None:
    """json.py beside the bench with a tracked edit, hidden by a .gitignore the candidate adds,
    by .git/info/exclude, or not at all: the report names the shadow each way (the variations
    of tests/security/test_proposer_plants.py's end-to-end shadowing test, on the tree alone)."""
    repo, _, cand, base = trees
    if hide == "candidate-gitignore":
        write(cand, ".gitignore", BASE[".gitignore"] + "json.py\n")
    elif hide == "info-exclude":
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "exclude").write_text("json.py\n")
    write(cand, "json.py", "def load(f):\n    return {}\n")
    write(cand, "kernel.py", "def kernel(x):\n    return x  # tuned\n")
    if hide != "not hidden":
        assert "json.py" not in plain(cand, "status", "--porcelain")  # git's usual view does not show it
    report = inspect(cand, base, modules=MODULES)
    assert report.shadowing == (("json", "json.py"),)
    assert report.problems()["modules shadowing importable ones"] == ["json.py"]
    assert "json (json.py)" in report.reason()
    assert (
        (report.ignored, report.untracked) == ((), ("json.py",))
        if hide == "not hidden"
        else (report.ignored, report.untracked) == (("json.py",), ())
    )
    assert set(report.modified) == {"kernel.py"} | ({".gitignore"} if hide == "candidate-gitignore" else set())


def test_module_names_of_one_path() -> None:
    assert module_names("a/b/c.py", {"a", "a/b"}) == [("c", "a/b/c.py"), ("a", "a/"), ("b", "a/b/")]
    assert module_names("a/b/c.py", set()) == [("c", "a/b/c.py")]
    assert module_names("a/__init__.py", {"a"}) == [("a", "a/")]
    assert module_names("a/data.txt", {"a"}) == []
    assert module_names("a/__pycache__/m.cpython-311.pyc", {"a", "a/__pycache__"}) == [("a", "a/")]
    assert module_names("my-lib.py", set()) == []  # not an identifier: not importable


def test_links_are_reported_and_never_followed(trees: tuple[Path, Path, Path, str], tmp_path: Path) -> None:
    _, _, cand, base = trees
    outside = tmp_path / "outside"
    write(outside, "planted.pyc", b"\xa7\r\r\n")
    write(outside, "secret.txt", "secret\n")
    (cand / "vendor").symlink_to(outside)  # a folder link
    (cand / "leak.py").symlink_to(outside / "secret.txt")
    (cand / "kernel.py").unlink()
    (cand / "kernel.py").symlink_to(outside / "secret.txt")  # a tracked file turned into a link
    (cand / "dangling.so").symlink_to(tmp_path / "nowhere")
    report = inspect(cand, base, modules=MODULES)
    assert report.symlinks == ("dangling.so", "kernel.py", "leak.py", "vendor")
    assert report.new == ("dangling.so", "leak.py", "vendor")  # nothing behind the folder link
    assert report.modified == ("kernel.py",)
    assert report.executable == ()  # kinds are judged on real files only
    assert report.problems()["symbolic links"] == ["dangling.so", "kernel.py", "leak.py", "vendor"]


def test_fifos_and_other_special_files(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    os.mkfifo(cand / "pipe.py")  # git does not list it; opening it for reading would block
    os.mkfifo(cand / "data")
    (cand / "kernels" / "attn.py").unlink()
    os.mkfifo(cand / "kernels" / "attn.py")
    started = time.monotonic()
    report = inspect(cand, base, modules=MODULES)
    assert time.monotonic() - started < 10
    assert report.special == ("data", "kernels/attn.py", "pipe.py")
    assert "pipe.py" not in plain(cand, "ls-files", "--others")  # live: git's own listing misses it


def test_unreadable_folders(trees: tuple[Path, Path, Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, cand, base = trees
    write(cand, "locked/inner.py", "")
    real = os.scandir

    def refusing(path: str | os.PathLike[str]) -> os._ScandirIterator[str]:  # noqa: SLF001 - the real type
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(treecheck.os, "scandir", refusing)
    report = inspect(cand, base, modules=MODULES)
    assert report.unreadable == ("locked/",)
    assert report.problems()["unreadable paths"] == ["locked/"]


def test_hard_links_to_files_elsewhere(trees: tuple[Path, Path, Path, str], tmp_path: Path) -> None:
    _, best, cand, base = trees
    os.link(best / "bench.py", cand / "bench_copy.py")  # a write through it would change best/
    (cand / "kernel.py").unlink()
    os.link(best / "kernel.py", cand / "kernel.py")  # same content: git sees no change at all
    write(cand, "plain.txt", "x\n")
    report = inspect(cand, base, modules=MODULES)
    assert report.hardlinks == ("bench_copy.py", "kernel.py")
    assert report.modified == () and report.problems()["hard links"] == ["bench_copy.py", "kernel.py"]


def test_nested_repositories_and_git_control_files(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    write(cand, "vendor/lib.py", "")
    plain(cand / "vendor", "init", "-q")
    write(cand, "other/.git", "gitdir: /elsewhere\n")
    write(cand, "other/x.txt", "")
    write(cand, "kernels/.gitattributes", "*.py filter=x\n")
    write(cand, ".gitmodules", '[submodule "v"]\n\tpath = vendor\n')
    report = inspect(cand, base, modules=MODULES)
    assert report.nested_repos == ("other/", "vendor/")
    assert report.git_control == (".gitmodules", "kernels/.gitattributes")
    assert set(report.new) == {".gitmodules", "kernels/.gitattributes", "vendor/lib.py", "other/x.txt"}


def test_index_flags_that_hide_an_edit(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    plain(cand, "update-index", "--skip-worktree", "bench.py")
    write(cand, "bench.py", "import kernel  # timer patched\n")
    assert plain(cand, "status", "--porcelain") == ""  # live: git status is blind to it
    report = inspect(cand, base, modules=MODULES)
    assert report.index_hidden == ("bench.py",) and report.modified == ("bench.py",)
    assert report.problems() == {"index entries hidden from git": ["bench.py"]}


def test_odd_names_are_named_exactly(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    names = ["with space.py", "new\nline.pyc", "ünïcödé.pth", " lead.so", "trail.py "]
    for n in names:
        write(cand, n, b"\x00\x00")
    raw = os.fsdecode(b"bad\xffbyte.py")
    write(cand, raw, b"")
    report = inspect(cand, base, modules=MODULES)
    assert set(report.untracked) == {*names, raw}
    assert {p for p, _ in report.executable} == {*names, raw} - {"trail.py "}  # "trail.py " is no .py
    reason = report.reason(limit=10)
    assert "\n" not in reason
    for shown in ("with space.py", repr("new\nline.pyc"), "ünïcödé.pth", repr(" lead.so"), repr(raw)):
        assert shown in reason


def test_strict_best_differs_in_any_way_except_the_allowed(trees: tuple[Path, Path, Path, str]) -> None:
    _, best, _, base = trees
    write(best, "out.csv", "config,us\n")
    write(best, "__pycache__/kernel.cpython-311.pyc", b"\xa7\r\r\n")
    write(best, "notes.txt", "data\n")
    write(best, "kernel.py", "def kernel(x):\n    return x  # slowed\n")
    report = inspect(best, base, allow=["out.csv"], modules=MODULES, strict=True, label="best/")
    assert report.problems() == {
        "modified tracked files": ["kernel.py"],
        "new files": ["__pycache__/kernel.cpython-311.pyc", "notes.txt"],
        "executable content (untracked or ignored)": ["__pycache__/kernel.cpython-311.pyc"],
    }
    assert report.reason() == (
        f"best/ differs from {base[:12]}: modified tracked files: kernel.py; new files: "
        "__pycache__/kernel.cpython-311.pyc, notes.txt; executable content (untracked or ignored): "
        "__pycache__/kernel.cpython-311.pyc (bytecode)"
    )
    gitops.reset_clean(best, base)
    again = inspect(best, base, allow=["out.csv"], modules=MODULES, strict=True)
    assert again.ok and not again.differs


def test_repeated_looks_see_each_new_change(trees: tuple[Path, Path, Path, str]) -> None:
    _, _, cand, base = trees
    assert inspect(cand, base, modules=MODULES).ok
    path = cand / "kernel.py"
    st = os.stat(path)
    path.write_text(path.read_text().replace("x\n", "y\n"))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: the ctime still tells
    assert inspect(cand, base, modules=MODULES).modified == ("kernel.py",)
    tree = gitops.stage_all_tree(cand)  # the evaluated tree as the base of the next look
    assert inspect(cand, tree, modules=MODULES).modified == ()
    write(cand, "kernel.py", "changed by the bench\n")
    assert inspect(cand, tree, modules=MODULES).modified == ("kernel.py",)


def test_many_files_take_a_fixed_number_of_git_calls(
    trees: tuple[Path, Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, cand, base = trees
    calls: list[list[str]] = []
    real = gitops.invoke._exec

    def counting(argv: list[str], *a: object, **kw: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv)
        return real(argv, *a, **kw)  # type: ignore[arg-type]  # passes the real call's arguments through

    monkeypatch.setattr(gitops.invoke, "_exec", counting)
    write(cand, "a.py", "")
    inspect(cand, base, modules=MODULES)
    calls.clear()
    inspect(cand, base, modules=MODULES)
    few = len(calls)
    for i in range(3000):
        write(cand, f"build/d{i % 30}/f{i}.pyc", b"\xa7\r\r\n")
        write(cand, f"gen/m{i}.dat", "x")
    calls.clear()
    started = time.monotonic()
    report = inspect(cand, base, modules=MODULES)
    elapsed = time.monotonic() - started
    assert len(calls) == few <= 5
    assert len(report.ignored) == 3000 and len(report.untracked) == 3001 and len(report.executable) == 3001
    assert elapsed < 10


def test_a_tree_as_measured_takes_one_git_call_and_a_touched_file_is_no_change(
    trees: tuple[Path, Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check after every run of tree code: a tree left as measured costs `diff-files`
    only (the index flags are read from the worktree's index file, gitops.guards.read_index); the
    refresh (which rehashes what only moved in its stat data) and the ignored files' listing
    run where something is named."""
    _, _, cand, base = trees
    calls: list[str] = []
    real = gitops.invoke._exec

    def counting(argv: list[str], *a: object, **kw: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv[5] + (" -v" if argv[6:7] == ["-v"] else ""))  # after git's own options
        return real(argv, *a, **kw)  # type: ignore[arg-type]  # passes the real call's arguments through

    monkeypatch.setattr(gitops.invoke, "_exec", counting)
    assert inspect(cand, base, modules=MODULES).ok
    calls.clear()
    assert not inspect(cand, base, modules=MODULES).differs
    assert calls == ["diff-files"]
    path = cand / "kernel.py"
    later = path.stat().st_mtime_ns + 5 * 10**9
    os.utime(path, ns=(later, later))  # stat moved, content the same: no change
    calls.clear()
    assert not inspect(cand, base, modules=MODULES).differs
    assert calls == ["diff-files", "update-index", "diff-files"]
    calls.clear()
    assert not inspect(cand, base, modules=MODULES).differs and calls == ["diff-files"]
    write(cand, "kernel.py", "def kernel(x):\n    return y\n")  # same size, new content
    write(cand, "run.log", "ignored\n")
    report = inspect(cand, base, modules=MODULES)
    assert report.modified == ("kernel.py",) and report.ignored == ("run.log",)


def test_content_kind_table() -> None:
    assert content_kind("a/B.CU", 0o644) == "C/C++/CUDA source"
    assert content_kind("x", 0o644, b"#!/u") == "script"
    assert content_kind("x", 0o644, b"\x7fEL") is None
    assert content_kind("x.txt", 0o644, b"\x7fELF") == "native binary"
    assert content_kind("README", 0o644, b"hell") is None


def test_importable_names_of_an_interpreter(tmp_path: Path) -> None:
    fake = tmp_path / "python3"
    count = tmp_path / "count"
    fake.write_text(f'#!/bin/sh\necho x >> "{count}"\necho \'["some_installed_pkg", "json", "not-an-id"]\'\n')
    fake.chmod(0o755)
    names = treecheck.importable_names(str(fake))
    assert "some_installed_pkg" in names and "json" in names and "asyncio" in names  # kopt's stdlib too
    assert treecheck.importable_names(str(fake)) is names and count.read_text() == "x\n"  # asked once
    real = treecheck.importable_names(sys.executable)
    assert {"json", "pytest", "numpy", "textual"} <= real  # stdlib and installed distributions
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho nope\n")
    broken.chmod(0o755)
    with pytest.raises(treecheck.KoptFailure, match="no JSON list"):
        treecheck.importable_names(str(broken))


def test_python_of_a_bench_command(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path)}
    (tmp_path / "python3").write_text("")
    (tmp_path / "python3").chmod(0o755)
    assert treecheck.python_of(["python3", "bench.py"], env) == str(tmp_path / "python3")
    assert treecheck.python_of(["env", "A=1", "python3", "bench.py"], env) == str(tmp_path / "python3")
    assert treecheck.python_of(["/opt/py/bin/python3.11", "b.py"], env) == "/opt/py/bin/python3.11"
    assert treecheck.python_of(["bash", "run.sh"], env) is None
    assert treecheck.python_of(["torchrun", "b.py"], env) is None


def test_report_is_data() -> None:
    r = TreeReport(tree="cand/", base="0" * 40, untracked=("a.py",), executable=(("a.py", "Python source"),))
    assert r.problems() == {"executable content (untracked or ignored)": ["a.py"]}
    assert r.reason() == "cand/: executable content (untracked or ignored): a.py (Python source)"
    assert r.differs and not r.ok


def test_the_police_lists_importable_modules_ahead_while_the_baseline_runs(tmp_path: Path) -> None:
    """The listing (a subprocess of about 2 s on the H100's host) starts in a thread before
    the baseline, so the first candidate's check does not pay it; its answer, or its failure
    (the standard library only, said as an event), is the same as listed on demand."""
    from types import SimpleNamespace

    from kopt_supervisor.engine.loop.proposal import Police

    ws = tmp_path / "ws"

    def police_for(script: str, where: Path = tmp_path, bench: str = "{fake} bench.py") -> tuple[Police, list[str]]:
        fake = where / script.split()[0] / "python3"
        fake.parent.mkdir(parents=True)
        fake.write_text(f"#!/bin/sh\n{script.split(' ', 1)[1]}\n")
        fake.chmod(0o755)
        events: list[str] = []
        ctx = SimpleNamespace(
            procs=SimpleNamespace(env=lambda: {"PATH": f"{fake.parent}:/usr/bin:/bin"}),
            ws=SimpleNamespace(dir=ws),
            cfg=SimpleNamespace(target=SimpleNamespace(bench=bench.format(fake=fake))),
            event=lambda kind, text, **kw: events.append(text),
        )
        return Police(ctx, b""), events  # type: ignore[arg-type]

    slow, events = police_for("slow sleep 1; echo '[\"ahead_listed_pkg\"]'")
    t0 = time.monotonic()
    slow.list_modules_ahead()
    slow.list_modules_ahead()  # once
    assert time.monotonic() - t0 < 0.5  # it did not wait for the interpreter
    names = slow.modules()
    assert time.monotonic() - t0 >= 1.0  # modules() waited for the listing to end
    assert "ahead_listed_pkg" in names and "json" in names and slow.modules() is names and not events
    broken, events = police_for("broken echo nope")
    broken.list_modules_ahead()
    assert broken.modules() == treecheck.STDLIB and len(events) == 1 and "no JSON list" in events[0]
    # the listing runs unconfined: an interpreter inside the run's trees, or one named by a
    # path relative to the tree, is candidate content and never run (kopt's own is listed)
    canary = tmp_path / "ran"
    for where, bench in ((ws / "best", "{fake} bench.py"), (tmp_path / "rel", "./planted/python3 bench.py")):
        planted, events = police_for(f"planted touch {canary}; echo '[\"planted_pkg\"]'", where, bench)
        planted.list_modules_ahead()
        names = planted.modules()
        assert "planted_pkg" not in names and "pytest" in names and not canary.exists() and not events
