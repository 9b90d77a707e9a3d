"""The engine's one door for its clients: the `kopt` command line and the TUI import the
engine only from here (tests/test_import_contracts.py fails otherwise). Each module below
opens with what it holds; its `__all__` is what this door exports from it:

- `run_io`: read a run (`status`, the stable JSON of `kopt status --json`; `RunReader`, the
  TUI's cheap read-only view; `trusted_history`; transcripts) and send it a command (`send`);
- `run_summary`: what a run spent and how it ran (agent spending, timings, sandbox, lanes),
  progress per GPU-hour (`progress` -> `Progress`) and the status JSON read back
  (`status_report` -> `StatusReport`);
- `run_meta`, `iteration_record`: typed views of what a run stores (its meta, an iteration's
  record), read by the tolerant rules of `parse`; `run_meta` also builds the review queue
  (`review_queue` -> `PendingReview`s, `headline_interval`);
- besides, from the engine: `fmt` (the one number formatter), and the types and
  errors these take and return.

This module (below) holds the door's own entry points: creating, starting and serving runs.
Find a run's workspace, `kopt init` (a workspace for a repo and its fixed benchmark, the
config frozen into it), start the engine detached or run it in the calling process, `kopt
doctor`; what the GPU gate sees (`kopt gpus`, and `GpuSampler`: the TUI's own readings judged
by the gate's rules with a run's [gpu] thresholds, without taking a claim); what a run leaves
behind (results.md, `kopt export`'s branch) and this GPU's measured ceilings; `kopt mcp TAG`
(the MCP judge, engine/mcp, and a client's config snippet) and what a candidate worktree
changes for a client that submits it; and `kopt demo`. The modules behind them load only when
asked for: the MCP SDK only when a server starts, so `kopt status` and the TUI never import it.

`kopt demo`: a bundled kernel, a fresh git repo, the `tune` proposer, the whole loop. The
kernel (kernels/<name>: a PyTorch baseline, a Triton solution, its bench, contract and
roofline) is copied into `<root>/.repos/<tag>/` from a deliberately naive configuration and
committed; a workspace is created for it and the engine runs it. On a machine with no GPU
the bench runs the Triton kernel through Triton's interpreter on small shapes, and the run
says so plainly: its timings are CPU timings. The engine never imports the bundled kernels:
the caller (the CLI) hands `prepare_demo` the kernels' names and the function that writes one
into a directory (`kernels.catalog`'s `KERNELS` and `materialize`).
"""

from __future__ import annotations

import shutil
import time
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from kopt_supervisor.engine import BadInput, KoptError, daemon, gitops
from kopt_supervisor.engine import fmt as fmt
from kopt_supervisor.engine.api.iteration_record import *  # noqa: F403
from kopt_supervisor.engine.api.run_io import *  # noqa: F403
from kopt_supervisor.engine.api.run_meta import *  # noqa: F403
from kopt_supervisor.engine.api.run_summary import *  # noqa: F403
from kopt_supervisor.engine.config import Config, GpuConfig
from kopt_supervisor.engine.config.toml_io import _build
from kopt_supervisor.engine.config.toml_io import dumps as dumps_config
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.config.toml_io import validate as validate_config
from kopt_supervisor.engine.daemon import engine_alive as engine_alive
from kopt_supervisor.engine.decide import geomean as geomean
from kopt_supervisor.engine.decide import positive_finite as positive_finite
from kopt_supervisor.engine.decide.confirmation import Confirmation as Confirmation
from kopt_supervisor.engine.decide.external_truth import ExternalTruth as ExternalTruth
from kopt_supervisor.engine.diffscan.findings import Finding as Finding
from kopt_supervisor.engine.gpu import Backend, GpuState, assess
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.claims import ClaimRegistry, claim_key
from kopt_supervisor.engine.gpu.gate import enrich
from kopt_supervisor.engine.mcp import CLIENTS as MCP_CLIENTS
from kopt_supervisor.engine.mcp import Snippet, snippet
from kopt_supervisor.engine.projections import Counters as Counters
from kopt_supervisor.engine.projections import awaiting_review as awaiting_review
from kopt_supervisor.engine.projections import best_commit as best_commit
from kopt_supervisor.engine.projections import best_iteration as best_iteration
from kopt_supervisor.engine.projections import counters as counters
from kopt_supervisor.engine.projections import restart_point_problem as restart_point_problem
from kopt_supervisor.engine.propose.proposer import Citation as Citation
from kopt_supervisor.engine.records import AgentRun as AgentRun
from kopt_supervisor.engine.records import Iteration as Iteration
from kopt_supervisor.engine.records import Phase as Phase
from kopt_supervisor.engine.records import Status as Status
from kopt_supervisor.engine.store import Command as Command
from kopt_supervisor.engine.store import Event as Event
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, create_workspace, resolve_root, validate_tag
from kopt_supervisor.engine.workspace import list_workspaces as list_workspaces


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
    from the bench's own output first). A proposer whose program is not on PATH, or a tune
    params file the repo does not track, is refused here, not at iteration 1 (onboard.config_problem).
    `propose`: [propose] keys from the command line (--propose-command, --agent), over the file's."""
    from kopt_supervisor.engine import onboard
    from kopt_supervisor.engine.history import write_initial_projections

    top = gitops.toplevel(Path(repo).expanduser().resolve())
    cfg_path = Path(config_file).expanduser() if config_file else top / "kopt.toml"
    if cfg_path.exists():
        try:
            text = cfg_path.read_text(encoding="utf-8")
        except OSError as e:
            raise BadInput(f"{cfg_path}: cannot read: {e.strerror}") from None
    elif config_file or not bench:
        how = "--config" if config_file else "write a kopt.toml (docs/files.md), pass --config, or --bench CMD"
        raise BadInput(f"{cfg_path}: no such config file ({how})")
    else:
        text = ""
    cfg = (
        _with_bench(text, bench, str(cfg_path), propose)
        if bench or propose
        else loads_config(text, source=str(cfg_path))
    )
    missing = onboard.config_problem(top, cfg)
    if missing:
        raise BadInput(missing)
    frozen = f"# frozen by `kopt init` from {cfg_path if cfg_path.exists() else 'defaults'}\n" + dumps_config(cfg)
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


