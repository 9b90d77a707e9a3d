"""The `kopt` command line (docs/design.md §2): parses arguments, calls the engine through
`engine.api`, prints.

Exit codes: 0 ok; 1 the run or command failed; 2 bad usage or bad input, with a one-line
reason naming the file, key, column or value at fault. `--json` outputs are stable.
The bundled kernels reach the engine from here: `kopt demo` hands `engine.api.prepare_demo`
the catalog's kernel names and its `materialize` (the engine never imports kernels).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import BadInput, KoptError, Workspace, fmt, resolve_root
from kopt_supervisor.kopt_tui import mcp_cli

Handler = Callable[[argparse.Namespace], int]
"""What a subcommand runs: its exit code."""


def _ws(args: argparse.Namespace) -> Workspace:
    return api.open_workspace(args.root, args.tag)


def _version(text: str) -> int:
    t = text.strip().lower().removeprefix("v")
    if not t.isdigit():
        raise BadInput(f"{text!r} is not an iteration (write vN or N)")
    return int(t)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


# ---------------------------------------------------------------------------------------
# Commands


def _propose_keys(args: argparse.Namespace) -> dict[str, str]:
    """[propose] keys given on the command line: --propose-command, --agent."""
    keys = {"command": args.propose_command, "agent": args.agent}
    return {k: v for k, v in keys.items() if v}


def cmd_init(args: argparse.Namespace) -> int:
    if args.bench and not args.config and not (Path(args.repo).expanduser() / "kopt.toml").exists():
        _propose_config(args)  # no config yet: read the bench's own output and propose one
    created = api.init_run(
        resolve_root(args.root),
        args.tag,
        args.repo,
        config_file=args.config,
        bench=None if args.proposed else args.bench,
        propose=None if args.proposed else _propose_keys(args) or None,
    )
    ws = created.workspace
    print(f"created {ws.dir}")
    print(f"  branch {ws.branch} at {created.commit[:12]}; worktrees best/ and cand/")
    for warning in created.warnings:
        print(f"  warning: {warning}")
    print(f"  next: kopt run {args.tag}" + (f" --root {args.root}" if args.root else ""))
    return 0


def _propose_config(args: argparse.Namespace) -> None:
    """kopt init --bench CMD without a config: the bench runs once, kopt proposes a commented
    kopt.toml; in a terminal, the open questions are asked and the file is confirmed
    (--yes accepts it as proposed); without one, an open question is a one-line error."""
    interactive = sys.stdin.isatty() and sys.stdout.isatty()

    def ask(q: Any) -> str:
        print(f"\n{q.prompt} ({q.why})")
        for n, c in enumerate(q.choices, 1):
            print(f"  {n}. {c.value}: {c.label}")
        answer = input(f"answer (1-{len(q.choices)}{', enter: ' + q.default if q.default else ''}): ").strip()
        return q.choices[int(answer) - 1].value if answer.isdigit() and 0 < int(answer) <= len(q.choices) else answer

    path, text = api.propose_config(
        args.repo,
        args.bench,
        answers=args.answer,
        ask=ask if interactive else None,
        no_sandbox=args.no_sandbox,
        log=print,
        log_dir=resolve_root(args.root) / ".init" / args.tag,
        propose=_propose_keys(args) or None,
    )
    print(text)
    if not args.yes:
        if not interactive:
            raise BadInput(
                f"kopt init --bench: review the proposed config above (kept as {path}), then run the "
                "same command with --yes to accept it: the measured run is reused, not run again"
            )
        if input(f"create the run with this config ({path})? [y/N] ").strip().lower() not in ("y", "yes"):
            raise BadInput(
                f"kopt init: the proposed config was not accepted (kept as {path}: edit it and pass "
                "--config, or answer differently; the measured run is reused)"
            )
    print(
        f"using {path} (the draft in kopt's root; your checkout is not written to: copy it into the repo and "
        "commit it if you want it kept)"
    )
    args.proposed = True
    args.config = str(path)


def cmd_run(args: argparse.Namespace) -> int:
    ws = _ws(args)
    if args.proposer:
        api.check_proposer(ws, args.proposer)  # before detaching
    if args.foreground:
        return api.run_foreground(ws, proposer=args.proposer, max_iters=args.max_iters, no_sandbox=args.no_sandbox)
    pid = api.start_detached(ws, proposer=args.proposer, max_iters=args.max_iters, no_sandbox=args.no_sandbox)
    if args.headless:
        print(f"engine started (pid {pid}); logs: {ws.engine_log}")
        print(f"  watch: kopt attach {ws.tag}   status: kopt status {ws.tag}   stop: kopt stop {ws.tag}")
        return 0
    return _attach(ws)


def _attach(ws: Workspace) -> int:
    from kopt_supervisor.kopt_tui.app import run_app

    rc = run_app(ws.root, ws.tag)
    alive, _ = api.engine_alive(ws)
    if alive:  # `q` detaches: the engine goes on, and the terminal says so
        print(f"detached from {ws.tag}; its engine goes on   watch: kopt attach {ws.tag}   stop: kopt stop {ws.tag}")
    return rc


def cmd_attach(args: argparse.Namespace) -> int:
    if args.tag is None:  # the runs home screen
        from kopt_supervisor.kopt_tui.app import run_app

        return run_app(resolve_root(args.root), None)
    return _attach(_ws(args))


def cmd_ls(args: argparse.Namespace) -> int:
    root = resolve_root(args.root)
    runs = api.list_runs(root)
    if args.json:
        _print_json(runs)
        return 0
    if not runs:
        print(f"no runs under {root}")
        return 0
    print(f"{'TAG':<24} {'STATE':<16} {'ITER':>5} {'SPEEDUP':>8} {'REVIEWS':>8}  STOP REASON")
    for r in map(api.status_report, runs):
        print(
            f"{r.tag:<24} {r.state:<16} {_s(r.iteration):>5} {fmt.speedup(r.best_speedup):>8} "
            f"{len(r.pending_reviews):>8}  " + ("⚠ NO SANDBOX; " if r.unsandboxed else "") + (r.stop_reason or r.error)
        )
    return 0


def _s(v: Any) -> str:
    return fmt.DASH if v is None else f"v{v}"


def cmd_status(args: argparse.Namespace) -> int:
    st = api.status(_ws(args))
    if args.json:
        _print_json(st)
        return 0
    r = api.status_report(st)
    hb = r.heartbeat_age_s
    print(f"{r.tag}: {r.state}" + (f" ({r.stop_reason})" if r.stop_reason else ""))
    print(
        f"  iteration {_s(r.iteration)} [{r.iteration_status}], keeps {r.keeps}, "
        f"candidates {r.candidates}, best speedup {fmt.speedup(r.best_speedup)} (geomean over classes)"
    )
    print(f"  BEST_COMMIT {r.best_commit}  (baseline {str(r.baseline_commit)[:12]})")
    print(
        f"  consecutive regressions {r.consecutive_regressions}, pending reviews "
        f"{review_list(r.reviews, len(r.lanes)) or 'none'}"
    )
    print(
        f"  engine pid {r.engine_pid or fmt.DASH}, heartbeat {f'{fmt.seconds(hb, 0)} ago' if hb is not None else fmt.DASH}"
    )
    if r.progress is not None:
        p = r.progress
        now = f"v{p.version} " if p.version is not None else ""
        print(f"  now: {now}{p.phase}: {p.step}")
    for line in lane_lines(r.lanes):
        print(f"  {line}")
    if r.state == "crashed" and r.last_error:
        print(f"  last error: {r.last_error.splitlines()[0]}")
    for line in status_details(r):
        print(f"  {line}")
    return 0


def iterations(text: str) -> int:
    """--max-iters: a whole number of iterations, 0 (the baseline alone) or more; argparse
    names the flag on an error."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n}: a count of iterations, 0 or more")
    return n


