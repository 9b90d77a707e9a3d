"""Every git call kopt makes, in one place, and none of them runs a program a repository names.

The run's branch `kopt/TAG` is checked out in `best/` and always sits at BEST_COMMIT; the
candidate worktree `cand/` is a detached HEAD that the proposer edits. A keep is a commit
made in `cand/` (parent BEST_COMMIT, HEAD moved without touching any branch) to which
`best/`'s branch is then fast-forwarded by a reset.

git without surprises. A proposer controls the candidate's tree and may reach the repository's
git directory (its config, config.worktree, index, HEAD, the worktree's `.git` file). So every
call here:

- runs `git` directly (subprocess) with an environment of kopt's making: no `GIT_*` variable
  of kopt's own environment passes (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_CONFIG_*,
  GIT_EXEC_PATH, GIT_SSH_COMMAND, ...), editors, pager and askpass are disabled, replace refs
  are ignored, system attributes are not read;
- names the repository explicitly (`--git-dir`, `--work-tree`, GIT_COMMON_DIR), found from
  the worktree's `.git` file and checked both ways (the admin folder's `gitdir` must point back
  at this worktree, its `commondir` at the repository kopt made it in): `core.worktree`,
  `core.bare`, a planted `commondir` or a `.git` file redirected to another repository never
  move a reset or a clean onto another folder;
- overrides, at the command scope (GIT_CONFIG_COUNT/KEY/VALUE, which beats every config
  file and carries into any git that git starts), every setting that runs a program: fixed
  keys (hooks, fsmonitor, signing and its programs, editors, pager, askpass, ssh command,
  proxies, credential helpers, diff.external, transports, auto-gc, attributes file, ...) and
  per-name keys (filter.<name>.clean/smudge/process, diff.<name>.textconv/command,
  merge.<name>.driver, credential.<url>.helper, remote.<name>.uploadpack, pager.<cmd>, and
  any key whose name says it holds a program) for every name found in the config as git
  reads it, includes and worktree config included. That listing is cached per repository
  and re-read when any config file it came from (or an include target) changes;
- never trusts a worktree's index for what it reports or commits: resets, staging and
  commits rebuild the index from a tree first (skip-worktree and assume-unchanged bits,
  forged stat data and sparse patterns do not survive), and diffs are computed on a scratch
  index; paths given to git are literal (no pathspec magic), submodules are never entered.

GitPython is not used: its `Git.execute` starts from `os.environ` (no way to drop a variable)
and its `Repo` reads the config and runs `git cat-file` without these guards.

The rooms, one module each (this package re-exports their public names; a test that
replaces a module-level name patches the module that reads it, e.g. `gitops.invoke._exec`):

- `neutral`: what git may run and the environment it runs in (pure tables);
- `location`: where a worktree's repository is, checked (`locate`, `GitFailure`);
- `invoke`: running git (`run_at`, the config listing cache, kopt's private folder);
- `worktrees`: the repository, `best/` and `cand/` made, repaired and reset;
- `candidate`: what the candidate changes, staging, cleaning and committing it;
- `bundles`: BEST and a candidate carried to a lane on another host;
- `listing`: a tree against a base through kopt's reference index (engine.treecheck);
- `export`: building a branch without a worktree (`kopt export`).
"""

from __future__ import annotations

from kopt_supervisor.engine.gitops.bundles import (
    bundle_pair,
    checkout_bundle,
)
from kopt_supervisor.engine.gitops.candidate import (
    changed_files,
    commit,
    diff,
    dirty_tracked,
    index_flagged,
    matching,
    remove_ignored,
    remove_untracked,
    restore_from_index,
    scan_diff,
    stage_all_tree,
    stage_tracked_tree,
    unstaged_changes,
    untracked,
)
from kopt_supervisor.engine.gitops.export import (
    check_branch_name,
    commit_with_changes,
    create_branch,
    diff_paths,
    hash_blob,
    ignored_paths,
    tree_entries,
    tree_files,
)
from kopt_supervisor.engine.gitops.invoke import (
    MIN_GIT,
    TIMEOUT_S,
    git_version,
    private_dir,
    run_at,
)
from kopt_supervisor.engine.gitops.listing import (
    TreeListing,
    ignored_new,
    tree_listing,
)
from kopt_supervisor.engine.gitops.location import (
    GitFailure,
    Location,
    locate,
)
from kopt_supervisor.engine.gitops.neutral import (
    FIXED_ENV,
    FIXED_OVERRIDES,
    KOPT_AUTHOR,
    NO_PROGRAM,
    PER_NAME_OVERRIDES,
    PROGRAM_KEY_SUFFIXES,
    Actor,
    config_overrides,
)
from kopt_supervisor.engine.gitops.worktrees import (
    add_worktrees,
    branch_sha,
    clear_stale_lock,
    commit_info,
    ensure_worktree,
    export_tree,
    head,
    init_repo,
    move_change,
    reset_clean,
    show_file,
    toplevel,
)

__all__ = [
    "Actor",
    "FIXED_ENV",
    "FIXED_OVERRIDES",
    "GitFailure",
    "KOPT_AUTHOR",
    "Location",
    "MIN_GIT",
    "NO_PROGRAM",
    "PER_NAME_OVERRIDES",
    "PROGRAM_KEY_SUFFIXES",
    "TIMEOUT_S",
    "TreeListing",
    "add_worktrees",
    "branch_sha",
    "bundle_pair",
    "changed_files",
    "check_branch_name",
    "checkout_bundle",
    "clear_stale_lock",
    "commit",
    "commit_info",
    "commit_with_changes",
    "config_overrides",
    "create_branch",
    "diff",
    "diff_paths",
    "dirty_tracked",
    "ensure_worktree",
    "export_tree",
    "git_version",
    "hash_blob",
    "head",
    "ignored_new",
    "ignored_paths",
    "index_flagged",
    "init_repo",
    "locate",
    "matching",
    "move_change",
    "private_dir",
    "remove_ignored",
    "remove_untracked",
    "reset_clean",
    "restore_from_index",
    "run_at",
    "scan_diff",
    "show_file",
    "stage_all_tree",
    "stage_tracked_tree",
    "toplevel",
    "tree_entries",
    "tree_files",
    "tree_listing",
    "unstaged_changes",
    "untracked",
]