def init_warnings(ws: Workspace, repo: Path, commit: str, cfg: Config) -> tuple[str, ...]:
    """`kopt init`'s warnings (onboard.config_warnings), each also an event of the run."""
    from kopt_supervisor.engine import onboard
    from kopt_supervisor.engine.loop.proposal import ALWAYS_PROTECTED

    try:
        tracked = gitops.tree_files(repo, commit)
    except KoptError:
        return ()
    found = onboard.config_warnings(ws.dir, repo, tracked, cfg, always_protected=ALWAYS_PROTECTED)
    if found:
        with ws.open_store() as store:
            for w in found:
                store.event("init", w, level="warn")
    return tuple(found)


def _with_bench(text: str, bench: str | None, source: str, propose: dict[str, str] | None = None) -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{source}: not valid TOML: {e}") from None
    if bench:
        data.setdefault("target", {})["bench"] = bench
    if propose:
        data.setdefault("propose", {}).update({"kind": "command", **propose})
    cfg: Config = _build(Config, data, source, "")
    validate_config(cfg, source)
    return cfg


def check_proposer(ws: Workspace, proposer: str) -> None:
    """BadInput when the run's config cannot drive `proposer` (checked before detaching, so
    the engineer sees the reason instead of a crashed engine)."""
    from kopt_supervisor.engine.loop import make_proposer

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
    `demo`: `kopt demo`'s own start (engine/sandbox/__init__.py start_rule)."""
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

    from kopt_supervisor.engine import onboard, sandbox
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
                from kopt_supervisor.engine.runner.command import run as run_command

                res = run_command(
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
    from kopt_supervisor.engine.propose.agents import agent_setup, check_agent

    report = doctor_mod.report()
    if ws is not None:
        cfg = ws.load_config()
        missing, setup = check_agent(cfg), agent_setup(cfg)
        program = setup.executable if setup is not None else None  # None: a proposer that runs none
        report["proposer"] = {"run": ws.tag, "kind": cfg.propose.kind, "program": program}
        report["proposer"] |= {"ok": missing is None, "problem": missing}
    return report


def format_doctor(report: dict[str, Any]) -> str:
    from kopt_supervisor.engine import doctor as doctor_mod

    text = doctor_mod.format_text(report).rstrip("\n") + "\n"
    proposer = report.get("proposer")
    if proposer:
        program = proposer.get("program")
        said = (
            f"MISSING: {proposer['problem']}"
            if not proposer["ok"]
            else f"its program `{program}` is on PATH"
            if program
            else f"the {proposer['kind']} proposer runs no program"
        )
        text += f"\nproposer of run {proposer['run']}: {said}\n"
    return text


BackendFactory = Callable[[str], Backend]
"""Opens a GPU backend for a vendor ("auto", "nvidia", "amd", "none"): `open_backend`, or a
fake one in tests."""


def gpus_report(ws: Workspace | None = None) -> dict[str, Any]:
    """`kopt gpus [--tag TAG]`: one gate check with the run's [gpu] thresholds (the defaults
    without a run); the stable JSON of docs/gpu-gate.md."""
    from kopt_supervisor.engine.gpu.gate import gpus_report as check

    if ws is None:
        return check(GpuConfig())
    cfg = ws.load_config()
    report = check(cfg.gpu)
    from kopt_supervisor.engine.api.run_io import pending_reviews
    from kopt_supervisor.engine.api.run_summary import lane_states

    with ws.open_store(readonly=True) as store:  # which lane holds which GPU (docs/lanes.md)
        report["lanes"] = lane_states(store.meta(), store.iterations(), cfg.parallel.lanes, pending_reviews(ws))
    return report


def format_gpus_report(report: dict[str, Any]) -> str:
    """`gpus_report`'s result as a table for the terminal."""
    from kopt_supervisor.engine.gpu import format_report

    return format_report(report)


def own_pids(meta: Mapping[str, Any]) -> set[int]:
    """A run's engine and its benchmark's process group (from the run's meta): never
    "foreign" on the GPU."""
    pids = {int(p) for p in [(meta.get("heartbeat") or {}).get("pid"), meta.get("engine_pid")] if p}
    pgid = meta.get("child_pgid")
    if pgid:
        from kopt_supervisor.engine.runner import group_members

        pids |= {p.pid for p in group_members(int(pgid))}
    return pids


class GpuSampler:
    """Readings of the GPUs, each judged idle or busy (with the reasons) by the gate's own
    rules and `cfg`'s thresholds. Takes no claim; the watched run's claim is not "another
    run". Use it from one thread."""

    def __init__(self, cfg: GpuConfig, factory: BackendFactory = open_backend) -> None:
        self.cfg = cfg
        self.backend = factory(cfg.vendor)
        self.claims = ClaimRegistry(owner="kopt TUI")
        self.namespace = str(getattr(self.backend, "claim_namespace", ""))

    def read(self, run_meta: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One reading, judged; `run_meta` is the watched run's meta (its engine's pids)."""
        own = own_pids(run_meta)

        def claimed_by(g: GpuState) -> dict[str, Any] | None:
            claim = self.claims.probe(claim_key(self.namespace, g.uuid, g.index))
            return None if claim and claim.get("pid") in own else claim

        sample = self.backend.read()
        return [a.to_dict() for a in assess([sample], self.cfg, own, claimed_by=claimed_by, enrich=enrich)]

    def close(self) -> None:
        self.backend.close()


def write_report(ws: Workspace) -> Path:
    """Write results.md (and its chart) in the run's workspace; its path."""
    from kopt_supervisor.engine.report import write_report as write

    return write(ws)


def export_branch(ws: Workspace, branch: str) -> str:
    """Create `branch` in the target repo: the kept source changes, one commit per keep, and
    results.md; nothing is checked out. One line saying what was made."""
    from kopt_supervisor.engine.report import export_branch as export

    return export(ws, branch)


def measure_ceilings(root: Path) -> dict[str, Any]:
    """Measure this GPU's copy bandwidth and matrix rate and register them as cited sources
    under `root`; the stable JSON of `kopt ceilings --json` (its "lines" for people)."""
    from kopt_supervisor.engine.doctor import measure_ceilings as measure

    return measure(root)


def mcp_snippet(client: str, tag: str, command: str, args: list[str]) -> Snippet:
    """The config snippet `client`'s documentation asks for, starting `command args`."""
    if client not in MCP_CLIENTS:
        raise BadInput(f"--print-config {client!r}: one of {', '.join(MCP_CLIENTS)}")
    return snippet(client, tag, command, args)


def mcp_sdk_missing() -> str | None:
    """Why `kopt mcp` cannot serve here (the MCP SDK is not installed), or None."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        return "kopt mcp needs the MCP SDK: pip install 'kopt-supervisor[mcp]'"
    return None


def serve_mcp(
    ws: Workspace, *, transport: Literal["stdio", "http"] = "stdio", port: int = 0, allow_restart: bool = False
) -> None:
    """Serve the run's MCP judge until the client goes away (stdio) or the process is stopped
    (HTTP). BadInput when the run cannot be served (no such run, an engine
    running another proposer); KoptError when the `mcp` package is missing."""
    missing = mcp_sdk_missing()
    if missing:
        raise KoptError(missing)
    from kopt_supervisor.engine.mcp.judge import Judge
    from kopt_supervisor.engine.mcp.server import serve_http, serve_stdio

    judge = Judge(ws, allow_restart=allow_restart)
    problem = judge.serve_problem()
    if problem:
        raise BadInput(problem)
    if transport == "http":
        serve_http(judge, port)
    else:
        serve_stdio(judge)


# `kopt demo`

CPU_NOTICE = (
    "No GPU here: the Triton kernel runs through Triton's interpreter on the CPU "
    "on small shapes. Timings are CPU timings, not GPU performance."
)
DEFAULT_ITERS_GPU = 30
DEFAULT_ITERS_CPU = 6


def has_gpu() -> bool:
    """Whether any GPU backend reads a GPU on this machine."""
    backend = open_backend("auto")
    try:
        return bool(backend.read())
    finally:
        backend.close()


class Materialize(Protocol):
    """Writes bundled kernel `name` as a self-contained repo into `dest` (an existing,
    empty directory), its kopt.toml shaped by the keywords (`kernels.catalog.materialize`)."""

    def __call__(
        self,
        name: str,
        dest: Path,
        naive: bool = True,
        *,
        cpu: bool = False,
        review_timeout_s: float | None = None,
        profile: bool = True,
    ) -> None: ...


HEADLESS_REVIEW_S = 0.0
"""Nobody watches a headless demo: a borderline candidate gets the review policy at once."""
TUI_REVIEW_S = 300.0
"""Under the TUI the engineer has five minutes to accept or reject a borderline candidate."""


def prepare_demo(
    root: Path,
    kernel: str,
    tag: str | None = None,
    *,
    kernels: Collection[str],
    materialize: Materialize,
    headless: bool = False,
    profile: bool = True,
) -> tuple[Workspace, bool]:
    """Materialise `kernel` (one of `kernels`) into a fresh repo and create its workspace;
    returns the workspace and whether a GPU runs it."""
    if kernel not in kernels:
        raise BadInput(f"unknown demo kernel {kernel!r} (bundled: {', '.join(sorted(kernels))})")
    tag = tag or f"demo-{kernel}-{time.strftime('%m%d-%H%M%S')}"
    repo = root / ".repos" / tag
    if repo.exists():
        raise BadInput(f"{repo} exists already; choose another --tag")
    gpu = has_gpu()
    repo.mkdir(parents=True, mode=0o700)
    try:
        materialize(
            kernel,
            repo,
            naive=True,
            cpu=not gpu,
            review_timeout_s=HEADLESS_REVIEW_S if headless else TUI_REVIEW_S,
            profile=profile,
        )
        gitops.init_repo(repo, f"{kernel}: bundled kopt demo kernel, naive configuration")
        text = (repo / "kopt.toml").read_text(encoding="utf-8")
        ws, _, _ = create_workspace(root, tag, repo, text, config_source=str(repo / "kopt.toml"))
    except BaseException:
        shutil.rmtree(repo, ignore_errors=True)
        raise
    with Store(ws.db_path) as store:
        store.set_many(
            {"demo": {"kernel": kernel, "repo": str(repo), "gpu": gpu}, "notice": None if gpu else CPU_NOTICE}
        )
    from kopt_supervisor.engine.history import write_initial_projections

    write_initial_projections(ws)
    return ws, gpu


def demo_iterations(gpu: bool, max_iters: int | None) -> int:
    """How many candidate iterations the demo runs: `max_iters`, or its default on a GPU or a CPU."""
    return max_iters if max_iters is not None else (DEFAULT_ITERS_GPU if gpu else DEFAULT_ITERS_CPU)


def run_demo_headless(ws: Workspace, iters: int, *, no_sandbox: bool = False) -> int:
    """The demo in this process, its progress logged to stdout; returns the engine's exit
    code when the demo run ends."""
    from kopt_supervisor.engine.daemon import run_engine

    return run_engine(ws, proposer="tune", max_iters=iters, log_to_stdout=True, no_sandbox=no_sandbox, demo=True)