def review_list(reviews: Sequence[api.QueuedReview], lanes: int) -> str:
    """The status JSON's `reviews` in a line, oldest review first: "v7 (lane 1), v5 (lane 0,
    accept sent)"."""
    out = []
    for r in reviews:
        notes = [f"lane {r.lane}"] if lanes > 1 and r.lane is not None else []
        if r.answer:
            notes.append(f"{r.answer.replace('_', ' ')} sent")
        elif r.more_rounds:
            notes.append("more rounds")
        out.append(f"v{r.version}" + (f" ({', '.join(notes)})" if notes else ""))
    return ", ".join(out)


def lane_lines(lanes: Sequence[api.LaneState]) -> list[str]:
    """`kopt status`'s line per lane when the run has several (the status JSON's `lanes`):
    "lane 0: v12 deciding · round 3 of up to 8 · cls=large -4.1% [-4.6, -3.5] · GPU 0 on
    node-a"; none with one lane."""
    if len(lanes) < 2:
        return []
    from kopt_supervisor.kopt_tui.model import lane_row

    out = []
    for entry in lanes:
        r = lane_row(entry)
        where = " on ".join(x for x in (r.gpu or "no GPU known", r.host) if x)
        interval = f"{r.interval_cls} {r.interval}".strip()
        out.append(
            " · ".join(
                x
                for x in (
                    f"lane {r.lane}: " + (f"v{r.version} " if r.version is not None else "") + r.what,
                    r.step,
                    interval,
                    where,
                )
                if x
            )
        )
    return out


