"""git without surprises: every program a repository's config can name, planted, never runs
in kopt's git calls, and the calls still do their job.

A real repository with kopt's two worktrees (gitops.add_worktrees). Each program-running
setting is planted three ways (the repository's .git/config; the worktrees' config.worktree;
include files, nested, relative and conditional) with a program that writes a marker file
named after the setting, and a committed .gitattributes selects the planted filter, diff and
merge drivers. A control runs plain git in an identically planted repository and sees the
markers appear (so the plants are live); then every gitops function kopt uses in a keep runs
and no marker appears. Then the redirections: core.worktree, core.bare, a replaced cand/.git,
a HEAD turned to the user's branch, GIT_* variables in kopt's own environment, index flags
and forged stat data, nested repositories with their own config, a tracked folder replaced
by a link.
"""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine import KoptError, gitops

BRANCH = "kopt/t"
KERNEL = "def kernel(x):\n    return x\n"
FAST = "def kernel(x):\n    return x  # fast\n"
BASE_FILES = {
    "bench.py": "import kernel\nprint(kernel.kernel(1))\n",
    "kernel.py": KERNEL,
    "notes.txt": "notes\n",
    "weird.dat": "weird\n",
    "README.md": "readme\n",
    "plain.bin": "plain\n",
    ".gitignore": "*.log\nbuild/\n",
    # the candidate controls its tree: its attributes select every planted driver
    ".gitattributes": "*.py filter=evilc diff=evilx merge=evilm\n*.txt filter=evilp diff=evilt\n"
    "weird.dat filter=a=b.c\n",
}
HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-index-change",
    "reference-transaction",
    "post-rewrite",
    "pre-auto-gc",
    "post-merge",
    "pre-rebase",
    "fsmonitor-watchman",
)


def plain_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return env


def plain(cwd: Path, *args: str, stdin: str = "", timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """Plain git, as a user (or a proposer) would run it: no guard at all."""
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=plain_env(),
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
        check=False,
    )


def plain_tty(cwd: Path, *args: str) -> None:
    """Plain git on a terminal (pagers only start there)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(
        ["git", *args], cwd=cwd, env={**plain_env(), "TERM": "xterm"}, stdin=slave, stdout=slave, stderr=slave
    )
    os.close(slave)
    try:
        while os.read(master, 4096):
            pass
    except OSError:
        pass
    p.wait(timeout=20)
    os.close(master)


class Plant:
    """Programs that leave a marker when run, and the settings that name them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.markers = root / "markers"
        self.bin = root / "bin"
        self.markers.mkdir(parents=True)
        self.bin.mkdir()

    def prog(self, name: str, kind: str = "plain") -> str:
        body = {"plain": "", "filter": "cat\n", "textconv": 'cat "$1"\n'}[kind]
        path = self.bin / name.replace("/", "_")
        path.write_text(f'#!/bin/sh\ntouch "{self.markers / name.replace("/", "_")}"\n{body}exit 0\n')
        path.chmod(0o755)
        return str(path)

    def hooks(self, folder: Path, tag: str) -> str:
        folder.mkdir(parents=True, exist_ok=True)
        for hook in HOOKS:
            dest = folder / hook
            dest.write_text(f'#!/bin/sh\ntouch "{self.markers}/hook-{tag}-{hook}"\nexit 0\n')
            dest.chmod(0o755)
        return str(folder)

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def settings(self, signing: str, other_repo: Path) -> list[tuple[str, str]]:
        attrs = self.root / "global-attributes"
        attrs.write_text("*.md filter=evila\n")
        out = [
            ("core.hooksPath", self.hooks(self.root / "hooks", "path")),
            ("core.fsmonitor", self.prog("core.fsmonitor")),
            ("core.editor", self.prog("core.editor")),
            ("sequence.editor", self.prog("sequence.editor")),
            ("core.pager", self.prog("core.pager", "filter")),
            ("pager.status", self.prog("pager.status", "filter")),
            ("pager.log", self.prog("pager.log", "filter")),
            ("pager.diff", self.prog("pager.diff", "filter")),
            ("core.askPass", self.prog("core.askPass")),
            ("core.sshCommand", self.prog("core.sshCommand")),
            ("core.gitProxy", self.prog("core.gitProxy")),
            ("core.alternateRefsCommand", self.prog("core.alternateRefsCommand")),
            ("core.attributesFile", str(attrs)),
            ("filter.evila.clean", self.prog("filter.evila.clean", "filter")),
            ("filter.evila.smudge", self.prog("filter.evila.smudge", "filter")),
            ("commit.gpgSign", "true"),
            ("tag.gpgSign", "true"),
            ("log.showSignature", "true"),
            ("filter.evilc.clean", self.prog("filter.evilc.clean", "filter")),
            ("filter.evilc.smudge", self.prog("filter.evilc.smudge", "filter")),
            ("filter.evilc.required", "true"),
            ("filter.evilp.process", self.prog("filter.evilp.process")),
            ("filter.evilp.required", "true"),
            ("filter.a=b.c.clean", self.prog("filter.a=b.c.clean", "filter")),
            ("filter.a=b.c.smudge", self.prog("filter.a=b.c.smudge", "filter")),
            ("diff.evilx.command", self.prog("diff.evilx.command")),
            ("diff.evilt.textconv", self.prog("diff.evilt.textconv", "textconv")),
            ("diff.external", self.prog("diff.external")),
            ("merge.evilm.driver", self.prog("merge.evilm.driver")),
            ("diff.tool", "evt"),
            ("difftool.evt.cmd", self.prog("difftool.evt.cmd")),
            ("merge.tool", "emt"),
            ("mergetool.emt.cmd", self.prog("mergetool.emt.cmd")),
            ("credential.helper", self.prog("credential.helper")),
            ("credential.https://example.invalid.helper", self.prog("credential.url.helper")),
            ("remote.origin.url", "ssh://example.invalid/r"),
            ("remote.local.url", str(other_repo)),
            ("remote.local.uploadpack", self.prog("remote.local.uploadpack")),
            ("remote.local.receivepack", self.prog("remote.local.receivepack")),
            ("alias.st", "!" + self.prog("alias.st")),
            ("alias.status", "!" + self.prog("alias.status")),
            ("alias.commit-tree", "!" + self.prog("alias.commit-tree")),
            ("hook.evil.command", self.prog("hook.evil.command")),
            ("hook.evil.event", "pre-commit"),
            ("uploadpack.packObjectsHook", self.prog("uploadpack.packObjectsHook")),
            ("submodule.recurse", "true"),
            ("status.showUntrackedFiles", "no"),
            ("diff.noprefix", "true"),
            ("color.ui", "always"),
        ]
        if signing == "openpgp":
            out += [
                ("gpg.format", "openpgp"),
                ("gpg.program", self.prog("gpg.program")),
                ("gpg.openpgp.program", self.prog("gpg.openpgp.program")),
            ]
        elif signing == "ssh":
            out += [
                ("gpg.format", "ssh"),
                ("gpg.ssh.program", self.prog("gpg.ssh.program")),
                ("gpg.ssh.defaultKeyCommand", self.prog("gpg.ssh.defaultKeyCommand")),
            ]
        else:
            out += [("gpg.format", "x509"), ("gpg.x509.program", self.prog("gpg.x509.program"))]
        return out


