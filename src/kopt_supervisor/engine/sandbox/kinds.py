"""The two kinds of confinement kopt runs, and the rules on the paths they are given:
`for_proposer` (a `command` proposer: writes cand/ and its plan, a private git copy) and
`for_bench` (candidate or best code: its trees, outputs and per-tree cache). Extra paths
from kopt.toml or a preset are resolved and refused where they would reach what the sandbox
hides, a system folder, or what stays read-only inside a writable one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.sandbox import bytecode
from kopt_supervisor.engine.sandbox.confinement import (
    BASE_ENV,
    BWRAP,
    PROPOSER_CACHE,
    SANDBOX_HOME,
    SYSTEM_DIRS,
    UNSET_ENV,
    Confinement,
    cache_env,
)
from kopt_supervisor.engine.sandbox.host import (
    _host_hidden,
    gpu_devices,
    linked_worktree_git,
    python_site_dirs,
)
from kopt_supervisor.engine.sandbox.scratch import SCRATCH


def for_proposer(
    *,
    worktree: Path,
    workspace: Path,
    prompt: Path,
    plan: Path,
    inputs: Sequence[Path] = (),
    outputs: Sequence[Path] = (),
    writable: Sequence[str | Path] = (),
    readable: Sequence[str | Path] = (),
    hidden: Sequence[str | Path] = (),
    network: bool = True,
    devices: Sequence[Path] | None = None,
    sockets: Sequence[Path] | None = None,
    writable_key: str = "[propose].writable",
    bwrap: str = BWRAP,
) -> Confinement:
    """A `command` proposer: writes `worktree` (cand/), `plan` and its `outputs` folders
    (e.g. logs/vN/agent/) and the extra `writable` paths (from [propose].writable and
    the agent's preset; `~` allowed); reads `prompt` and the other workspace files in
    `inputs` (the context pack's JSON); sees nothing else of `workspace`.
    Its git metadata is a private copy (git add/diff/commit work; kopt's branch refs,
    packed-refs, config and hooks stay read-only). Network on unless told otherwise.
    `devices`/`sockets` default to what the machine has; `bwrap` is the path `probe()` found."""
    ws = _real(workspace)
    tree = _inside(ws, worktree, "the candidate worktree")
    plan_r = _inside(ws, plan, "the plan file")
    outs = [_inside(ws, o, "a proposer output folder") for o in outputs]
    hide = [ws, *_hidden_extras(hidden)]
    extras = _extra_paths(writable, hide, writable_key)
    git = linked_worktree_git(tree)
    protected = [*_dotgit_files([tree]), *_common_dirs([tree]), *python_site_dirs()]
    _refuse_inside_protected(extras, protected, writable_key)
    return Confinement(
        writable=_uniq([tree, plan_r, *outs, *extras]),
        readable=_uniq(
            [
                _real(prompt),
                *(_inside(ws, x, "a proposer input") for x in inputs),
                *_extra_paths(readable, hide, "readable"),
            ]
        ),
        readonly=_uniq(protected),
        hidden=_uniq([*hide, *_host_hidden(sockets)]),
        network=network,
        devices=tuple(gpu_devices() if devices is None else (Path(d) for d in devices)),
        env=tuple({**BASE_ENV, **cache_env(PROPOSER_CACHE)}.items()),
        unset_env=UNSET_ENV,
        private_git=git,
        scratch_root=ws / SCRATCH,
        make_dirs=tuple(outs),
        make_files=(plan_r,),
        writable_key=writable_key,
        bwrap=bwrap,
    )


def for_bench(
    *,
    workspace: Path,
    cache: Path,
    writable_trees: Sequence[Path] = (),
    readonly_trees: Sequence[Path] = (),
    outputs: Sequence[Path] = (),
    writable: Sequence[str | Path] = (),
    readable: Sequence[str | Path] = (),
    hidden: Sequence[str | Path] = (),
    network: bool = False,
    devices: Sequence[Path] | None = None,
    sockets: Sequence[Path] | None = None,
    writable_key: str = "[target].writable",
    bwrap: str = BWRAP,
) -> Confinement:
    """Anything that runs candidate (or best) code: a bench, the profiler, a formatter, the
    ab_command. Sees of `workspace` only the trees it is given (`writable_trees` it may
    write, e.g. the bench's CSV; `readonly_trees` it may not), its `outputs` folders and
    its `cache` (`cache_dir(...)`, writable); gets a fresh HOME and /tmp, no network
    unless [target].network, the GPU device nodes. `devices`/`sockets` default to what the
    machine has; `bwrap` is the path `probe()` found."""
    ws = _real(workspace)
    rw_trees = [_real(t) for t in writable_trees]
    ro_trees = [_real(t) for t in readonly_trees]
    trees = [*rw_trees, *ro_trees]
    cache_r = _real(cache)
    outs = [_real(o) for o in outputs]
    hide = [ws, *_hidden_extras(hidden)]
    extras = _extra_paths(writable, hide, writable_key)
    protected = [*_dotgit_files(trees), *_common_dirs(trees), *python_site_dirs()]
    _refuse_inside_protected(extras, protected, writable_key)
    env = {
        **BASE_ENV,
        **cache_env(cache_r),
        "XDG_CONFIG_HOME": f"{SANDBOX_HOME}/.config",
        "XDG_DATA_HOME": f"{SANDBOX_HOME}/.local/share",
        "XDG_STATE_HOME": f"{SANDBOX_HOME}/.local/state",
    }
    return Confinement(
        writable=_uniq([*rw_trees, cache_r, *outs, *extras]),
        readable=_uniq([*ro_trees, *_extra_paths(readable, hide, "readable")]),
        readonly=_uniq(protected),
        hidden=_uniq([*hide, *_host_hidden(sockets)]),
        network=network,
        devices=tuple(gpu_devices() if devices is None else (Path(d) for d in devices)),
        home=SANDBOX_HOME,
        env=tuple(env.items()),
        # bytecode goes to the per-tree cache (PYTHONPYCACHEPREFIX): written there, it is read
        # back by the next run of the same tree (a user's PYTHONDONTWRITEBYTECODE would make
        # every run compile its imports from source, torch's included)
        unset_env=(*UNSET_ENV, "PYTHONDONTWRITEBYTECODE"),
        make_dirs=_uniq([cache_r, *outs]),
        writable_key=writable_key,
        bwrap=bwrap,
        library_bytecode=bytecode.shared_dir(),
    )


# ---------------------------------------------------------------------------------------
# Paths
def _real(p: str | Path) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(p))))


def _within(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _inside(ws: Path, p: Path, what: str) -> Path:
    r = _real(p)
    if not _within(r, ws) or r == ws:
        raise BadInput(f"{what} {p} is not inside the run's workspace {ws}")
    return r


def _hidden_extras(values: Sequence[str | Path]) -> list[Path]:
    return [_real(v) for v in values]


def _extra_paths(values: Sequence[str | Path], hidden: Sequence[Path], key: str) -> list[Path]:
    """A user's (or a preset's) extra paths: `~` expanded, absolute, resolved, and never
    inside what the sandbox hides nor a system folder as such."""
    out = []
    for v in values:
        text = str(v)
        expanded = os.path.expanduser(text)
        if not text.strip() or not os.path.isabs(expanded):
            raise BadInput(f"{key}: {text!r} must be an absolute path (or start with ~)")
        r = _real(expanded)
        if str(r) in SYSTEM_DIRS:
            raise BadInput(f"{key}: {text!r} names {r}, which the sandbox keeps as it is; name a folder inside it")
        for h in hidden:
            if _within(r, h):
                raise BadInput(f"{key}: {text!r} lies inside {h}, which a sandboxed process must not see")
        out.append(r)
    return out


def _refuse_inside_protected(extras: Sequence[Path], protected: Sequence[Path], key: str) -> None:
    for r in extras:
        for p in protected:
            if _within(r, p):
                raise BadInput(f"{key}: {r} lies inside {p}, which stays read-only in the sandbox")


def _dotgit_files(trees: Sequence[Path]) -> list[Path]:
    """Each worktree's `.git` pointer file: read-only, so no run re-points it."""
    return [t / ".git" for t in trees if (t / ".git").is_file() and not (t / ".git").is_symlink()]


def _common_dirs(trees: Sequence[Path]) -> list[Path]:
    out = []
    for t in trees:
        g = linked_worktree_git(t)
        if g is not None:
            out.append(g.common)
        elif (t / ".git").is_dir() and not (t / ".git").is_symlink():
            out.append(_real(t / ".git"))
    return out


def _uniq(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(paths))
