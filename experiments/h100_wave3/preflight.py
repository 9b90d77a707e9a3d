"""Which pieces of the measurement redesign this checkout holds, before any device time is
spent on them (the wave was written while they were being built): each piece with how it was
checked. A part still runs where a piece is missing (it measures what the checkout does) and
its summary names the missing pieces beside every figure they would change.

`protocol_probe` goes further on one piece: it starts the bundled RMSNorm's per-tree server
(`[target].serve`) in a materialized repo and asks it for a look and an audit, timing both.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import queue
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.device_wave import REPO


def _serve_in_config() -> tuple[bool, str]:
    from kopt_supervisor.engine.config import TargetConfig

    names = {f.name for f in dataclasses.fields(TargetConfig)}
    return "serve" in names, "engine.config.TargetConfig has a `serve` field"


def _catalog_serves() -> tuple[bool, str]:
    from kopt_supervisor.engine.config.toml_io import loads as loads_config
    from kopt_supervisor.kernels import catalog

    t = loads_config(catalog.kopt_toml("rmsnorm"), source="catalog rmsnorm").target
    serve = getattr(t, "serve", "")
    return bool(serve), f"kernels.catalog.kopt_toml('rmsnorm'): serve = {serve!r}"


def _harness_serves_one_tree() -> tuple[bool, str]:
    bench = importlib.import_module("kopt_supervisor.kernels.harness.bench")
    try:
        bench.parse_args(["--serve"], False)
    except SystemExit:
        return False, "kernels/harness/bench.py parse_args(['--serve']) refuses --serve"
    return True, "kernels/harness/bench.py accepts --serve alone"


def _module(name: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        try:
            importlib.import_module(name)
        except ImportError as e:
            return False, f"import {name}: {e}"
        return True, f"import {name}"

    return check


def _record_key(key: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        from kopt_supervisor.engine.records import IterationRecord

        return key in IterationRecord.__annotations__, f"engine.records.IterationRecord has {key!r}"

    return check


def _source_mentions(folder: str, text: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        hits = sorted(
            str(p.relative_to(REPO))
            for p in (REPO / folder).rglob("*.py")
            if text in p.read_text(encoding="utf-8", errors="replace")
        )
        return bool(hits), f"{text!r} in {folder}/: {', '.join(hits[:4]) or 'nowhere'}"

    return check


PIECES: dict[str, Callable[[], tuple[bool, str]]] = {
    "config [target].serve": _serve_in_config,
    "harness: --serve of one tree": _harness_serves_one_tree,
    "harness: the audit request": _module("kopt_supervisor.kernels.harness.audit"),
    "catalog proposes serve": _catalog_serves,
    "engine: per-tree served measurer": _source_mentions("src/kopt_supervisor/engine/loop", "target.serve"),
    "engine: kopt's output audit": _module("kopt_supervisor.engine.decide.audit"),
    "engine: the keep's confirmation in fresh servers": _record_key("confirmation"),
    "engine: external truth (profiler / OS accounting)": _module("kopt_supervisor.engine.decide.external_truth"),
    "record: external_truth": _record_key("external_truth"),
}


def pieces() -> dict[str, dict[str, Any]]:
    """Every piece: present or not, and how that was checked (or why the check failed)."""
    out: dict[str, dict[str, Any]] = {}
    for name, check in PIECES.items():
        try:
            ok, how = check()
        except Exception as e:  # noqa: BLE001 - a check that breaks says so, the others still run
            ok, how = False, f"the check failed: {type(e).__name__}: {e}"
        out[name] = {"present": ok, "how": how}
    return out


def missing(found: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name, v in found.items() if not v["present"]]


def protocol_probe(work: Path, *, cpu: bool, timeout_s: float = 240.0) -> dict[str, Any]:
    """The catalog's `[target].serve` command in a materialized RMSNorm repo: `look 1 SEED PATH`,
    then `audit 1 SEED2 PATH2`, each reply and its seconds (the first look includes the imports
    and compiling). Unconfined: this checks the protocol, not kopt's sandbox."""
    import shlex
    import sys

    from experiments.h100_wave3 import targets
    from kopt_supervisor.engine.config.toml_io import loads as loads_config

    repo = targets.rms_repo(work / "probe-repo", cpu=cpu)
    serve = getattr(loads_config((repo / "kopt.toml").read_text()).target, "serve", "")
    if not serve:
        return {"ok": False, "why": "the catalog's kopt.toml has no [target].serve"}
    argv = shlex.split(serve)
    if argv and Path(argv[0]).name.startswith("python"):
        argv[0] = sys.executable
    out = work / "probe-out"
    out.mkdir(parents=True, exist_ok=True)
    log = (work / "probe-serve.err").open("wb")
    p = subprocess.Popen(
        argv, cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
    )
    got: dict[str, Any] = {"command": " ".join(argv)}
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert p.stdout is not None
        for text in p.stdout:
            lines.put(text)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        steps = [
            (f"{kind}{suffix}", f"{kind} {n} {secrets.randbits(62)} {out / (kind + str(n) + ext)}", n)
            for n, suffix in ((1, ""), (2, "2"), (3, "3"))  # looks 2 and 3 replay look 1's graphs
            for kind, ext in (("look", ".csv"), ("audit", ".json"))
        ]
        for label, line, n in steps:
            t0 = time.monotonic()
            assert p.stdin is not None
            p.stdin.write(line + "\n")
            p.stdin.flush()
            reply = _reply(lines, timeout_s)
            got[label] = {"reply": reply, "seconds": round(time.monotonic() - t0, 2)}
            if not reply.startswith((f"done {n}", f"audited {n}")):
                got["ok"] = False
                return got
        csv_rows = (out / "look1.csv").read_text().splitlines()
        audit = json.loads((out / "audit1.json").read_text())
        got["look_rows"] = len(csv_rows) - 1
        got["look_header"] = csv_rows[0] if csv_rows else ""
        got["audit_configs"] = len(audit.get("configs") or [])
        got["commitment"] = commitment_problems(out, csv_rows[0].split(",") if csv_rows else [])
        got["ok"] = (
            "calls" in got["look_header"].split(",")
            and got["audit_configs"] == got["look_rows"]
            and not got["commitment"]
        )
        return got
    except Exception as e:  # noqa: BLE001 - recorded
        got.update(ok=False, why=f"{type(e).__name__}: {e}")
        return got
    finally:
        if p.stdin:
            p.stdin.close()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()
        got["stderr_tail"] = (work / "probe-serve.err").read_text(errors="replace").splitlines()[-40:]


