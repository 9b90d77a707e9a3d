"""Creating and starting runs: find a run's workspace, `kopt init` (a workspace for a repo
and its fixed benchmark, the config frozen into it), start the engine detached or run it in
the calling process."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import config, daemon
from kopt_supervisor.engine.errors import BadInput, KoptError
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
    warnings: tuple[str, ...] = ()
    """What the user should know before the first run (one line each; also in run.db's events)."""


def init_run(
    root: Path,
    tag: str,
    repo: str | Path,
    *,
    config_file: str | Path | None = None,
    bench: str | None = None,
    propose: dict[str, str] | None = None,
) -> Created:
    """`kopt init`: a workspace for `repo` (any directory inside a git work tree) with the
    config frozen into it. The config is `config_file`, else REPO/kopt.toml; `bench`
    overrides its [target].bench (with no config file at all, `propose_config` writes one
    from the bench's own output first). A proposer whose program is not on PATH is refused
    here, not at iteration 1. `propose`: [propose] keys from the command line (--propose-command,
    --agent), over the file's."""
    from kopt_supervisor.engine import gitops
    from kopt_supervisor.engine.loop import write_initial_projections
    from kopt_supervisor.engine.propose.agents import check_agent

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
    cfg = (
        _with_bench(text, bench, str(cfg_path), propose)
        if bench or propose
        else config.loads(text, source=str(cfg_path))
    )
    missing = check_agent(cfg)
    if missing:
        raise BadInput(missing)
    frozen = f"# frozen by `kopt init` from {cfg_path if cfg_path.exists() else 'defaults'}\n" + config.dumps(cfg)
    start, untracked = _untracked_start(top, cfg.target.untrack)
    ws, _, commit = create_workspace(root, tag, top, frozen, config_source=str(cfg_path), start=start)
    if untracked:
        with ws.open_store() as store:
            store.event(
                "init",
                f"baseline {commit[:12]}: HEAD without {', '.join(untracked)} ([target].untrack: "
                "files the bench writes; your checkout keeps them)",
            )
    write_initial_projections(ws)
    return Created(ws, commit, init_warnings(ws, top, commit, cfg))


def _untracked_start(top: Path, globs: list[str]) -> tuple[str | None, list[str]]:
    """[target].untrack: a commit of kopt's own on HEAD without the tracked files the globs
    match (nothing in the user's checkout, index or branches changes), and those files;
    (None, []) when there are none."""
    from kopt_supervisor.engine import gitops

    if not globs:
        return None, []
    head = gitops.head(top)
    files = gitops.matching(sorted(gitops.tree_files(top, head)), globs)
    if not files:
        return None, []
    commit = gitops.commit_with_changes(
        top,
        head,
        [(f, None, None) for f in files],
        "kopt: the bench's output files untracked ([target].untrack)\n\n" + "\n".join(files),
    )
    return commit, files


def init_warnings(ws: Workspace, repo: Path, commit: str, cfg: config.Config) -> tuple[str, ...]:
    """`kopt init`'s warnings about the frozen config (each also an event of the run): with no
    [target].sources, the files the bench reads that nothing covers (engine/onboard)."""
    from kopt_supervisor.engine import gitops, onboard
    from kopt_supervisor.engine.loop.police import ALWAYS_PROTECTED

    t = cfg.target
    try:
        tracked = gitops.tree_files(repo, commit)
    except KoptError:
        return ()
    found = [
        w for w in (onboard.sources_warning(repo, t.bench, tracked, [*t.protected, *ALWAYS_PROTECTED], t.sources),) if w
    ]
    if found:
        with ws.open_store() as store:
            for w in found:
                store.event("init", w, level="warn")
    return tuple(found)


def _with_bench(text: str, bench: str | None, source: str, propose: dict[str, str] | None = None) -> config.Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{source}: not valid TOML: {e}") from None
    if bench:
        data.setdefault("target", {})["bench"] = bench
    if propose:
        data.setdefault("propose", {}).update({"kind": "command", **propose})
    cfg: config.Config = config._build(config.Config, data, source, "")
    config.validate(cfg, source)
    return cfg


def check_proposer(ws: Workspace, proposer: str) -> None:
    """BadInput when the run's config cannot drive `proposer` (checked before detaching, so
    the engineer sees the reason instead of a crashed engine)."""
    from kopt_supervisor.engine.propose import make_proposer

    make_proposer(ws.load_config(), proposer)


def check_sandbox(ws: Workspace, *, proposer: str | None = None, no_sandbox: bool = False, demo: bool = False) -> str:
    """The run's sandbox rule, before anything detaches: a one-line BadInput when bubblewrap
    does not work here and the user did not pass --no-sandbox (nor is this `kopt demo`'s own
    start on its demo workspace); else what the run will say."""
    from kopt_supervisor.engine import sandbox

    kind = proposer or ws.load_config().propose.kind
    with ws.open_store(readonly=True) as store:
        demo = demo and isinstance(store.get("demo"), dict)
    return sandbox.start_rule(sandbox.probe(), proposer_kind=kind, no_sandbox=no_sandbox, demo=demo).summary


def start_detached(
    ws: Workspace,
    *,
    proposer: str | None = None,
    max_iters: int | None = None,
    no_sandbox: bool = False,
    demo: bool = False,
) -> int:
    """Start the run's engine in its own session (it survives the terminal); its pid.
    `demo`: `kopt demo`'s own start (engine/sandbox/support.py start_rule)."""
    check_sandbox(ws, proposer=proposer, no_sandbox=no_sandbox, demo=demo)
    return daemon.start_detached(ws, proposer=proposer, max_iters=max_iters, no_sandbox=no_sandbox, demo=demo)


def run_foreground(
    ws: Workspace, *, proposer: str | None = None, max_iters: int | None = None, no_sandbox: bool = False
) -> int:
    """Run the engine in this process, its log on stdout, until the run stops or `max_iters`
    candidate iterations ended: 0 when it stopped for a stated reason, 1 when it crashed."""
    return daemon.run_engine(ws, proposer=proposer, max_iters=max_iters, log_to_stdout=True, no_sandbox=no_sandbox)


def propose_config(
    repo: str | Path,
    bench: str,
    *,
    log_dir: Path,
    answers: list[str] | None = None,
    ask: Callable[[Any], str] | None = None,
    no_sandbox: bool = False,
    log: Callable[[str], None] = lambda m: None,
    propose: dict[str, str] | None = None,
) -> tuple[Path, str]:
    """`kopt init --bench CMD` where the repo has no kopt.toml: run the bench (through the GPU
    gate, confined as candidate code is) in a copy of HEAD's tracked files, never in the
    user's checkout (engine/onboard/scratch.py), find its table and write a commented
    kopt.toml proposing the metric, correctness rule, configs, classes, protected files
    (engine/onboard). Questions the output leaves open are `ask`ed (None: a one-line BadInput
    naming the candidates and the --answer to give). The measured run and the proposal are
    kept as a draft in `log_dir` (draft/): the same bench at the same HEAD is not run again.
    `propose`: [propose] keys from the command line (kind, command, agent). Returns the
    proposed file (in the draft, never in the repo) and its text."""
    import tempfile

    from kopt_supervisor.engine import gitops, onboard, sandbox
    from kopt_supervisor.engine.config import GpuConfig
    from kopt_supervisor.engine.gpu.backends import open_backend
    from kopt_supervisor.engine.gpu.gate import Gate
    from kopt_supervisor.engine.onboard import scratch as scratch_mod

    top = gitops.toplevel(Path(repo).expanduser().resolve())
    if (top / "kopt.toml").exists():
        raise BadInput(
            f"{top / 'kopt.toml'}: exists already (kopt init uses it; --bench only overrides its [target].bench)"
        )
    commit = gitops.head(top)
    draft = log_dir / "draft"
    run = scratch_mod.load_draft(draft, top, bench, commit)
    if run is not None:
        log(
            f"reusing the bench run measured {scratch_mod.measured_at(draft)} at {commit[:12]} ({draft}; delete it "
            "to measure again)"
        )
    else:
        support = sandbox.probe()
        sandbox.start_rule(support, proposer_kind="none", no_sandbox=no_sandbox)
        with tempfile.TemporaryDirectory(prefix="kopt-init-") as tmp:
            scratch = Path(tmp)
            gate = Gate(GpuConfig(), open_backend("auto"), owner=f"kopt init {top}")

            def run_bench(cmd: str, cwd: Path) -> tuple[int, Path, list[Path]]:
                decision = gate.acquire()  # an idle GPU, as every timed run gets
                log(f"running the bench in a copy of {top} at {commit[:12]} ({decision.note or 'no GPU'})")
                before = onboard.tree_stamps(cwd)
                jail = (
                    None
                    if no_sandbox
                    else sandbox.for_bench(  # the bench may write only in the copy
                        workspace=scratch / "ws",
                        cache=sandbox.cache_dir(scratch / "ws", "init", "0" * 40),
                        writable_trees=[cwd],
                        bwrap=support.bwrap or sandbox.BWRAP,
                    )
                )
                from kopt_supervisor.engine import runner

                res = runner.run(
                    cmd, cwd=cwd, log_dir=log_dir, name="init_bench", timeout_s=900, env={**decision.env}, confine=jail
                )
                return (
                    (res.returncode if res.returncode is not None else -1),
                    res.stdout_path,
                    onboard.written_since(cwd, before),
                )

            try:
                run = scratch_mod.run_in_scratch(top, commit, bench, run_bench, scratch)
                if run.untracked:
                    log(
                        f"the bench wrote tracked file(s) {', '.join(run.untracked)}: ran it again without them, "
                        "so they hold this run's rows only"
                    )
                if run.returncode == 0:  # kept for the next attempt (a failed run is measured again)
                    run = scratch_mod.save_draft(run, draft, commit)
                run = replace(run, repo=top)  # the copy goes: the static scan reads the checkout (HEAD's files)
            finally:
                gate.close()
    proposal = onboard.settle(run, onboard.answers_from(answers or []), ask)
    if propose:
        proposal.sections["propose"] = {"kind": "command", **propose}
        proposal.comments["propose.kind"] = "from the command line (--propose-command / --agent)"
    text = proposal.text()
    target = onboard.write(proposal, draft / "kopt.toml", overwrite=True)
    return target, text


def doctor(ws: Workspace | None = None) -> dict[str, Any]:
    """`kopt doctor`: what this machine offers kopt (bubblewrap, user namespaces, GPU device
    nodes and backends, profilers, git, Python) and, for a run, whether its proposer's
    program is there."""
    from kopt_supervisor.engine import doctor as doctor_mod
    from kopt_supervisor.engine.propose.agents import check_agent

    report = doctor_mod.report()
    if ws is not None:
        missing = check_agent(ws.load_config())
        report["proposer"] = {"run": ws.tag, "ok": missing is None, "problem": missing}
    return report


def format_doctor(report: dict[str, Any]) -> str:
    from kopt_supervisor.engine import doctor as doctor_mod

    text = doctor_mod.format_text(report)
    proposer = report.get("proposer")
    if proposer:
        text += (
            f"\nproposer of run {proposer['run']}: "
            + ("its program is on PATH" if proposer["ok"] else f"MISSING: {proposer['problem']}")
            + "\n"
        )
    return text