def set_in(file: Path, key: str, value: str) -> None:
    r = subprocess.run(
        ["git", "config", "-f", str(file), "--add", key, value],
        env=plain_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for name, text in BASE_FILES.items():
        (path / name).write_text(text)
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "base")):
        r = plain(path, *args)
        assert r.returncode == 0, r.stderr
    return path


PLACEMENTS = ("config", "worktree", "include")
SIGNING = {"config": "openpgp", "worktree": "ssh", "include": "x509"}


def plant_repo(plant: Plant, repo: Path, placement: str) -> list[tuple[str, str]]:
    """Plant every setting in `repo` the `placement` way (and hooks in its own hooks folder).
    Returns the settings. Linked worktrees made later get theirs from `plant_worktrees`."""
    other = make_repo(plant.root / f"other-{placement}-{repo.name}")
    settings = plant.settings(SIGNING[placement], other)
    common = repo / ".git"
    plant.hooks(common / "hooks", "default")
    if placement == "config":
        for k, v in settings:
            set_in(common / "config", k, v)
    elif placement == "worktree":
        set_in(common / "config", "core.repositoryformatversion", "1")
        set_in(common / "config", "extensions.worktreeConfig", "true")
        for k, v in settings:
            set_in(common / "config.worktree", k, v)
    else:
        inc = plant.root / f"inc-{repo.name}"
        inc.mkdir()
        (inc / "first.inc").write_text("[include]\n\tpath = second.inc\n")  # nested, relative
        for k, v in settings:
            set_in(inc / "second.inc", k, v)
            set_in(inc / "on-branch.inc", k, v)
        set_in(common / "config", "include.path", str(inc / "first.inc"))
        set_in(common / "config", "includeIf.onbranch:kopt/**.path", str(inc / "on-branch.inc"))
    return settings


def plant_worktrees(plant: Plant, repo: Path, settings: list[tuple[str, str]], placement: str) -> None:
    if placement != "worktree":
        return
    for admin in (repo / ".git" / "worktrees").iterdir():
        for k, v in settings:
            set_in(admin / "config.worktree", k, v)


def edit_candidate(cand: Path) -> None:
    (cand / "kernel.py").write_text(FAST)
    (cand / "new.py").write_text("HELPER = 1\n")
    (cand / "notes.txt").write_text("notes, changed\n")
    (cand / "weird.dat").write_text("weird, changed\n")
    (cand / "README.md").write_text("readme, changed\n")
    (cand / "plain.bin").write_text("plain, changed\n")
    time.sleep(0.01)


@pytest.fixture(params=PLACEMENTS)
def planted(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Plant, Path, Path, Path, str]:
    placement = request.param
    plant = Plant(tmp_path)
    repo = make_repo(tmp_path / "repo")
    settings = plant_repo(plant, repo, placement)
    ws = tmp_path / "ws"
    ws.mkdir()
    # kopt makes its worktrees in the planted repository: no hook, no smudge filter runs
    gitops.add_worktrees(repo, BRANCH, ws / "best", ws / "cand", gitops.head(repo))
    assert plant.fired() == []
    plant_worktrees(plant, repo, settings, placement)
    return plant, repo, ws / "best", ws / "cand", placement


def git_calls(monkeypatch: pytest.MonkeyPatch, *, listings: bool = True) -> list[str]:
    """From now on, the subcommand of every git process kopt starts (its `-c key=value`
    options skipped), in order; `listings`: the per-worktree config listing too ("config")."""
    calls: list[str] = []
    real = gitops.invoke._exec

    def counting(argv: list[str], *a: object, **kw: object) -> subprocess.CompletedProcess[bytes]:
        if argv[4] == "config":
            if listings:
                calls.append("config")
        else:
            rest = argv[5:]
            while rest[:1] == ["-c"]:
                rest = rest[2:]
            calls.append(rest[0])
        return real(argv, *a, **kw)  # type: ignore[arg-type]  # passes the real call's arguments through

    monkeypatch.setattr(gitops.invoke, "_exec", counting)
    return calls


