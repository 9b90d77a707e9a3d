"""What a tree holds, read and written without trusting a worktree's own index.

- The candidate's tree: what it changes against a base, what a bench wrote into it, and
  staging, cleaning and committing it. What is reported or committed never comes from the
  worktree's own index as it stands: a scratch index, or one rebuilt from a tree first.
- A work tree against a base tree, through a reference index only kopt writes (for
  engine.treecheck): the base's files, those that differ on disk, the ignored ones, and the
  entries the worktree's own index flags. A fixed number of git calls, none per file.
- Building a branch without a worktree (`kopt export`): plumbing on a private index file,
  so no checked-out branch, HEAD, index or working tree of the user's is ever touched.
"""

from __future__ import annotations

import contextlib
import fnmatch
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.gitops.guards import (
    KOPT_AUTHOR,
    Actor,
    GitFailure,
    Location,
    author_env,
    locate,
    read_index,
)
from kopt_supervisor.engine.gitops.invoke import (
    _HEX,
    Reference,
    _git,
    _rebuild_index,
    _scratch_index,
    _split0,
    add_reference,
    head,
    known_tree,
    note_tree,
    reference,
    reference_file,
    run_at,
    show_file,
)


def index_flagged(path: str | Path) -> list[str]:
    """Entries of the worktree's own index marked skip-worktree or assume-unchanged: git's
    status and diff stop looking at those files, so any of them is suspect."""
    return _flagged(locate(path), None, label=path)


def _flagged(loc: Location, rawsz: int | None, *, label: str | Path | None = None) -> list[str]:
    """index_flagged at `loc`. With the repository's hash size known, the index file is read
    here when it is the plain file git writes (gitops.guards: the same entries and flags
    `git ls-files -v` prints, one process less per tree check); otherwise git is asked."""
    if rawsz is not None:
        entries = read_index(loc.git_dir / "index", rawsz)
        if entries is not None:
            return [e.path for e in entries if e.flagged]
    out = run_at(loc, "ls-files", "-v", "-z", label=label)
    return [e[2:] for e in out.split("\0") if len(e) > 2 and (e[0] == "S" or e[0].islower())]