def status_details(st: api.StatusReport) -> list[str]:
    """`kopt status`'s lines on the sandbox, one decision's cost, the agent's cost and the
    engine's own time, from the status JSON (a warning first where one applies)."""
    lines = []
    if st.sandbox:
        line = st.sandbox if st.sandbox.lower().startswith(("sandboxed", "unsandboxed")) else f"sandbox: {st.sandbox}"
        lines.append(("⚠ " + line) if st.unsandboxed else line)
    cost = st.decision_cost
    if cost:
        lines.append(("⚠ slow decisions: " if cost.slow else "decision cost: ") + cost.text)
    agent = api.agent_line(st.agent)
    if agent:
        lines.append(f"agent: {agent}")
    t = st.timings
    if t.engine_s_median is not None:
        last = t.last or api.IterationTimings()
        lines.append(
            f"kopt's own time per iteration: median {fmt.seconds(t.engine_s_median, 2)} over "
            f"{t.iterations} (most {fmt.seconds(t.engine_s_max, 2)}); v{t.last_version} "
            f"took {fmt.seconds(last.total_s)}, {fmt.seconds(last.engine_s, 2)} of it kopt's"
        )
    return lines


def _send(args: argparse.Namespace, kind: str, cmd_args: dict[str, Any]) -> int:
    sent = api.send(_ws(args), kind, cmd_args, source=f"cli:{os.getpid()}")
    print(f"{kind}: {sent.message}")
    return 0


def cmd_simple(kind: str) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        extra = {"why": args.why} if getattr(args, "why", None) else {}
        return _send(args, kind, extra)

    return handler


def cmd_review(kind: str) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        extra: dict[str, Any] = {"version": _version(args.version)}
        if getattr(args, "why", None):
            extra["why"] = args.why
        return _send(args, kind, extra)

    return handler


def cmd_restart(args: argparse.Namespace) -> int:
    return _send(args, "restart", {"version": _version(args.from_), "why": args.why or ""})


def cmd_submit(args: argparse.Namespace) -> int:
    lane = {} if args.lane is None else {"lane": args.lane}  # none: lane 0 of a run of one lane
    return _send(
        args, "submit", {"hypothesis": args.hypothesis, "target_class": args.cls, "notes": args.notes or "", **lane}
    )


def cmd_memory(args: argparse.Namespace) -> int:
    ws = _ws(args)
    if args.action in ("mask", "unmask"):
        if not args.versions:
            raise BadInput(f"kopt memory {args.action}: name at least one iteration (vN)")
        return _send(args, args.action, {"versions": [_version(v) for v in args.versions]})
    if args.action == "show":
        if len(args.versions) != 1:
            raise BadInput("kopt memory show: name one iteration (vN)")
        _print_json(api.memory_record(ws, _version(args.versions[0])))
        return 0
    records = api.memory_records(ws, unmasked_only=args.action == "summary")
    if args.json:
        _print_json(records)
        return 0
    for r in records:
        flag = " (masked)" if r["masked"] else ""
        reason = api.recorded_decision(r).reason
        print(
            f"v{r['version']:<4} {r['status']:<17}{flag} {r['hypothesis'] or ''}"
            + (f"  [{r['target_class']}]" if r["target_class"] else "")
            + (f"\n       {reason}" if args.action == "summary" and reason else "")
        )
    return 0