def test_the_plants_are_live_for_plain_git(tmp_path: Path) -> None:
    """The control: plain git in identically planted repositories runs the planted programs
    (otherwise the test below would prove nothing)."""
    expected_everywhere = {
        "core.fsmonitor",
        "filter.evilc.clean",
        "filter.evilc.smudge",
        "filter.evilp.process",
        "filter.a=b.c.clean",
        "filter.evila.clean",
        "diff.evilx.command",
        "diff.external",
        "diff.evilt.textconv",
        "core.editor",
        "sequence.editor",
        "merge.evilm.driver",
        "difftool.evt.cmd",
        "alias.st",
        "pager.status",
        "pager.log",
        "core.sshCommand",
        "remote.local.uploadpack",
        "credential.helper",
        "core.gitProxy",
        "hook-path-pre-commit",
        "hook-path-post-checkout",
    }
    signing = {"openpgp": {"gpg.openpgp.program"}, "ssh": {"gpg.ssh.defaultKeyCommand"}, "x509": {"gpg.x509.program"}}
    for placement in PLACEMENTS:
        plant = Plant(tmp_path / placement)
        repo = make_repo(tmp_path / placement / "repo")
        settings = plant_repo(plant, repo, placement)
        wt = tmp_path / placement / "wt"
        branch = "kopt/control"
        # (the planted process filter would make the checkout fail; it fires in `add` below)
        r = plain(
            repo,
            "-c",
            "filter.evilp.process=",
            "-c",
            "filter.evilp.required=false",
            "worktree",
            "add",
            "-b",
            branch,
            str(wt),
            "HEAD",
        )
        assert r.returncode == 0, r.stderr
        plant_worktrees(plant, repo, settings, placement)
        plain(wt, "status")
        edit_candidate(wt)
        plain(wt, "add", "notes.txt")  # the process filter (it dies: every later command would fail)
        # from here on the process filter is out of the way, everything else stays planted
        p = ("-c", "filter.evilp.process=", "-c", "filter.evilp.required=false")
        no_sign = (*p, "-c", "commit.gpgSign=false")
        (wt / "kernel.py").unlink()
        plain(wt, *p, "checkout", "--", "kernel.py")  # smudge
        edit_candidate(wt)
        plain(wt, *p, "diff", "HEAD")  # external diff programs
        plain(wt, *p, "diff", "--no-ext-diff", "HEAD")  # textconv
        plain(wt, *p, "add", "-A")
        plain(wt, *p, "commit", "-m", "signed")  # signing programs, hooks
        plain(wt, *no_sign, "commit", "-q", "--no-verify", "-m", "one")
        plain(wt, *no_sign, "commit", "--allow-empty")  # editor
        plain(wt, *no_sign, "rebase", "-i", "HEAD~1")  # sequence editor
        plain(wt, *p, "rebase", "--abort")
        plain(wt, *p, "checkout", "-q", "-b", "side", "HEAD~1")  # a merge: the merge driver
        (wt / "kernel.py").write_text("def kernel(x):\n    return -x\n")
        plain(wt, *no_sign, "commit", "-q", "--no-verify", "-am", "side")
        plain(wt, *no_sign, "merge", "--no-verify", "-m", "m", branch)
        plain(wt, *p, "merge", "--abort")
        plain(wt, *p, "difftool", "-y", "HEAD~1")
        plain(wt, *p, "st")
        plain_tty(wt, *p, "status")
        plain_tty(wt, *p, "log", "-1")
        plain(wt, *p, "fetch", "origin")
        plain(wt, *p, "fetch", "local")
        plain(wt, *p, "fetch", "git://example.invalid/r")
        plain(wt, *p, "credential", "fill", stdin="protocol=https\nhost=example.org\n\n")
        fired = set(plant.fired())
        expected = expected_everywhere | signing[SIGNING[placement]]
        if placement == "worktree":  # git looks aliases up before it reads config.worktree
            expected = expected - {"alias.st"}
        missing = expected - fired
        assert not missing, f"{placement}: plants not live for plain git: {sorted(missing)}"


def test_no_planted_program_runs_in_a_whole_keep(planted: tuple[Plant, Path, Path, Path, str]) -> None:
    plant, repo, best, cand, placement = planted
    base = gitops.head(best)
    # the loop's checks after a proposal
    assert gitops.head(cand) == base
    assert gitops.branch_sha(repo, BRANCH) == base
    edit_candidate(cand)
    assert gitops.dirty_tracked(best) == []
    assert gitops.untracked(best, ignored_too=True) == []
    changed = gitops.changed_files(cand, base)
    assert changed == ["README.md", "kernel.py", "new.py", "notes.txt", "plain.bin", "weird.dat"]
    patch = gitops.diff(cand, base)
    assert "+    return x  # fast" in patch and "+HELPER = 1" in patch and "\x1b[" not in patch
    assert "diff --git a/kernel.py b/kernel.py" in patch  # prefixes kept (diff.noprefix planted)
    assert gitops.untracked(cand) == ["new.py"]
    assert gitops.matching(changed, ["bench.py"]) == []
    with gitops.staged_change(cand, base) as staged:  # the police's step: one staging, three readings
        assert staged.changed == changed and staged.diff() == patch
        assert staged.scan_diff() == gitops.scan_diff(cand, base)
    # staging, a bench run that writes a tracked file and an output, the restore
    tree = gitops.stage_all_tree(cand)
    (cand / "out.csv").write_text("config,us\n")
    (cand / "kernel.py").write_text("the bench wrote this\n")
    (cand / "run.log").write_text("ignored log\n")
    assert gitops.unstaged_changes(cand) == ["kernel.py"]
    gitops.restore_from_index(cand)
    assert (cand / "kernel.py").read_text() == FAST
    gitops.remove_untracked(cand)
    assert not (cand / "out.csv").exists() and (cand / "run.log").exists()
    assert gitops.remove_ignored(cand) == ["run.log"] and not (cand / "run.log").exists()
    listing = gitops.tree_listing(cand, base)
    assert sorted(p for _, p in listing.changed) == ["README.md", "kernel.py", "notes.txt", "plain.bin", "weird.dat"]
    assert gitops.stage_tracked_tree(cand) == tree
    # the keep
    sha = gitops.commit(cand, "kopt: v1 keep")
    assert gitops.commit_info(repo, sha) == ([base], tree)
    assert gitops.show_file(repo, sha, "kernel.py") == FAST.rstrip("\n")  # raw content, no filter ran
    assert gitops.head(cand) == sha
    assert gitops.branch_sha(repo, BRANCH) == base  # the commit moved no branch
    gitops.reset_clean(best, sha)
    assert gitops.branch_sha(repo, BRANCH) == sha and (best / "kernel.py").read_text() == FAST
    assert (best / "weird.dat").read_text() == "weird, changed\n"
    gitops.reset_clean(cand, sha, detach=True)
    assert gitops.ensure_worktree(repo, best, branch=BRANCH, commit=sha) is False
    assert gitops.ensure_worktree(repo, cand, branch=None, commit=sha) is False
    assert gitops.clear_stale_lock(cand) == []
    assert gitops.dirty_tracked(cand) == [] and gitops.untracked(cand, ignored_too=True) == []
    # kopt export's plumbing on the same repository
    assert gitops.diff_paths(repo, base, sha) == [
        ("M", "README.md"),
        ("M", "kernel.py"),
        ("A", "new.py"),
        ("M", "notes.txt"),
        ("M", "plain.bin"),
        ("M", "weird.dat"),
    ]
    assert "new.py" in gitops.tree_files(repo, sha)
    assert set(gitops.tree_entries(repo, sha, ["kernel.py", "new.py"])) == {"kernel.py", "new.py"}
    assert gitops.ignored_paths(repo, sha, ["a.log", "kernel.py"]) == {"a.log"}
    blob = gitops.hash_blob(repo, b"results\n")
    exported = gitops.commit_with_changes(repo, sha, [("results.md", "100644", blob)], "results")
    gitops.check_branch_name(repo, "perf/x")
    gitops.create_branch(repo, "perf/x", exported)
    assert gitops.branch_sha(repo, "perf/x") == exported
    assert gitops.toplevel(repo) == repo
    shutil.rmtree(cand)  # a worktree deleted by hand: re-created (a checkout) in the planted repository
    assert gitops.ensure_worktree(repo, cand, branch=None, commit=sha) is True
    assert (cand / "kernel.py").read_text() == FAST and (cand / "weird.dat").read_text() == "weird, changed\n"
    assert plant.fired() == [], f"{placement}: planted programs ran inside kopt's git calls"