def dirty_tracked(path: str | Path) -> list[str]:
    """Tracked files changed in the index or working tree, relative to the repo root, and
    the index entries flagged so that git would not look at them."""
    out = _git(path, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=dirty", "-z")
    return _unique([*_porcelain_paths(out), *index_flagged(path)])


def _unique(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def untracked(path: str | Path, *, ignored_too: bool = False) -> list[str]:
    """Untracked files (not ignored ones, unless `ignored_too`)."""
    out = _git(path, "ls-files", "--others", "-z", *(() if ignored_too else ("--exclude-standard",)))
    return _split0(out)


def _porcelain_paths(out: str) -> list[str]:
    paths: list[str] = []
    parts = out.split("\0")
    i = 0
    while i < len(parts):
        entry = parts[i]
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":  # a rename's source follows
                i += 1
        i += 1
    return paths


def matching(paths: list[str], globs: list[str]) -> list[str]:
    return sorted(
        {
            p
            for p in paths
            for g in globs
            if fnmatch.fnmatch(p, g) or p == g.rstrip("/") or p.startswith(g.rstrip("/") + "/")
        }
    )


def unstaged_changes(worktree: str | Path) -> list[str]:
    """Tracked files whose working copy differs from the index (and index entries flagged so
    that git would not look). kopt stages the candidate before timing it, so anything listed
    here was written by the bench itself."""
    out = _git(worktree, "diff", "--name-only", "-z", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")
    return _unique([*_split0(out), *index_flagged(worktree)])


def restore_from_index(worktree: str | Path) -> None:
    """Undo what a bench wrote into tracked files (the staged candidate is kept)."""
    loc = locate(worktree)
    _rebuild_index(loc, run_at(loc, "write-tree"))
    run_at(loc, "checkout", "--force", "--", ".")


def changed_files(worktree: str | Path, base: str) -> list[str]:
    """Files the candidate changes against `base`: tracked diffs and new untracked (not
    ignored) files, from the files themselves (a scratch index, not the worktree's)."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        return _names(loc, base, env)


def diff(worktree: str | Path, base: str, *, max_bytes: int = 2_000_000, force: Sequence[str] = ()) -> str:
    """The candidate's patch against `base` (new untracked files included, and the ignored
    files named in `force`), computed on a scratch index: the worktree's index is untouched."""
    return _staged_diff(worktree, base, force, _PATCH)[:max_bytes]


def saved_patch(worktree: str | Path, base: str) -> str:
    """The worktree's whole change against `base` (new untracked files and binary files
    included) as `git apply --binary` takes it back; "" when it has none. A scratch index:
    the worktree and its own index are untouched. Bytes that are not UTF-8 stay as run_at's
    surrogate escapes (write the text back with errors="surrogateescape")."""
    out = _staged_diff(worktree, base, (), _SAVE)
    return out + "\n" if out else ""  # run_at strips the newline a binary hunk's last line needs


def scan_diff(
    worktree: str | Path, base: str, *, force: Sequence[str] = (), max_bytes: int = 64 * 2**20
) -> tuple[str, bool]:
    """The candidate's whole patch against `base` for the diff scan (engine/diffscan): fixed
    `a/` `b/` prefixes whatever the user's config says, no renames, new and `force`d ignored
    files included; (text, truncated) with the text cut at `max_bytes`."""
    return _cut(_staged_diff(worktree, base, force, _SCAN), max_bytes)


def _cut(text: str, max_bytes: int) -> tuple[str, bool]:
    return text[:max_bytes], len(text) > max_bytes


# (config, options) of `diff`'s patch and of `scan_diff`'s
_PATCH: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
_SAVE: tuple[tuple[str, ...], tuple[str, ...]] = (("-c", "diff.noprefix=false"), ("--binary", "--no-renames"))
_SCAN: tuple[tuple[str, ...], tuple[str, ...]] = (
    ("-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false"),
    ("--no-renames", "--src-prefix=a/", "--dst-prefix=b/"),
)


def _names(loc: Location, base: str, env: dict[str, str]) -> list[str]:
    out = run_at(
        loc, "diff", "--cached", "--name-only", "--no-renames", "-z", "--ignore-submodules=dirty", base, env=env
    )
    return sorted(_split0(out))


def _staged_diff(
    worktree: str | Path, base: str, force: Sequence[str], how: tuple[tuple[str, ...], tuple[str, ...]]
) -> str:
    """The work tree (all of it, and the ignored files in `force`) staged on a scratch index
    and diffed against `base`, with no colour, external diff or text conversion."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        _add_forced(loc, force, env)
        return _diff_cached(loc, base, env, how)


def _diff_cached(loc: Location, base: str, env: dict[str, str], how: tuple[tuple[str, ...], tuple[str, ...]]) -> str:
    config, options = how
    return run_at(
        loc,
        *config,
        "diff",
        "--cached",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        *options,
        "--ignore-submodules=dirty",
        base,
        env=env,
    )


class StagedChange:
    """The candidate's change against a base, staged once on a scratch index, read the three
    ways the police's step reads it: `changed` (as changed_files), `diff()` (as diff) and
    `scan_diff()` (as scan_diff). Each of those staged the whole tree on an index of its own
    (the read-tree and the add three times over, one after the other, with nothing run in
    the tree between them). `changed` is listed before the ignored files in `force` join the
    index, as changed_files never added them."""

    def __init__(self, loc: Location, base: str, force: Sequence[str], env: dict[str, str]) -> None:
        self._loc, self._base, self._force, self._env = loc, base, tuple(force), env
        self.changed = _names(loc, base, env)
        self._forced = False
        self._texts: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}

    def _text(self, how: tuple[tuple[str, ...], tuple[str, ...]]) -> str:
        if not self._forced:
            _add_forced(self._loc, self._force, self._env)
            self._forced = True
        if how not in self._texts:
            self._texts[how] = _diff_cached(self._loc, self._base, self._env, how)
        return self._texts[how]

    def diff(self, *, max_bytes: int = 2_000_000) -> str:
        return self._text(_PATCH)[:max_bytes]

    def scan_diff(self, *, max_bytes: int = 64 * 2**20) -> tuple[str, bool]:
        return _cut(self._text(_SCAN), max_bytes)


@contextlib.contextmanager
def staged_change(worktree: str | Path, base: str, *, force: Sequence[str] = ()) -> Iterator[StagedChange]:
    """The work tree staged against `base` once (StagedChange), for as long as the block runs;
    the scratch index is removed after it."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        yield StagedChange(loc, base, force, env)


def _gitlinks(loc: Location, env: dict[str, str] | None) -> list[str]:
    """The gitlinks (nested repositories' commits) the index holds: read from the index file
    when it is the plain file git writes (gitops.guards), else from `git ls-files -s`."""
    index = (env or {}).get("GIT_INDEX_FILE") or str(loc.git_dir / "index")
    entries = read_index(index)
    if entries is not None:
        return [e.path for e in entries if e.mode == 0o160000]
    return [
        e.partition("\t")[2] for e in _split0(run_at(loc, "ls-files", "-s", "-z", env=env)) if e.startswith("160000 ")
    ]


def _add(loc: Location, how: str, env: dict[str, str] | None = None) -> None:
    """`git add --all` or `--update`, leaving out the gitlinks the index holds: to see whether
    a nested repository is dirty, add starts git inside it, where that repository's own
    config (filters by names kopt never saw) would run."""
    gitlinks = _gitlinks(loc, env)
    if not gitlinks:
        run_at(loc, "add", how, env=env)
        return
    with tempfile.TemporaryFile() as spec:
        spec.write(b"".join(b":(exclude,literal)" + p.encode("utf-8", "surrogateescape") + b"\0" for p in gitlinks))
        spec.seek(0)
        run_at(loc, "add", how, "--pathspec-from-file=-", "--pathspec-file-nul", env=env, stdin=spec, literal=False)


def _add_forced(loc: Location, paths: Sequence[str], env: dict[str, str] | None = None) -> None:
    if not paths:
        return
    with tempfile.TemporaryFile() as spec:
        spec.write(b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths))
        spec.seek(0)
        run_at(loc, "add", "--force", "--all", "--pathspec-from-file=-", "--pathspec-file-nul", env=env, stdin=spec)


def stage_all_tree(worktree: str | Path, *, force: Sequence[str] = ()) -> str:
    """Stage the candidate (HEAD's tree, every change on disk, new files that are not ignored,
    and the ignored files named in `force`) in a fresh index and return the tree sha it would
    commit (recorded before a commit, so a crash between commit and bookkeeping can be
    recognised and adopted). Whatever the worktree's index held before does not count."""
    loc = locate(worktree)
    _rebuild_index(loc, "HEAD")
    _add(loc, "--all")
    _add_forced(loc, force)
    return run_at(loc, "write-tree")


def stage_tracked_tree(worktree: str | Path) -> str:
    """Update the index from the working copy of the files it already holds (the staged
    candidate, after formatting) without picking up new untracked files (bench outputs);
    return the tree it would commit. Each file is hashed again: stat data or flags in the
    index cannot make a changed file look unchanged."""
    loc = locate(worktree)
    _rebuild_index(loc, run_at(loc, "write-tree"))
    _add(loc, "--update")
    return run_at(loc, "write-tree")


def remove_untracked(worktree: str | Path) -> None:
    """Delete untracked files that are not ignored (what a bench wrote beside the staged
    candidate), nested repositories included; ignored build caches stay."""
    _git(worktree, "clean", "-ffdq")


def remove_ignored(worktree: str | Path, *, keep: Sequence[str] = ()) -> list[str]:
    """Delete the ignored files that the ignore rules hide (build caches, compiled files),
    except those matching the globs in `keep`. Returns the paths removed."""
    loc = locate(worktree)
    if not keep:
        doomed = _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"))
        run_at(loc, "clean", "-ffdXq")
        return doomed
    ignored = _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "-z"))
    kept = set(matching(ignored, list(keep)))
    doomed = [p for p in ignored if p not in kept]
    for i in range(0, len(doomed), 200):
        run_at(loc, "clean", "-ffdXq", "--", *doomed[i : i + 200])
    return doomed