def cmd_gpus(args: argparse.Namespace) -> int:
    report = api.gpus_report(_ws(args) if args.tag else None)
    if args.json:
        _print_json(report)
    else:
        print(api.format_gpus_report(report))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    print(f"wrote {api.write_report(_ws(args))}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    print(api.export_branch(_ws(args), args.branch))
    return 0


def cmd_ceilings(args: argparse.Namespace) -> int:
    result = api.measure_ceilings(resolve_root(args.root))
    if args.json:
        _print_json(result)
    else:
        for line in result.get("lines", []):
            print(line)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from kopt_supervisor.kernels import catalog

    ws, gpu = api.prepare_demo(
        resolve_root(args.root),
        args.kernel,
        args.tag,
        kernels=catalog.KERNELS,
        materialize=catalog.materialize,
        headless=args.headless,
        profile=not args.no_profile,
    )
    iters = api.demo_iterations(gpu, args.max_iters)
    print(f"kopt demo: {args.kernel} in {ws.dir}")
    print(f"  target repo {ws.root / '.repos' / ws.tag}; up to {iters} iterations of the tune proposer")
    if not gpu:
        print(f"  {api.CPU_NOTICE}")
    box = api.check_sandbox(ws, proposer="tune", no_sandbox=args.no_sandbox, demo=True)
    print(
        f"  {box}"
        + (
            ""
            if box.startswith("sandboxed") or args.no_sandbox
            else "\n  (`kopt doctor` says what would make the sandbox work here)"
        )
    )
    if args.headless:
        rc = api.run_demo_headless(ws, iters, no_sandbox=args.no_sandbox)
        _demo_summary(ws)
        return rc
    api.start_detached(ws, proposer="tune", max_iters=iters, no_sandbox=args.no_sandbox, demo=True)
    return _attach(ws)


def cmd_doctor(args: argparse.Namespace) -> int:
    ws = api.open_workspace(args.root, args.tag) if args.tag else None
    report = api.doctor(ws)
    if args.json:
        _print_json(report)
    else:
        print(api.format_doctor(report), end="")
    proposer = report.get("proposer") or {}
    return 1 if proposer and not proposer.get("ok") else 0


def _demo_summary(ws: Workspace) -> None:
    st = api.status_report(api.status(ws))
    print(f"\n{ws.tag}: {st.state} ({st.stop_reason or None})")
    print(
        f"  keeps {st.keeps} of {st.candidates} candidates; best speedup over the naive start "
        f"{fmt.speedup(st.best_speedup)} (geometric mean over its classes, the guard included; "
        f"per production shape: kopt report)"
    )
    print(f"  BEST_COMMIT {st.best_commit}")
    if st.unsandboxed:
        print(f"  ⚠ {st.sandbox}")
    print(
        f"  see {ws.performance} and {ws.readme}; `kopt attach {ws.tag}` to browse, "
        f"`kopt report {ws.tag}` for results.md"
    )


# ---------------------------------------------------------------------------------------
# Parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kopt", description="Supervise autonomous GPU-kernel optimization runs.")
    p.add_argument("--root", help="where workspaces live (default $KOPT_ROOT or ./workspaces)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Any, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.add_argument("--root", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sp.set_defaults(handler=handler)
        return sp

    sp = add("init", cmd_init, "create a run workspace for a repo and its fixed benchmark")
    sp.add_argument("--repo", required=True, help="the target git repository")
    sp.add_argument("--tag", required=True, help="the run's name (letters, digits, . _ -)")
    sp.add_argument("--config", help="kopt.toml to use (default REPO/kopt.toml)")
    sp.add_argument(
        "--bench",
        help="the benchmark command (overrides [target].bench; with no kopt.toml, kopt runs it once and proposes one)",
    )
    sp.add_argument("--yes", action="store_true", help="accept the proposed kopt.toml as it is")
    sp.add_argument(
        "--answer",
        action="append",
        metavar="KEY=VALUE",
        help="answer a question the proposal asks: table=KEY, metric=COLUMN, direction=min|max (repeatable)",
    )
    sp.add_argument("--no-sandbox", action="store_true", help="run the bench unconfined (recorded)")
    sp.add_argument(
        "--propose-command",
        metavar="CMD",
        help='the proposer: an agent command ([propose] kind = "command", command = CMD; docs/agents.md)',
    )
    sp.add_argument(
        "--agent",
        metavar="PRESET",
        help="the proposer: an agent CLI preset ([propose] agent: claude-code, codex, gemini, aider, "
        "opencode, generic)",
    )
    sp.set_defaults(proposed=False)

    sp = add("run", cmd_run, "start (or resume) a run: detached engine + the TUI")
    sp.add_argument("tag")
    mode = sp.add_mutually_exclusive_group()
    mode.add_argument("--headless", action="store_true", help="start the engine detached and return")
    mode.add_argument("--foreground", action="store_true", help="run the engine in this process")
    sp.add_argument("--proposer", choices=["manual", "command", "tune"])
    sp.add_argument("--max-iters", type=iterations, help="stop after N candidate iterations in this session")
    sp.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the proposer and candidate code without bubblewrap (recorded and shown with every result)",
    )

    sp = add("attach", cmd_attach, "open the TUI on a run (no tag: every run under the root)")
    sp.add_argument("tag", nargs="?")

    sp = add("ls", cmd_ls, "list runs under the root")
    sp.add_argument("--json", action="store_true")

    sp = add("status", cmd_status, "a run's state")
    sp.add_argument("tag")
    sp.add_argument("--json", action="store_true")

    for kind, help_ in (("accept", "accept a borderline candidate"), ("reject", "reject a borderline candidate")):
        sp = add(kind, cmd_review(kind), help_)
        sp.add_argument("tag")
        sp.add_argument("version", help="vN")
        sp.add_argument("--why", help="a note kept with the decision")
    sp = add("more", cmd_review("more_rounds"), "measure a borderline candidate for more rounds")
    sp.add_argument("tag")
    sp.add_argument("version", help="vN")

    for kind, help_ in (
        ("pause", "pause the run (a benchmark in flight is discarded and re-run)"),
        ("resume", "resume a paused run"),
        ("stop", "stop the run cleanly"),
    ):
        sp = add(kind, cmd_simple(kind), help_)
        sp.add_argument("tag")
        if kind == "stop":
            sp.add_argument("--why")

    sp = add("restart", cmd_restart, "masked partial restart from iteration vK")
    sp.add_argument("tag")
    sp.add_argument("--from", dest="from_", required=True, metavar="vK")
    sp.add_argument("--why")

    sp = add("submit", cmd_submit, "manual proposer: evaluate the edits in cand/ now")
    sp.add_argument("tag")
    sp.add_argument("hypothesis", help="one sentence: what should get faster and why")
    sp.add_argument("--class", dest="cls", help="the target config class (default: global)")
    sp.add_argument("--notes")
    sp.add_argument(
        "--lane",
        type=int,
        metavar="N",
        help="the lane whose cand/ to evaluate (a run of several lanes: required; one lane: 0)",
    )

    mcp_cli.register(add)  # kopt mcp TAG

    sp = add("memory", cmd_memory, "iteration memory: list, show, mask, unmask, summary")
    sp.add_argument("tag")
    sp.add_argument("action", choices=["list", "show", "mask", "unmask", "summary"])
    sp.add_argument("versions", nargs="*", metavar="vN")
    sp.add_argument("--json", action="store_true")

    sp = add("gpus", cmd_gpus, "what the GPU gate sees, and why each GPU is idle or busy")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--tag", help="use this run's [gpu] thresholds")

    sp = add("report", cmd_report, "write results.md in the run's workspace")
    sp.add_argument("tag")

    sp = add("export", cmd_export, "a clean branch in the target repo: kept changes + results.md")
    sp.add_argument("tag")
    sp.add_argument("--branch", required=True)

    sp = add("doctor", cmd_doctor, "what this machine offers kopt (sandbox, GPUs, profilers) and what is missing")
    sp.add_argument("--tag", help="also check this run's proposer program")
    sp.add_argument("--json", action="store_true")
    sp = add("ceilings", cmd_ceilings, "measure this GPU's copy bandwidth and bf16 matrix rate")
    sp.add_argument("--json", action="store_true")

    sp = add("demo", cmd_demo, "the bundled demo: a real kernel, the tune proposer, the TUI")
    sp.add_argument("--headless", action="store_true", help="no TUI; print progress; return when done")
    sp.add_argument("--kernel", default="rmsnorm", help="rmsnorm or adaln")
    sp.add_argument("--max-iters", type=iterations, default=None)
    sp.add_argument("--tag", default=None)
    sp.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the bench without bubblewrap even where it works (recorded and shown with every "
        "result; where none works the demo runs unconfined by itself, marked so)",
    )
    sp.add_argument(
        "--no-profile",
        action="store_true",
        help="skip the profiler's confirmation of keeps (faster on a GPU with ncu/rocprofv3)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "root"):
        args.root = None
    try:
        return int(args.handler(args) or 0)
    except KoptError as e:
        print(f"kopt: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