def test_config_is_listed_once_and_again_when_an_include_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant = Plant(tmp_path)
    repo = make_repo(tmp_path / "repo")
    inc = tmp_path / "later.inc"
    inc.write_text("")  # exists, empty: the include names it but it sets nothing yet
    set_in(repo / ".git" / "config", "include.path", str(inc))
    ws = tmp_path / "ws"
    gitops.add_worktrees(repo, BRANCH, ws / "best", ws / "cand", gitops.head(repo))
    calls: list[Path] = []
    real = gitops.invoke._list_config

    def counting(loc: gitops.Location) -> tuple[list[str], set[str]]:
        calls.append(loc.work_tree)
        return real(loc)

    monkeypatch.setattr(gitops.invoke, "_list_config", counting)
    for _ in range(30):
        gitops.dirty_tracked(ws / "cand")
    assert len(calls) <= 2  # listed once (twice when an include appeared while listing)
    before = len(calls)
    # a filter name kopt has never seen, planted in the include after the listing was cached
    set_in(inc, "filter.late.clean", plant.prog("filter.late.clean", "filter"))
    (ws / "cand" / ".gitattributes").write_text("*.py filter=late\n")
    (ws / "cand" / "kernel.py").write_text(FAST)
    assert gitops.changed_files(ws / "cand", gitops.head(repo)) == [".gitattributes", "kernel.py"]
    assert len(calls) > before
    # and a name added to the repository's own config, too
    set_in(repo / ".git" / "config", "filter.later.clean", plant.prog("filter.later.clean", "filter"))
    (ws / "cand" / ".gitattributes").write_text("*.py filter=later\n")
    gitops.stage_all_tree(ws / "cand")
    assert plant.fired() == []
    # changed again, so plain git must read it (a file staged more than a second ago is not)
    (ws / "cand" / "kernel.py").write_text(FAST + "\n")
    assert plain(ws / "cand", "add", "-A").returncode == 0 and plant.fired() == ["filter.later.clean"]  # live


