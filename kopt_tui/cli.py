"""The `kopt` command line (DESIGN.md §2): parses arguments, calls the engine, prints.

Exit codes: 0 ok; 1 the run or command failed; 2 bad usage or bad input, with a one-line
reason naming the file, key, column or value at fault. `--json` outputs are stable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import api, config, workspace
from kopt_supervisor.engine.errors import BadInput, KoptError
from kopt_supervisor.engine.workspace import Workspace, resolve_root


def _ws(args: argparse.Namespace) -> Workspace:
    return Workspace(resolve_root(args.root), workspace.validate_tag(args.tag)).require()


def _version(text: str) -> int:
    t = text.strip().lower().removeprefix("v")
    if not t.isdigit():
        raise BadInput(f"{text!r} is not an iteration (write vN or N)")
    return int(t)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


# ---------------------------------------------------------------------------------------
# Commands


def cmd_init(args: argparse.Namespace) -> int:
    from kopt_supervisor.engine import gitops

    repo = gitops.toplevel(Path(args.repo).expanduser().resolve())
    cfg_path = Path(args.config).expanduser() if args.config else repo / "kopt.toml"
    if cfg_path.exists():
        try:
            text = cfg_path.read_text(encoding="utf-8")
        except OSError as e:
            raise BadInput(f"{cfg_path}: cannot read: {e.strerror}") from None
    elif args.config or not args.bench:
        raise BadInput(f"{cfg_path}: no such config file (write a kopt.toml, see docs/files.md, or pass --config)")
    else:
        text = ""
    cfg = config.loads(text, source=str(cfg_path)) if not args.bench else _with_bench(text, args.bench, str(cfg_path))
    frozen = f"# frozen by `kopt init` from {cfg_path if cfg_path.exists() else 'defaults'}\n" + config.dumps(cfg)
    root = resolve_root(args.root)
    ws, _, commit = workspace.create_workspace(root, args.tag, repo, frozen, config_source=str(cfg_path))
    from kopt_supervisor.engine.loop import write_initial_projections

    write_initial_projections(ws)
    print(f"created {ws.dir}")
    print(f"  branch {ws.branch} at {commit[:12]}; worktrees best/ and cand/")
    print(f"  next: kopt run {args.tag}" + (f" --root {args.root}" if args.root else ""))
    return 0


def _with_bench(text: str, bench: str, source: str) -> config.Config:
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{source}: not valid TOML: {e}") from None
    data.setdefault("target", {})["bench"] = bench
    cfg = config._build(config.Config, data, source, "")
    config.validate(cfg, source)
    return cfg


def cmd_run(args: argparse.Namespace) -> int:
    ws = _ws(args)
    from kopt_supervisor.engine import daemon

    if args.proposer:
        cfg = ws.load_config()
        from kopt_supervisor.engine.propose import make_proposer

        make_proposer(cfg, args.proposer)  # validates before detaching
    if args.foreground:
        return daemon.run_engine(ws, proposer=args.proposer, max_iters=args.max_iters, log_to_stdout=True)
    pid = daemon.start_detached(ws, proposer=args.proposer, max_iters=args.max_iters)
    if args.headless:
        print(f"engine started (pid {pid}); logs: {ws.engine_log}")
        print(f"  watch: kopt attach {ws.tag}   status: kopt status {ws.tag}   stop: kopt stop {ws.tag}")
        return 0
    return _attach(ws)


def _attach(ws: Workspace) -> int:
    from kopt_supervisor.kopt_tui.app import run_app

    return run_app(ws.root, ws.tag)


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
    for r in runs:
        sp = r.get("best_speedup")
        print(f"{r['tag']:<24} {r.get('state', '?'):<16} {_s(r.get('iteration')):>5} "
              f"{(f'{sp:.3f}x' if sp else '—'):>8} {len(r.get('pending_reviews') or []):>8}  "
              f"{r.get('stop_reason') or r.get('error') or ''}")
    return 0


def _s(v: Any) -> str:
    return "—" if v is None else f"v{v}"


def cmd_status(args: argparse.Namespace) -> int:
    st = api.status(_ws(args))
    if args.json:
        _print_json(st)
        return 0
    hb = st["heartbeat_age_s"]
    speedup = f"{st['best_speedup']:.3f}x" if st["best_speedup"] else "—"
    print(f"{st['tag']}: {st['state']}" + (f" ({st['stop_reason']})" if st["stop_reason"] else ""))
    print(f"  iteration {_s(st['iteration'])} [{st['iteration_status']}], keeps {st['keeps']}, "
          f"candidates {st['candidates']}, best speedup {speedup}")
    print(f"  BEST_COMMIT {st['best_commit']}  (baseline {str(st['baseline_commit'])[:12]})")
    print(f"  consecutive regressions {st['consecutive_regressions']}, pending reviews "
          f"{', '.join(f'v{v}' for v in st['pending_reviews']) or 'none'}")
    print(f"  engine pid {st['engine_pid'] or '—'}, heartbeat {f'{hb:.0f} s ago' if hb is not None else '—'}")
    if st.get("progress"):
        p = st["progress"]
        print(f"  now: v{p.get('version')} {p.get('phase')}: {p.get('step')}")
    if st["state"] == "crashed" and st.get("last_error"):
        print(f"  last error: {st['last_error'].splitlines()[0]}")
    return 0


def _send(args: argparse.Namespace, kind: str, cmd_args: dict[str, Any]) -> int:
    sent = api.send(_ws(args), kind, cmd_args, source=f"cli:{os.getpid()}")
    print(f"{kind}: {sent.message}")
    return 0


def cmd_simple(kind: str):  # noqa: ANN201 - a small factory of handlers
    def handler(args: argparse.Namespace) -> int:
        extra = {"why": args.why} if getattr(args, "why", None) else {}
        return _send(args, kind, extra)

    return handler


def cmd_review(kind: str):  # noqa: ANN201
    def handler(args: argparse.Namespace) -> int:
        extra: dict[str, Any] = {"version": _version(args.version)}
        if getattr(args, "why", None):
            extra["why"] = args.why
        return _send(args, kind, extra)

    return handler


def cmd_restart(args: argparse.Namespace) -> int:
    return _send(args, "restart", {"version": _version(args.from_), "why": args.why or ""})


def cmd_submit(args: argparse.Namespace) -> int:
    return _send(args, "submit", {"hypothesis": args.hypothesis, "target_class": args.cls, "notes": args.notes or ""})


def cmd_memory(args: argparse.Namespace) -> int:
    ws = _ws(args)
    if args.action in ("mask", "unmask"):
        if not args.versions:
            raise BadInput(f"kopt memory {args.action}: name at least one iteration (vN)")
        return _send(args, args.action, {"versions": [_version(v) for v in args.versions]})
    from kopt_supervisor.engine import projections

    with ws.open_store(readonly=True) as store:
        its = store.iterations()
    if args.action == "show":
        if len(args.versions) != 1:
            raise BadInput("kopt memory show: name one iteration (vN)")
        v = _version(args.versions[0])
        match = [it for it in its if it.version == v]
        if not match:
            raise BadInput(f"v{v} does not exist")
        _print_json(projections.memory_record(match[0]))
        return 0
    records = [projections.memory_record(it) for it in its]
    if args.action == "summary":
        records = [r for r in records if not r["masked"]]
    if args.json:
        _print_json(records)
        return 0
    for r in records:
        flag = " (masked)" if r["masked"] else ""
        reason = (r["decision"] or {}).get("reason") or ""
        print(f"v{r['version']:<4} {r['status']:<17}{flag} {r['hypothesis'] or ''}"
              + (f"  [{r['target_class']}]" if r["target_class"] else "")
              + (f"\n       {reason}" if args.action == "summary" and reason else ""))
    return 0


def cmd_gpus(args: argparse.Namespace) -> int:
    from kopt_supervisor.engine.gpu.report import format_report, gpus_report

    cfg = config.GpuConfig()
    if args.tag:
        cfg = _ws(args).load_config().gpu
    report = gpus_report(cfg)
    if args.json:
        _print_json(report)
    else:
        print(format_report(report))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from kopt_supervisor.engine.report import write_report

    out = write_report(_ws(args))
    print(f"wrote {out}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from kopt_supervisor.engine.report import export_branch

    msg = export_branch(_ws(args), args.branch)
    print(msg)
    return 0


def cmd_ceilings(args: argparse.Namespace) -> int:
    from kopt_supervisor.engine.ceilings import measure_ceilings

    result = measure_ceilings(resolve_root(args.root))
    if args.json:
        _print_json(result)
    else:
        for line in result.get("lines", []):
            print(line)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from kopt_supervisor.engine import demo

    ws, gpu = demo.prepare_demo(resolve_root(args.root), args.kernel, args.tag, headless=args.headless,
                                profile=not args.no_profile)
    iters = demo.demo_iterations(gpu, args.max_iters)
    demo.announce(ws, args.kernel, gpu, iters)
    if args.headless:
        return demo.run_headless(ws, iters)
    from kopt_supervisor.engine.daemon import start_detached

    start_detached(ws, proposer="tune", max_iters=iters)
    return _attach(ws)


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
    sp.add_argument("--bench", help="the benchmark command (overrides [target].bench)")

    sp = add("run", cmd_run, "start (or resume) a run: detached engine + the TUI")
    sp.add_argument("tag")
    mode = sp.add_mutually_exclusive_group()
    mode.add_argument("--headless", action="store_true", help="start the engine detached and return")
    mode.add_argument("--foreground", action="store_true", help="run the engine in this process")
    sp.add_argument("--proposer", choices=["manual", "command", "tune"])
    sp.add_argument("--max-iters", type=int, help="stop after N candidate iterations in this session")

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

    for kind, help_ in (("pause", "pause the run (a benchmark in flight is discarded and re-run)"),
                        ("resume", "resume a paused run"), ("stop", "stop the run cleanly")):
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

    sp = add("ceilings", cmd_ceilings, "measure this GPU's copy bandwidth and bf16 matrix rate")
    sp.add_argument("--json", action="store_true")

    sp = add("demo", cmd_demo, "the bundled demo: a real kernel, the tune proposer, the TUI")
    sp.add_argument("--headless", action="store_true", help="no TUI; print progress; return when done")
    sp.add_argument("--kernel", default="rmsnorm", help="rmsnorm or adaln")
    sp.add_argument("--max-iters", type=int, default=None)
    sp.add_argument("--tag", default=None)
    sp.add_argument("--no-profile", action="store_true",
                    help="skip the profiler's confirmation of keeps (faster on a GPU with ncu/rocprofv3)")
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
