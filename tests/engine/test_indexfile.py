"""An index file read without git (gitops.guards.read_index) gives exactly what `git ls-files` prints,
and anything but the plain file git writes is left to git: each index version, every flag,
stage and mode kopt reads; then the files git may read otherwise (a split index, an
end-of-entries table, an extension it does not know, a bad checksum, a FIFO in the file's
place) and damaged bytes, compared with git each time."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
from pathlib import Path

import pytest

from kopt_supervisor.engine import gitops
from kopt_supervisor.engine.gitops.guards import Entry, read_index

LONG = "/".join(["d" * 200] * 21) + "/long.txt"  # 4,229 bytes: a name past the 12-bit length field


def plain(cwd: Path, *args: str, stdin: bytes = b"", check: bool = True) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, check=check)


def git_view(repo: Path) -> list[tuple[str, int, int, bool]] | None:
    """(path, mode, stage, flagged) of every entry as `git ls-files -s -v` lists it (`S`, or a
    tag in lower case: flagged); None when git refuses the index."""
    res = plain(repo, "ls-files", "-s", "-v", "-z", check=False)
    if res.returncode:
        return None
    out = []
    for line in (e for e in res.stdout.split(b"\0") if e):
        meta, _, path = line.partition(b"\t")
        tag, mode, _, stage = meta.split(b" ")
        flagged = tag == b"S" or tag.islower()
        out.append((path.decode("utf-8", "surrogateescape"), int(mode, 8), int(stage), flagged))
    return out


def ours(entries: list[Entry]) -> list[tuple[str, int, int, bool]]:
    return [(e.path, e.mode, e.stage, e.flagged) for e in entries]


def make_repo(repo: Path, *, extended: bool) -> Path:
    """Every kind of entry: files, an executable, a link, a gitlink, a name past 4,095 bytes,
    odd bytes, assume-unchanged, an unmerged path; `extended`: skip-worktree and intent-to-add
    too (flags of version 3 on: git writes no version 2 index holding them)."""
    repo.mkdir()
    plain(repo, "init", "-q", "-b", "main")
    for name, text in {
        "a.txt": "a\n",
        "b/c.py": "c\n",
        "b/d.py": "d\n",
        "run.sh": "#!/bin/sh\n",
        "ünï cödé\n.txt": "u\n",
    }.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    (repo / "run.sh").chmod(0o755)
    os.symlink("a.txt", repo / "link")
    plain(repo, "add", "-A")
    blob = plain(repo, "hash-object", "-w", "a.txt").stdout.strip().decode()
    plain(repo, "update-index", "--add", "--cacheinfo", f"160000,{blob},vendor")
    plain(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{LONG}")  # longer than a path may be
    plain(repo, "commit", "-qm", "base")
    plain(repo, "update-index", "--assume-unchanged", "a.txt")
    info = "".join(f"100644 {blob} {stage}\tm.txt\0" for stage in (1, 2, 3))
    plain(repo, "update-index", "-z", "--index-info", stdin=info.encode())
    if extended:
        (repo / "new.py").write_text("n\n")
        plain(repo, "add", "-N", "new.py")
        plain(repo, "update-index", "--skip-worktree", "b/c.py")
    return repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("index") / "repo", extended=True)


@pytest.fixture(scope="module")
def repo2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("index2") / "repo", extended=False)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_every_entry_and_flag_as_git_lists_them(repo: Path, repo2: Path, version: int) -> None:
    for where, flagged in ((repo2, ["a.txt"]), (repo, ["a.txt", "b/c.py"])):  # unmerged m.txt is no `S`
        plain(where, "update-index", "--index-version", str(version))
        index = where / ".git" / "index"
        written = {2: 2, 3: 2, 4: 4} if where == repo2 else {2: 3, 3: 3, 4: 4}  # what each needs
        assert int.from_bytes(index.read_bytes()[4:8], "big") == written[version]
        entries = read_index(index, 20)
        assert entries is not None
        assert ours(entries) == git_view(where)
        assert [e.path for e in entries if e.flagged] == flagged
        assert {e.path for e in entries if e.mode == 0o160000} == {"vendor"} and LONG in {e.path for e in entries}
        assert read_index(index) == entries  # the hash found by its checksum
        assert read_index(index, 32) is None  # not a SHA-256 index


def damaged(index: Path, data: bytes) -> None:
    """`data` with a checksum that verifies (git does not check it; kopt's reader does)."""
    index.write_bytes(data + hashlib.sha1(data).digest())


def test_what_git_may_read_otherwise_is_left_to_git(repo: Path, tmp_path: Path) -> None:
    index = repo / ".git" / "index"
    plain(repo, "update-index", "--index-version", "3")
    good = index.read_bytes()
    try:
        # a split index: its entries live in a shared file
        plain(repo, "update-index", "--split-index")
        assert read_index(index, 20) is None and git_view(repo) is not None
        plain(repo, "update-index", "--no-split-index")
        # an end-of-entries table (and an offset table) git may read the entries by
        plain(
            repo,
            "-c",
            "index.recordEndOfIndexEntries=true",
            "-c",
            "index.recordOffsetTable=true",
            "update-index",
            "--force-write-index",
        )
        assert b"EOIE" in index.read_bytes() and read_index(index, 20) is None
        index.write_bytes(good)
        body = good[:-20]
        # an extension git does not know: required (lower case) or optional
        for sig in (b"xtra", b"XTRA"):
            damaged(index, body + sig + (4).to_bytes(4, "big") + b"abcd")
            assert read_index(index, 20) is None
        damaged(index, body + b"TREE" + (400).to_bytes(4, "big"))  # runs past the end
        assert read_index(index, 20) is None
        # a checksum that does not verify, a truncated file, another version
        index.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
        assert read_index(index, 20) is None and git_view(repo) is not None  # git reads it regardless
        damaged(index, body[:-7])
        assert read_index(index, 20) is None
        damaged(index, body[:4] + (5).to_bytes(4, "big") + body[8:])
        assert read_index(index, 20) is None and git_view(repo) is None
        # no file, a link, a FIFO
        index.unlink()
        assert read_index(index, 20) is None
        (tmp_path / "elsewhere").write_bytes(good)
        os.symlink(tmp_path / "elsewhere", index)
        assert read_index(index, 20) is None
        index.unlink()
        os.mkfifo(index)
        assert read_index(index, 20) is None  # without blocking
        index.unlink()
    finally:
        if index.is_symlink() or index.exists():
            index.unlink()
        index.write_bytes(good)
    assert ours(read_index(index, 20) or []) == git_view(repo)


def test_damaged_bytes_read_as_git_reads_them_or_left_to_git(repo: Path, repo2: Path) -> None:
    """Bytes of a version 2, 3 or 4 index changed at random (the checksum made to verify):
    where kopt's reader answers, git lists the same entries and flags."""
    rng = random.Random(25)
    answered = 0
    for where, version in ((repo2, 2), (repo, 3), (repo, 4)):
        index = where / ".git" / "index"
        plain(where, "update-index", "--index-version", str(version))
        good = index.read_bytes()
        body = good[:-20]
        try:
            for _ in range(12):
                data = bytearray(body)
                for _ in range(rng.choice((1, 1, 2, 4))):
                    data[rng.randrange(12, len(data))] ^= 1 << rng.randrange(8)
                damaged(index, bytes(data))
                entries = read_index(index, 20)
                if entries is not None:
                    answered += 1
                    assert ours(entries) == git_view(where)
        finally:
            index.write_bytes(good)
    assert answered  # some damage leaves a well-formed index (a flag bit, a stat field)


def test_a_sha256_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    if plain(repo, "init", "-q", "--object-format=sha256", check=False).returncode:
        pytest.skip("this git makes no SHA-256 repository")
    (repo / "a.txt").write_text("a\n")
    plain(repo, "add", "a.txt")
    plain(repo, "update-index", "--skip-worktree", "a.txt")
    index = repo / ".git" / "index"
    assert read_index(index, 20) is None
    entries = read_index(index, 32)
    assert entries is not None and ours(entries) == git_view(repo) == [("a.txt", 0o100644, 0, True)]
    assert read_index(index) == entries


def test_the_tree_check_reads_the_flags_without_git_and_falls_back_to_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    plain(repo, "init", "-q", "-b", "main")
    (repo / "k.py").write_text("k\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-qm", "base")
    base = gitops.head(repo)
    gitops.add_worktrees(repo, "kopt/t", tmp_path / "best", tmp_path / "cand", base)
    cand = tmp_path / "cand"
    plain(cand, "update-index", "--skip-worktree", "k.py")
    calls: list[str] = []
    real = gitops.invoke._exec

    def counting(argv: list[str], *a: object, **kw: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv[5])
        return real(argv, *a, **kw)  # type: ignore[arg-type]  # passes the real call's arguments through

    gitops.tree_listing(cand, base)
    gitops.invoke._exec = counting  # type: ignore[assignment]  # a counter around the real call
    try:
        assert gitops.tree_listing(cand, base, ignored=False).flagged == ("k.py",) and calls == ["diff-files"]
        plain(cand, "update-index", "--split-index")  # a file kopt does not read: git is asked
        calls.clear()
        assert gitops.tree_listing(cand, base, ignored=False).flagged == ("k.py",)
        assert calls == ["diff-files", "ls-files"]
    finally:
        gitops.invoke._exec = real  # type: ignore[assignment]