def kopt_repo(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    repo = make_repo(tmp_path / "repo")
    ws = tmp_path / "ws"
    ws.mkdir()
    gitops.add_worktrees(repo, BRANCH, ws / "best", ws / "cand", gitops.head(repo))
    return repo, ws / "best", ws / "cand", gitops.head(repo)


def victim_folder(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me\n")
    (victim / "kernel.py").write_text("victim's own\n")
    (victim / "build").mkdir()
    (victim / "build" / "cache.bin").write_text("victim's cache\n")
    return victim


def victim_intact(victim: Path) -> bool:
    return (
        (victim / "precious.txt").read_text() == "keep me\n"
        and (victim / "kernel.py").read_text() == "victim's own\n"
        and (victim / "build" / "cache.bin").exists()
        and not (victim / "bench.py").exists()
    )


@pytest.mark.parametrize("where", ["config", "bare", "config.worktree"])
def test_core_worktree_cannot_move_a_reset_or_a_clean(tmp_path: Path, where: str) -> None:
    repo, best, cand, base = kopt_repo(tmp_path)
    victim = victim_folder(tmp_path)
    if where == "config":  # the repository's config: the main worktree (the user's checkout) moves
        set_in(repo / ".git" / "config", "core.worktree", str(victim))
        moved = [repo]
    elif where == "bare":  # the user's checkout declared bare: plain git refuses to work there
        set_in(repo / ".git" / "config", "core.bare", "true")
        assert plain(repo, "status").returncode != 0
        moved = []
    else:  # every worktree's own config.worktree: each of them moves
        set_in(repo / ".git" / "config", "core.repositoryformatversion", "1")
        set_in(repo / ".git" / "config", "extensions.worktreeConfig", "true")
        set_in(repo / ".git" / "config.worktree", "core.worktree", str(victim))
        for admin in (repo / ".git" / "worktrees").iterdir():
            set_in(admin / "config.worktree", "core.worktree", str(victim))
        moved = [repo, best, cand]
    for wt in moved:  # live: plain git works on the victim's folder now
        assert plain(wt, "rev-parse", "--show-toplevel").stdout.strip() == str(victim)
    # the loop's calls on the user's repository
    assert gitops.toplevel(repo) == repo and gitops.dirty_tracked(repo) == []
    assert gitops.head(repo) == base and gitops.branch_sha(repo, BRANCH) == base
    (cand / "junk.tmp").write_text("junk\n")
    (cand / "build").mkdir()
    (cand / "build" / "x.o").write_text("obj\n")
    assert gitops.changed_files(cand, base) == ["junk.tmp"]
    gitops.remove_untracked(cand)
    assert gitops.remove_ignored(cand) == ["build/"]
    assert not (cand / "junk.tmp").exists() and not (cand / "build").exists()
    edit_candidate(cand)
    assert gitops.changed_files(cand, base) == [
        "README.md",
        "kernel.py",
        "new.py",
        "notes.txt",
        "plain.bin",
        "weird.dat",
    ]
    gitops.stage_all_tree(cand)
    sha = gitops.commit(cand, "keep")
    gitops.reset_clean(best, sha)
    gitops.reset_clean(cand, base, detach=True)
    assert (cand / "kernel.py").read_text() == KERNEL and (best / "kernel.py").read_text() == FAST
    assert not (cand / "new.py").exists() and (best / "new.py").exists()
    shutil.rmtree(cand)  # and a worktree re-created from the user's repository
    assert gitops.ensure_worktree(repo, cand, branch=None, commit=sha) is True
    assert (cand / "new.py").exists()
    assert victim_intact(victim)


def test_git_variables_in_kopts_environment_redirect_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plant = Plant(tmp_path)
    repo, best, cand, base = kopt_repo(tmp_path)
    other = make_repo(tmp_path / "other")
    other_head = gitops.head(other)
    victim = victim_folder(tmp_path)
    hooks = plant.hooks(tmp_path / "env-hooks", "env")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(victim))
    monkeypatch.setenv("GIT_COMMON_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "foreign.index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(other / ".git" / "objects"))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", hooks)
    monkeypatch.setenv("GIT_CONFIG_KEY_1", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_1", plant.prog("env.fsmonitor"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'diff.external'='{plant.prog('env.params.external')}'")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", plant.prog("env.GIT_EXTERNAL_DIFF"))
    monkeypatch.setenv("GIT_PAGER", plant.prog("env.GIT_PAGER", "filter"))
    monkeypatch.setenv("GIT_EDITOR", plant.prog("env.GIT_EDITOR"))
    monkeypatch.setenv("GIT_SSH_COMMAND", plant.prog("env.GIT_SSH_COMMAND"))
    monkeypatch.setenv("GIT_ASKPASS", plant.prog("env.GIT_ASKPASS"))
    monkeypatch.setenv("GIT_PYTHON_GIT_EXECUTABLE", plant.prog("env.GIT_PYTHON_GIT_EXECUTABLE"))
    monkeypatch.setenv("GIT_EXEC_PATH", str(tmp_path / "no-exec-path"))
    monkeypatch.setenv("GIT_LITERAL_PATHSPECS", "0")
    monkeypatch.setenv("GIT_ICASE_PATHSPECS", "1")
    redirected = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=cand, capture_output=True, text=True)
    assert redirected.stdout.strip() == str(other / ".git")  # live: plain git works on the other repository
    edit_candidate(cand)
    assert gitops.changed_files(cand, base) == [
        "README.md",
        "kernel.py",
        "new.py",
        "notes.txt",
        "plain.bin",
        "weird.dat",
    ]
    assert "+HELPER = 1" in gitops.diff(cand, base)
    gitops.stage_all_tree(cand)
    sha = gitops.commit(cand, "keep")
    gitops.reset_clean(best, sha)
    assert gitops.branch_sha(repo, BRANCH) == sha and (best / "new.py").exists()
    gitops.reset_clean(cand, sha, detach=True)
    for var in [v for v in os.environ if v.startswith("GIT_")]:
        monkeypatch.delenv(var)
    assert gitops.head(other) == other_head and plain(other, "status", "--porcelain").stdout == ""
    assert plain(other, "cat-file", "-e", sha).returncode != 0  # no object of kopt's went there
    assert victim_intact(victim) and not (tmp_path / "foreign.index").exists()
    assert plant.fired() == []
    assert not hasattr(gitops, "git")  # GitPython (which starts from os.environ) is not used


@pytest.mark.parametrize(
    "target", ["other-repo-worktree", "main-git-dir", "best-admin", "fake-admin-inside", "missing", "folder-link"]
)
def test_a_replaced_cand_git_is_refused_then_repaired(tmp_path: Path, target: str) -> None:
    repo, best, cand, base = kopt_repo(tmp_path)
    other = make_repo(tmp_path / "other")
    other_wt = tmp_path / "other-wt"
    assert plain(other, "worktree", "add", "-q", "--detach", str(other_wt)).returncode == 0
    (other_wt / "precious.txt").write_text("untracked, keep me\n")
    other_head = gitops.head(other)
    dotgit = cand / ".git"
    if target == "other-repo-worktree":  # a coherent link into another repository's worktree
        admin = other / ".git" / "worktrees" / "other-wt"
        dotgit.write_text(f"gitdir: {admin}\n")
        (admin / "gitdir").write_text(f"{dotgit}\n")
    elif target == "main-git-dir":  # the user's own checkout: a commit here would move main
        dotgit.write_text(f"gitdir: {repo / '.git'}\n")
    elif target == "best-admin":  # best/'s admin folder: a commit here would move kopt/TAG
        dotgit.write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'best'}\n")
    elif target == "fake-admin-inside":  # a whole fake repository, links coherent, inside cand/
        fake = cand / ".fake"
        shutil.copytree(other / ".git", fake)
        (fake / "worktrees" / "cand").mkdir(parents=True)
        for f in ("HEAD", "commondir", "gitdir"):
            (fake / "worktrees" / "cand" / f).write_text(
                {"HEAD": other_head, "commondir": "../..", "gitdir": str(dotgit)}[f] + "\n"
            )
        dotgit.write_text(f"gitdir: {fake / 'worktrees' / 'cand'}\n")
    elif target == "missing":
        dotgit.unlink()
    else:  # cand/ itself replaced by a link to the other worktree
        shutil.rmtree(cand)
        cand.symlink_to(other_wt)
    if not cand.is_symlink():
        (cand / "kernel.py").write_text(FAST)
    for op in (
        lambda: gitops.head(cand),
        lambda: gitops.changed_files(cand, base),
        lambda: gitops.diff(cand, base),
        lambda: gitops.stage_all_tree(cand),
        lambda: gitops.commit(cand, "x"),
        lambda: gitops.reset_clean(cand, base, detach=True),
        lambda: gitops.remove_untracked(cand),
        lambda: gitops.unstaged_changes(cand),
        lambda: gitops.tree_listing(cand, base),
    ):
        with pytest.raises(KoptError, match="cand"):
            op()
    assert gitops.clear_stale_lock(cand) == []
    assert gitops.ensure_worktree(repo, cand, branch=None, commit=base) is True
    assert gitops.head(cand) == base and (cand / "kernel.py").read_text() == KERNEL
    assert gitops.ensure_worktree(repo, cand, branch=None, commit=base) is False
    edit_candidate(cand)
    gitops.stage_all_tree(cand)
    sha = gitops.commit(cand, "keep")
    gitops.reset_clean(best, sha)
    assert gitops.branch_sha(repo, BRANCH) == sha
    assert plain(repo, "rev-parse", "main").stdout.strip() == base  # the user's branch never moved
    assert gitops.head(other) == other_head and (other_wt / "precious.txt").exists()
    assert (other_wt / "kernel.py").read_text() == KERNEL