def commit(worktree: str | Path, message: str, *, tree: str | None = None) -> str:
    """Commit the staged candidate as kopt and move the worktree's HEAD to it without
    touching any branch (commit-tree, then update-ref --no-deref): no hook, no signing, no
    status of nested repositories; a HEAD pointed at someone's branch moves nothing.
    `tree`: what stage_tracked_tree just returned for this worktree (the tree recorded before
    the commit, so a crash between them is recognised): it is committed as it is, not staged
    a second time."""
    loc = locate(worktree)
    if tree is None:
        tree = stage_tracked_tree(worktree)
    parent = head(worktree)
    sha = run_at(loc, "commit-tree", "--no-gpg-sign", "-p", parent, "-m", message, tree, env=author_env())
    run_at(loc, "update-ref", "--no-deref", "-m", "kopt: keep", "HEAD", sha, parent)
    return sha


@dataclass(frozen=True)
class TreeListing:
    """What git says about a work tree against a base tree, all from kopt's own index."""

    base_tree: str
    base_files: frozenset[str]  # every path of the base tree (gitlinks included)
    changed: tuple[tuple[str, str], ...]  # (M|D|T, path) of base files that differ on disk
    ignored: frozenset[str]  # files not in base that the ignore rules hide ("dir/" for a nested repo)
    flagged: tuple[str, ...]  # entries of the worktree's own index marked skip-worktree/assume-unchanged