def commitment_problems(out: Path, header: list[str]) -> list[str]:
    """Each look's commitment (PATH.sets.json) read by kopt's parser and its audit checked
    against it: the problems found (none: the harness keeps its promise)."""
    from kopt_supervisor.engine.decide import audit as kopt_audit

    columns = tuple(c for c in ("shape", "B", "N", "H", "hd", "dtype", "esize", "dclass") if c in header)
    problems = []
    for n in (1, 2, 3):
        try:
            promise = kopt_audit.parse_commitment((out / f"look{n}.csv.sets.json").read_text(), columns, f"look {n}")
            audited = kopt_audit.parse((out / f"audit{n}.json").read_text(), columns, f"audit {n}")
        except Exception as e:  # noqa: BLE001 - recorded
            problems.append(f"look {n}: {type(e).__name__}: {e}")
            continue
        problems += [
            f"look {n}, {k}: {why}" for k, a in audited.items() if (why := kopt_audit.commitment_problem(a, promise[k]))
        ]
    return problems


def _reply(lines: queue.Queue[str | None], timeout_s: float) -> str:
    """The next protocol reply line (other stdout lines are skipped), or why none came."""
    end = time.monotonic() + timeout_s
    while (left := end - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            return "(the server left)"
        if line.split(" ", 1)[0] in ("done", "audited", "fail", "loaded"):
            return line.strip()
    return f"(no reply in {timeout_s:.0f} s)"