def test_head_turned_to_the_users_branch_moves_nothing(tmp_path: Path) -> None:
    repo, best, cand, base = kopt_repo(tmp_path)
    # cand/'s HEAD made to follow main (which sits at BEST): a keep must not move main
    (repo / ".git" / "worktrees" / "cand" / "HEAD").write_text("ref: refs/heads/main\n")
    assert gitops.head(cand) == base
    edit_candidate(cand)
    gitops.stage_all_tree(cand)
    sha = gitops.commit(cand, "keep")
    assert plain(repo, "rev-parse", "main").stdout.strip() == base
    assert gitops.head(cand) == sha
    # best/'s HEAD turned to main: a reset there would move main; refused, then repaired
    (repo / ".git" / "worktrees" / "best" / "HEAD").write_text("ref: refs/heads/main\n")
    with pytest.raises(KoptError, match="refs/heads/main"):
        gitops.reset_clean(best, sha)
    assert gitops.ensure_worktree(repo, best, branch=BRANCH, commit=base) is True
    gitops.reset_clean(best, sha)
    assert gitops.branch_sha(repo, BRANCH) == sha
    assert plain(repo, "rev-parse", "main").stdout.strip() == base


def test_index_flags_and_forged_stat_hide_nothing(tmp_path: Path) -> None:
    repo, best, cand, base = kopt_repo(tmp_path)
    # skip-worktree and assume-unchanged: plain git status stops seeing the edits
    for path, flag in (("bench.py", "--skip-worktree"), ("kernel.py", "--assume-unchanged")):
        assert plain(cand, "update-index", flag, path).returncode == 0
    (cand / "bench.py").write_text("print('patched timer')\n")
    (cand / "kernel.py").write_text(FAST)
    assert plain(cand, "status", "--porcelain").stdout == ""  # live: hidden from plain git
    assert gitops.dirty_tracked(cand) == ["bench.py", "kernel.py"]
    assert gitops.unstaged_changes(cand) == ["bench.py", "kernel.py"]
    assert gitops.changed_files(cand, base) == ["bench.py", "kernel.py"]
    tree = gitops.stage_all_tree(cand)
    assert (
        plain(cand, "ls-tree", tree, "bench.py").stdout.split()[2]
        == plain(cand, "hash-object", "bench.py").stdout.strip()
    )
    gitops.reset_clean(cand, base, detach=True)
    assert (cand / "bench.py").read_text() == BASE_FILES["bench.py"] and gitops.index_flagged(cand) == []
    # forged stat: the config says trust only mtime and size; the edit keeps both (the file is
    # older than the index, so git does not treat it as racily clean)
    set_in(repo / ".git" / "config", "core.trustctime", "false")
    set_in(repo / ".git" / "config", "core.checkStat", "minimal")
    past = time.time_ns() - 100 * 10**9
    os.utime(cand / "kernel.py", ns=(past, past))
    plain(cand, "status")  # records the stat data
    (cand / "kernel.py").write_text(KERNEL.replace("x\n", "y\n"))  # same size
    os.utime(cand / "kernel.py", ns=(past, past))
    assert plain(cand, "status", "--porcelain").stdout == ""  # live: hidden from plain git
    # (dirty_tracked reads the worktree's index: a quick check, not the one kopt relies on)
    assert gitops.changed_files(cand, base) == ["kernel.py"]
    assert [p for _, p in gitops.tree_listing(cand, base).changed] == ["kernel.py"]
    gitops.reset_clean(cand, base, detach=True)
    assert (cand / "kernel.py").read_text() == KERNEL
    # a sparse checkout planted: a reset must still write every file
    set_in(repo / ".git" / "config", "core.sparseCheckout", "true")
    info = repo / ".git" / "worktrees" / "cand" / "info"
    info.mkdir(exist_ok=True)
    (info / "sparse-checkout").write_text("/README.md\n")
    (cand / "kernel.py").write_text(FAST)
    gitops.reset_clean(cand, base, detach=True)
    assert (cand / "kernel.py").read_text() == KERNEL and (cand / "bench.py").exists()


