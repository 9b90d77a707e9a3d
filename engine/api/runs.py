"""Creating and starting runs: find a run's workspace, `kopt init` (a workspace for a repo
and its fixed benchmark, the config frozen into it), start the engine detached or run it in
the calling process."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine import config, daemon
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.workspace import Workspace, create_workspace, resolve_root, validate_tag


def open_workspace(root: str | Path | None, tag: str) -> Workspace:
    """The existing run `tag` under `root` (None: $KOPT_ROOT or ./workspaces); BadInput when
    the tag is malformed or no such run exists."""
    return Workspace(resolve_root(root), validate_tag(tag)).require()


@dataclass(frozen=True)
class Created:
    workspace: Workspace
    commit: str
    """The target repo's commit the run starts from (its baseline)."""


def init_run(root: Path, tag: str, repo: str | Path, *, config_file: str | Path | None = None,
             bench: str | None = None) -> Created:
    """`kopt init`: a workspace for `repo` (any directory inside a git work tree) with the
    config frozen into it. The config is `config_file`, else REPO/kopt.toml; `bench`
    overrides its [target].bench, and with `bench` no config file is needed at all."""
    from kopt_supervisor.engine import gitops
    from kopt_supervisor.engine.loop import write_initial_projections

    top = gitops.toplevel(Path(repo).expanduser().resolve())
    cfg_path = Path(config_file).expanduser() if config_file else top / "kopt.toml"
    if cfg_path.exists():
        try:
            text = cfg_path.read_text(encoding="utf-8")
        except OSError as e:
            raise BadInput(f"{cfg_path}: cannot read: {e.strerror}") from None
    elif config_file or not bench:
        raise BadInput(f"{cfg_path}: no such config file (write a kopt.toml, see docs/files.md, or pass --config)")
    else:
        text = ""
    cfg = _with_bench(text, bench, str(cfg_path)) if bench else config.loads(text, source=str(cfg_path))
    frozen = f"# frozen by `kopt init` from {cfg_path if cfg_path.exists() else 'defaults'}\n" + config.dumps(cfg)
    ws, _, commit = create_workspace(root, tag, top, frozen, config_source=str(cfg_path))
    write_initial_projections(ws)
    return Created(ws, commit)


def _with_bench(text: str, bench: str, source: str) -> config.Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{source}: not valid TOML: {e}") from None
    data.setdefault("target", {})["bench"] = bench
    cfg: config.Config = config._build(config.Config, data, source, "")
    config.validate(cfg, source)
    return cfg


def check_proposer(ws: Workspace, proposer: str) -> None:
    """BadInput when the run's config cannot drive `proposer` (checked before detaching, so
    the engineer sees the reason instead of a crashed engine)."""
    from kopt_supervisor.engine.propose import make_proposer

    make_proposer(ws.load_config(), proposer)


def start_detached(ws: Workspace, *, proposer: str | None = None, max_iters: int | None = None) -> int:
    """Start the run's engine in its own session (it survives the terminal); its pid."""
    return daemon.start_detached(ws, proposer=proposer, max_iters=max_iters)


def run_foreground(ws: Workspace, *, proposer: str | None = None, max_iters: int | None = None) -> int:
    """Run the engine in this process, its log on stdout, until the run stops or `max_iters`
    candidate iterations ended: 0 when it stopped for a stated reason, 1 when it crashed."""
    return daemon.run_engine(ws, proposer=proposer, max_iters=max_iters, log_to_stdout=True)