def _tree_of(loc: Location, base: str) -> str:
    cached = known_tree(loc, base)
    if cached:
        return cached
    tree = run_at(loc, "rev-parse", "--verify", "--quiet", f"{base}^{{tree}}", ok=(0, 1))
    if not tree:
        raise GitFailure(f"{base!r} is not a commit or tree of {loc.common_dir}")
    note_tree(loc, base, tree)
    return tree


def _reference(loc: Location, base: str) -> tuple[Reference, bool]:
    """The worktree's reference index holding `base`'s tree, and whether it was just built
    (its entries carry no stat data yet). The last REFERENCES_PER_WORKTREE are kept."""
    tree = _tree_of(loc, base)
    ref = reference(loc, tree)
    if ref is not None:
        return ref, False
    index = reference_file(loc)
    run_at(loc, "read-tree", tree, env={"GIT_INDEX_FILE": str(index)})
    entries = read_index(index, _hash_size(tree))  # kopt's own file, as git just wrote it
    files = (
        frozenset(e.path for e in entries)
        if entries is not None
        else frozenset(_split0(run_at(loc, "ls-files", "-z", env={"GIT_INDEX_FILE": str(index)})))
    )
    ref = Reference(tree, index, files)
    ref.restamp()
    add_reference(loc, ref)
    return ref, True


def _hash_size(sha: str) -> int | None:
    """The repository's hash size, from an object id git gave (None: not one)."""
    return len(sha) // 2 if _HEX.fullmatch(sha) else None


def _changed(loc: Location, env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    parts = run_at(loc, "diff-files", "--name-status", "-z", "--ignore-submodules=dirty", env=env).split("\0")
    return tuple((parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i])


def tree_listing(worktree: str | Path, base: str, *, ignored: bool = True) -> TreeListing:
    """Compare a work tree with `base` through an index only kopt writes (kept per worktree
    in kopt's private folder, rebuilt when the base changes, refreshed by stat and ctime, so
    repeated checks read only what changed). One to four git calls; none per file.

    The refresh (`update-index --refresh`, which rehashes the files whose stat data moved)
    runs only where `diff-files` names something: without it `diff-files` names every file
    whose content, mode or type differs and also those whose stat alone moved (a racily
    clean entry is compared by content either way), so an empty answer is the same answer.
    `ignored=False`: the ignored files are not listed (`ignored_new` lists them), for a
    caller that found no file outside the base."""
    loc = locate(worktree)
    ref, fresh = _reference(loc, base)
    env = {"GIT_INDEX_FILE": str(ref.index)}
    changed: tuple[tuple[str, str], ...] = ()
    if not fresh:
        changed = _changed(loc, env)
    if fresh or changed:
        try:
            run_at(loc, "update-index", "-q", "--refresh", "--ignore-submodules", env=env, ok=(0, 1))
        finally:
            ref.restamp()
        changed = _changed(loc, env)
    others = _ignored(loc, env) if ignored else frozenset()
    return TreeListing(ref.tree, ref.files, changed, others, tuple(_flagged(loc, _hash_size(ref.tree), label=worktree)))


def _ignored(loc: Location, env: dict[str, str]) -> frozenset[str]:
    return frozenset(
        _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "-z", "--directory", env=env))
    )


def ignored_new(worktree: str | Path, base: str) -> frozenset[str]:
    """Files not in `base` that the ignore rules hide ("dir/" for a whole folder or a nested
    repository), against the reference index of `base` (as `tree_listing` lists them)."""
    loc = locate(worktree)
    ref, _ = _reference(loc, base)
    return _ignored(loc, {"GIT_INDEX_FILE": str(ref.index)})


def diff_paths(path: str | Path, a: str, b: str) -> list[tuple[str, str]]:
    """(status letter, file) for every file that differs from commit `a` to `b` (a rename is
    a delete and an add)."""
    parts = _git(path, "diff", "--name-status", "--no-renames", "--no-ext-diff", "--no-textconv", "-z", a, b).split(
        "\0"
    )
    return [(parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i]]