def test_nested_repositories_never_run_their_own_config(tmp_path: Path) -> None:
    plant = Plant(tmp_path)
    repo, best, cand, base = kopt_repo(tmp_path)
    nested = cand / "vendor"
    nested.mkdir()
    plain(nested, "init", "-q")
    (nested / "f.py").write_text("x = 1\n")
    (nested / ".gitattributes").write_text("* filter=nevil diff=nevil\n")
    plain(nested, "add", "-A")
    plain(nested, "commit", "-qm", "n")
    set_in(nested / ".git" / "config", "filter.nevil.clean", plant.prog("nested.clean", "filter"))
    set_in(nested / ".git" / "config", "filter.nevil.smudge", plant.prog("nested.smudge", "filter"))
    set_in(nested / ".git" / "config", "core.fsmonitor", plant.prog("nested.fsmonitor"))
    plant.hooks(nested / ".git" / "hooks", "nested")
    (nested / "f.py").write_text("x = 2\n")
    os.utime(nested / "f.py", (0, 0))
    (cand / "kernel.py").write_text(FAST)
    gitops.stage_all_tree(cand)  # stages vendor as a gitlink (the treecheck reports it)
    assert gitops.changed_files(cand, base) == ["kernel.py", "vendor"]
    gitops.diff(cand, base)
    gitops.dirty_tracked(cand)
    gitops.unstaged_changes(cand)
    gitops.tree_listing(cand, base)
    sha = gitops.commit(cand, "keep")
    gitops.reset_clean(cand, base, detach=True)
    assert not nested.exists()
    # the gitlink kept in BEST_COMMIT, a hostile repository planted at its path in best/
    gitops.reset_clean(best, sha)
    plain(best / "vendor", "init", "-q")
    (best / "vendor" / "f.py").write_text("x = 1\n")
    (best / "vendor" / ".gitattributes").write_text("* filter=nevil diff=nevil\n")
    plain(best / "vendor", "add", "-A")
    plain(best / "vendor", "commit", "-qm", "n")
    set_in(best / "vendor" / ".git" / "config", "filter.nevil.clean", plant.prog("nested.best.clean", "filter"))
    (best / "vendor" / "f.py").write_text("x = 3\n")
    os.utime(best / "vendor" / "f.py", (0, 0))
    assert plain(best, "status", "--porcelain").returncode == 0 and plant.fired() == ["nested.best.clean"]  # live
    (plant.markers / "nested.best.clean").unlink()
    gitops.dirty_tracked(best)
    gitops.untracked(best, ignored_too=True)
    gitops.unstaged_changes(best)
    gitops.restore_from_index(best)
    gitops.tree_listing(best, sha)
    gitops.reset_clean(best, sha)
    assert plant.fired() == []


def test_a_tracked_folder_replaced_by_a_link_is_not_written_through(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "kernels").mkdir()
    (repo / "kernels" / "k.py").write_text("k = 1\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-qm", "kernels")
    ws = tmp_path / "ws"
    gitops.add_worktrees(repo, BRANCH, ws / "best", ws / "cand", gitops.head(repo))
    cand, base = ws / "cand", gitops.head(repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "k.py").write_text("outside's own\n")
    (outside / "other.txt").write_text("keep\n")
    shutil.rmtree(cand / "kernels")
    (cand / "kernels").symlink_to(outside)
    assert gitops.changed_files(cand, base) == ["kernels", "kernels/k.py"]
    assert ("D", "kernels/k.py") in gitops.tree_listing(cand, base).changed
    gitops.reset_clean(cand, base, detach=True)
    assert not (cand / "kernels").is_symlink() and (cand / "kernels" / "k.py").read_text() == "k = 1\n"
    assert (outside / "k.py").read_text() == "outside's own\n" and (outside / "other.txt").exists()