def tree_files(path: str | Path, commit: str) -> set[str]:
    """Every file path in a commit's tree."""
    return set(_split0(_git(path, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit)))


def tree_entries(path: str | Path, commit: str, files: list[str]) -> dict[str, tuple[str, str]]:
    """file -> (mode, object id) in a commit's tree, for the files it has."""
    out: dict[str, tuple[str, str]] = {}
    for i in range(0, len(files), 200):
        chunk = files[i : i + 200]
        text = _git(path, "ls-tree", "-z", "--full-tree", commit, "--", *chunk) if chunk else ""
        for entry in text.split("\0"):
            if not entry:
                continue
            meta, _, name = entry.partition("\t")
            mode, _kind, obj = meta.split()
            out[name] = (mode, obj)
    return out


def ignored_paths(path: str | Path, commit: str, files: list[str]) -> set[str]:
    """The files that the .gitignore files of `commit` (with the repo's info/exclude and the
    user's excludes) ignore, whether or not they are tracked. Evaluated in a scratch folder
    holding only those .gitignore files and empty stand-ins of `files`."""
    if not files:
        return set()
    repo_loc = locate(path)
    gitignores = [p for p in tree_files(path, commit) if p == ".gitignore" or p.endswith("/.gitignore")]
    with tempfile.TemporaryDirectory(prefix="kopt-ignore-") as tmp:
        root = Path(tmp)
        for g in gitignores:
            text = show_file(path, commit, g)
            if text is not None:
                (root / g).parent.mkdir(parents=True, exist_ok=True)
                (root / g).write_text(text + "\n", encoding="utf-8", errors="surrogateescape")
        for f in files:
            with contextlib.suppress(OSError):
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).touch()
        with tempfile.TemporaryFile() as listing:
            listing.write("".join(f + "\0" for f in files).encode("utf-8", "surrogateescape"))
            listing.seek(0)
            loc = Location(repo_loc.git_dir, repo_loc.common_dir, root)
            out = run_at(
                loc, "check-ignore", "--no-index", "--stdin", "-z", stdin=listing, ok=(0, 1), label=path, literal=False
            )  # check-ignore refuses the literal magic; it takes no other
        return set(_split0(out))


def hash_blob(path: str | Path, data: bytes) -> str:
    """Store `data` as a blob in the repository; returns its object id."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        return _git(path, "hash-object", "-w", "--no-filters", "--stdin", stdin=f)


def commit_with_changes(
    path: str | Path,
    parent: str,
    changes: list[tuple[str, str | None, str | None]],
    message: str,
    *,
    author: Actor = KOPT_AUTHOR,
    author_date: float | None = None,
) -> str:
    """A new commit (on no branch) whose tree is `parent`'s with `changes` applied:
    (file, mode, object id) sets a file, (file, None, None) removes it."""
    with tempfile.TemporaryDirectory(prefix="kopt-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), **author_env(author)}
        if author_date is not None:
            env["GIT_AUTHOR_DATE"] = f"@{int(author_date)} +0000"
        _git(path, "read-tree", parent, env=env)
        zero = "0" * len(parent)
        info = "".join(f"{mode} {obj}\t{name}\0" if mode else f"0 {zero}\t{name}\0" for name, mode, obj in changes)
        info_path = Path(tmp) / "index-info"
        info_path.write_bytes(info.encode("utf-8", "surrogateescape"))
        with open(info_path, "rb") as stdin:
            _git(path, "update-index", "-z", "--index-info", env=env, stdin=stdin)
        tree = _git(path, "write-tree", env=env)
        return _git(path, "commit-tree", "--no-gpg-sign", tree, "-p", parent, "-m", message, env=env)


def check_branch_name(path: str | Path, name: str) -> None:
    try:
        _git(path, "check-ref-format", "--branch", name)
    except GitFailure:
        raise BadInput(f"{name!r} is not a valid branch name") from None
    if name.startswith("-") or name.startswith("refs/"):
        raise BadInput(f"{name!r} is not a valid branch name (give the short name, e.g. perf/my-kernel)")


def create_branch(path: str | Path, name: str, commit: str) -> None:
    """Point a new branch at `commit`; fails (GitFailure) if the branch exists meanwhile."""
    _git(path, "update-ref", "-m", "kopt export", f"refs/heads/{name}", commit, "0" * len(commit))