def test_paths_are_literal_never_pathspec_magic(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for name in (":(glob)*", "*", "a b.py", "line\nbreak.py", "ünï.py"):
        (repo / name).write_text(f"{name}\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-qm", "odd names")
    head = gitops.head(repo)
    assert set(gitops.tree_entries(repo, head, ["*"])) == {"*"}
    assert set(gitops.tree_entries(repo, head, [":(glob)*"])) == {":(glob)*"}
    assert set(gitops.tree_entries(repo, head, ["line\nbreak.py", "ünï.py"])) == {"line\nbreak.py", "ünï.py"}


def test_an_old_git_that_would_ignore_the_overrides_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo")
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'git version 2.25.1'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(KoptError, match=r"is git 2\.25; kopt needs git 2\.31 or newer"):
        gitops.head(repo)


def test_a_fake_repository_inside_the_worktree_is_refused_even_unbound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh engine process (nothing bound yet, e.g. the recovery that runs before the
    worktrees are synced) still refuses a coherent fake admin folder planted inside cand/."""
    repo, _, cand, base = kopt_repo(tmp_path)
    fake = cand / ".fake"
    shutil.copytree(repo / ".git", fake, ignore=shutil.ignore_patterns("worktrees"))
    (fake / "worktrees" / "cand").mkdir(parents=True)
    for name, text in (("HEAD", base), ("commondir", "../.."), ("gitdir", str(cand / ".git"))):
        (fake / "worktrees" / "cand" / name).write_text(text + "\n")
    (cand / ".git").write_text(f"gitdir: {fake / 'worktrees' / 'cand'}\n")
    monkeypatch.setattr(gitops.guards, "_TRUSTED", {})
    with pytest.raises(KoptError, match="inside the worktree itself"):
        gitops.head(cand)


def test_fifos_in_place_of_git_files_do_not_hang(tmp_path: Path) -> None:
    repo, best, cand, base = kopt_repo(tmp_path)
    head_file = repo / ".git" / "worktrees" / "cand" / "gitdir"
    head_file.unlink()
    os.mkfifo(head_file)
    started = time.monotonic()
    with pytest.raises(KoptError, match="not a worktree's admin folder"):
        gitops.head(cand)
    (cand / ".git").unlink()
    os.mkfifo(cand / ".git")
    with pytest.raises(KoptError, match="replaced"):
        gitops.head(cand)
    with pytest.raises(KoptError, match="gitdir is not a regular file"):  # `worktree prune` would hang on it
        gitops.ensure_worktree(repo, cand, branch=None, commit=base)
    assert time.monotonic() - started < 5
    head_file.unlink()
    assert gitops.ensure_worktree(repo, cand, branch=None, commit=base) is True
    assert gitops.head(cand) == base


def test_the_police_stage_the_candidate_once_for_its_three_readings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """changed_files, diff and scan_diff each staged the whole tree on a scratch index of its
    own; the police's step stages it once (gitops.staged_change) and reads the same answers,
    the ignored files it forces joining the patches but not the list of changed files."""
    repo, best, cand, base = kopt_repo(tmp_path)
    edit_candidate(cand)
    (cand / "kept.log").write_text("an ignored file the candidate may have\n")
    expected = (
        gitops.changed_files(cand, base),
        gitops.diff(cand, base, force=["kept.log"]),
        gitops.scan_diff(cand, base, force=["kept.log"]),
    )
    assert "kept.log" not in expected[0] and "b/kept.log" in expected[1] and "b/kept.log" in expected[2][0]
    calls = git_calls(monkeypatch)
    scratch = gitops.invoke.private_dir()
    # this process's private folder: an engine forked by an earlier test of this worker and
    # killed mid-staging may have left one of its own there
    before = set(scratch.glob("scratch-*"))
    with gitops.staged_change(cand, base, force=["kept.log"]) as staged:
        assert len(set(scratch.glob("scratch-*")) - before) == 1  # one scratch index while staged
        assert (staged.changed, staged.diff(), staged.scan_diff()) == expected
        assert staged.diff(max_bytes=10) == expected[1][:10]
    assert calls == ["read-tree", "add", "diff", "add", "diff", "diff"]  # was 3 read-trees, 5 adds
    assert set(scratch.glob("scratch-*")) == before  # the scratch index removed


def test_a_keep_commits_the_tree_it_recorded_without_staging_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keeper.keep records stage_tracked_tree's tree, then commits: that tree, as it is (the
    commit staged the candidate a second time, six git calls, with nothing run between)."""
    repo, best, cand, base = kopt_repo(tmp_path)
    edit_candidate(cand)
    gitops.stage_all_tree(cand)
    tree = gitops.stage_tracked_tree(cand)
    calls = git_calls(monkeypatch)
    sha = gitops.commit(cand, "kopt: v1 keep", tree=tree)
    assert calls == ["rev-parse", "commit-tree", "update-ref"]
    assert gitops.commit_info(repo, sha) == ([base], tree) and gitops.head(cand) == sha
    assert gitops.branch_sha(repo, BRANCH) == base


def test_a_reset_copies_kopts_reference_index_of_the_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reset rebuilds the worktree's index from the tree (read-tree, then a refresh that
    rehashes every file). Where kopt holds a reference index of that tree for the worktree
    (the tree check's: read-tree'd and refreshed by kopt only), a copy of it is that index:
    no flag, stat data git recorded against these files. Whatever changed since is restored."""
    repo, best, cand, base = kopt_repo(tmp_path)
    assert not gitops.tree_listing(cand, base).changed  # the reference, refreshed
    before = os.stat(cand / "kernel.py")
    (cand / "kernel.py").write_text(KERNEL.replace("x\n", "y\n"))  # same size, mtime set back
    os.utime(cand / "kernel.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert plain(cand, "update-index", "--skip-worktree", "bench.py").returncode == 0
    (cand / "bench.py").write_text("print('patched timer')\n")
    (cand / "junk.log").write_text("ignored\n")
    (cand / "new.py").write_text("HELPER = 1\n")
    calls = git_calls(monkeypatch, listings=False)  # the config's listing: once per worktree
    gitops.reset_clean(cand, base, detach=True)
    assert calls == ["update-ref", "reset", "clean"]  # no read-tree, no refresh
    assert (cand / "kernel.py").read_text() == KERNEL and (cand / "bench.py").read_text() == BASE_FILES["bench.py"]
    assert not (cand / "junk.log").exists() and not (cand / "new.py").exists()
    assert gitops.index_flagged(cand) == [] and plain(cand, "status", "--porcelain").stdout == ""
    assert not (repo / ".git" / "worktrees" / "cand" / "index.lock").exists()
    # a tree kopt holds no reference of for this worktree: read-tree and refresh, as always
    edit_candidate(cand)
    gitops.stage_all_tree(cand)
    sha = gitops.commit(cand, "keep")
    calls.clear()
    gitops.reset_clean(best, sha)
    assert calls == ["read-tree", "update-index", "reset", "clean"]
    assert (best / "kernel.py").read_text() == FAST
    # two references kept per worktree: back to base, its reference copied again
    gitops.tree_listing(cand, sha)
    calls.clear()
    gitops.reset_clean(cand, base, detach=True)
    assert calls == ["update-ref", "reset", "clean"] and (cand / "kernel.py").read_text() == KERNEL
    # a reference file written by anyone but kopt's own git calls (a forked engine sharing the
    # folder, a process of the user's) is not that reference any more: built again, not copied
    loc = gitops.guards.locate(cand)
    ref = gitops.invoke.reference(loc, gitops.invoke.known_tree(loc, base) or "")
    assert ref is not None
    env = {**plain_env(), "GIT_INDEX_FILE": str(ref.index)}
    subprocess.run(["git", "read-tree", sha], cwd=cand, env=env, check=True)  # another tree's entries
    (cand / "kernel.py").write_text(FAST)
    calls.clear()
    gitops.reset_clean(cand, base, detach=True)
    assert calls == ["update-ref", "read-tree", "update-index", "reset", "clean"]
    assert (cand / "kernel.py").read_text() == KERNEL and not gitops.tree_listing(cand, base).changed


def test_a_commit_named_by_its_hash_is_read_once_and_a_ref_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, best, cand, base = kopt_repo(tmp_path)
    calls = git_calls(monkeypatch)
    first = gitops.commit_info(cand, base)
    assert gitops.commit_info(best, base) == gitops.commit_info(repo, base) == first  # one repository
    assert calls.count("cat-file") == 1
    edit_candidate(cand)
    gitops.stage_all_tree(cand)
    sha = gitops.commit(cand, "keep")
    calls.clear()
    assert gitops.commit_info(cand, "HEAD") == ([base], gitops.commit_info(cand, sha)[1])
    assert gitops.commit_info(cand, "HEAD")[0] == [base] and calls.count("cat-file") == 3  # HEAD moves: asked each time
