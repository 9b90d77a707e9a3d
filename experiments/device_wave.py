"""What every device wave's parts share (experiments/h100_wave2, experiments/h100_wave3): the
summary (summary.json and summary.md, rewritten after every change so that a part cut short
keeps what it measured), the machine's description, commands run with a deadline, a kopt run
asked to stop and its records exported, and the tarball that carries the raw outputs back (the
device returns at most 8 files per command, two folders down).

Nothing here holds a figure of its own: every number in a summary comes from a command the
run made, with that command beside it. A wave names itself (`LOG_NAME`, a `Summary` subclass's
TITLE, `machine_info`'s commit variable and scripts); everything else is the same for every wave.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACK_LIMIT_BYTES = 15 * 1024 * 1024
"""The device returns files of at most 16 MiB: each tarball stays under this."""
LOG_NAME = "wave"
"""The prefix of this process's progress lines (`[wave3] ...`); a wave's entry point sets it."""


def say(text: str) -> None:
    print(f"[{LOG_NAME}] {text}", flush=True)


def fresh_work_dir(base: Path, name: str, smoke: bool) -> tuple[Path, Path]:
    """(work, work/raw), emptied: a part's scratch folder outside /tmp (a sandboxed proposer
    cannot see /tmp, /run and kin)."""
    work = (base / f"{name}{'-smoke' if smoke else ''}").resolve()
    if str(work).startswith(("/tmp/", "/var/tmp/", "/dev/shm/", "/run/")):
        raise SystemExit(f"--work {work}: the sandbox hides that folder from a proposer; choose one elsewhere")
    shutil.rmtree(work, ignore_errors=True)
    raw = work / "raw"
    raw.mkdir(parents=True)
    return work, raw


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shell_line(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


# ---------------------------------------------------------------------------------------
# The summary


class Summary:
    """summary.json (and summary.md rendered from it) in `out`, saved at every change."""

    TITLE = "device wave"

    def __init__(self, out: Path, part: str, mode: str, command: str) -> None:
        self.out = out
        self.path = out / "summary.json"
        self.data: dict[str, Any] = {
            "part": part,
            "mode": mode,
            "command": command,
            "started_utc": utc_now(),
            "finished_utc": None,
            "machine": {},
            "steps": {},
            "notes": [],
        }
        self.save()

    def step(self, name: str, **fields: Any) -> dict[str, Any]:
        entry: dict[str, Any] = self.data["steps"].setdefault(name, {})
        entry.update(fields)
        self.save()
        return entry

    def note(self, text: str) -> None:
        say(f"NOTE: {text}")
        self.data["notes"].append(text)
        self.save()

    def finish(self) -> None:
        self.data["finished_utc"] = utc_now()
        self.save()

    def save(self) -> None:
        text = json.dumps(self.data, indent=2, sort_keys=False, default=str) + "\n"
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(text)
        tmp.replace(self.path)
        md = self.out / "summary.md"
        tmp_md = md.with_suffix(".md.tmp")
        tmp_md.write_text(render_md(self.data, self.TITLE))
        tmp_md.replace(md)


JSON_ONLY = (
    "iterations",
    "iteration",
    "rows",
    "groups",
    "per_class_ratio",
    "config",
    "proposed",
    "candidates",
    "decisions",
    "records",
)
"""Step fields too long for summary.md: summary.json has them (the tables show their gist)."""


def render_md(data: dict[str, Any], title: str = "device wave") -> str:
    """The summary as markdown: the command, the machine, then each step with its command(s),
    its outcome, its tables and its other figures."""
    out = [
        f"# {title} {data['part']} ({data['mode']})",
        "",
        f"- command: `{data['command']}`",
        f"- started {data['started_utc']}, finished {data['finished_utc']}",
    ]
    for key in ("commit", "gpu", "missing_pieces"):
        if data.get(key):
            out.append(f"- {key}: {_md_value(data[key])}")
    machine = data.get("machine") or {}
    if machine:
        out += ["", "## Machine", ""]
        out += [f"- {k}: {_md_value(v)}" for k, v in machine.items()]
    if data.get("notes"):
        out += ["", "## Notes", ""] + [f"- {n}" for n in data["notes"]]
    for name, step in (data.get("steps") or {}).items():
        ok = step.get("ok")
        out += ["", f"## {name}: {'ok' if ok else 'FAILED' if ok is False else 'not finished'}", ""]
        for cmd in step.get("commands", []):
            out.append(f"    $ {cmd}")
        if step.get("commands"):
            out.append("")
        for key, value in step.items():
            if key in ("ok", "commands", "tables", "traceback") or key in JSON_ONLY:
                continue
            out.append(f"- {key}: {_md_value(value)}")
        for title_, table in (step.get("tables") or {}).items():
            out += ["", f"**{title_}**", "", *md_table(table["columns"], table["rows"])]
        if step.get("traceback"):
            out += ["", "```", step["traceback"].rstrip(), "```"]
    return "\n".join(out) + "\n"


def _md_value(v: Any) -> str:
    if isinstance(v, dict | list):
        text = json.dumps(v, default=str)
        return f"`{text}`" if len(text) < 400 else f"`{text[:400]}...` (summary.json has all of it)"
    return str(v)


def md_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def cell(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


@contextlib.contextmanager
def measured(summary: Summary, name: str, **fields: Any) -> Iterator[dict[str, Any]]:
    """One measurement: its entry in the summary, its wall time, and any exception recorded
    (loudly) instead of raised, so the next measurement still runs."""
    entry = summary.step(name, ok=None, started_utc=utc_now(), **fields)
    entry.setdefault("commands", [])
    t0 = time.monotonic()
    print(f"\n[{LOG_NAME}] ===== {name} =====", flush=True)
    try:
        yield entry
    except Exception as e:  # noqa: BLE001 - one failing measurement must not lose the others
        entry["ok"] = False
        entry["error"] = f"{type(e).__name__}: {e}"
        entry["traceback"] = traceback.format_exc()[-4000:]
        say(f"!!!!! {name} FAILED: {entry['error']}")
    else:
        if entry.get("ok") is None:
            entry["ok"] = True
        if entry["ok"] is False:
            say(f"!!!!! {name} FAILED: {entry.get('error', 'see summary')}")
    finally:
        entry["step_wall_s"] = round(time.monotonic() - t0, 2)
        summary.save()


def print_tail(summary: Summary, *, tables: Callable[[str, str], bool] = lambda step, title: False) -> None:
    """The end of the output (what the device's reply shows): the tables `tables(step, title)`
    picks, then every step's outcome."""
    for name, step in summary.data["steps"].items():
        for title, table in (step.get("tables") or {}).items():
            if table["rows"] and tables(name, title):
                print(f"\n[{LOG_NAME}] {name}: {title}")
                print("\n".join(md_table(table["columns"], table["rows"][:30])))
    print(f"\n[{LOG_NAME}] ======== summary ========")
    for name, s in summary.data["steps"].items():
        status = "ok" if s.get("ok") else "FAILED" if s.get("ok") is False else "unfinished"
        extra = s.get("headline") or s.get("error") or s.get("skipped") or ""
        say(f"{name}: {status} ({s.get('step_wall_s', '?')} s) {extra}")
    say(f"summary: {summary.path}")


# ---------------------------------------------------------------------------------------
# Commands with a deadline


@dataclass
class CmdResult:
    argv: list[str]
    rc: int | None
    wall_s: float
    log: Path
    stopped: bool = False
    """The graceful stop (`on_stop`) was sent at the soft deadline."""
    killed: bool = False
    """The process group was killed at the hard deadline."""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.killed

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": shell_line(self.argv),
            "rc": self.rc,
            "wall_s": round(self.wall_s, 2),
            "stopped_at_deadline": self.stopped,
            "killed": self.killed,
            "log": self.log.name,
        }


def run_cmd(
    argv: Sequence[str],
    log: Path,
    *,
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stop_after_s: float | None = None,
    on_stop: Callable[[], None] | None = None,
    echo: str = "",
    while_running: Callable[[], None] | None = None,
) -> CmdResult:
    """Run `argv` in its own process group, its output to `log` (and, prefixed with `echo`, to
    stdout as it comes). At `stop_after_s` call `on_stop` (a kopt run: `kopt stop TAG`); at
    `timeout_s` kill the group (SIGTERM, then SIGKILL). `while_running` is called about every
    quarter second while it runs (a driver watching the run's store)."""
    argv = [str(a) for a in argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    say(
        f"$ {shell_line(argv)}  (limit {timeout_s:.0f} s"
        + (f", stop at {stop_after_s:.0f} s" if stop_after_s is not None else "")
        + ")"
    )
    t0 = time.monotonic()
    stopped = killed = False
    with open(log, "wb") as f:
        f.write(f"$ {shell_line(argv)}\n".encode())
        f.flush()
        p = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

        def pump() -> None:
            assert p.stdout is not None
            for line in iter(p.stdout.readline, b""):
                f.write(line)
                f.flush()
                if echo:
                    sys.stdout.buffer.write(echo.encode() + line)
                    sys.stdout.flush()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        while p.poll() is None:
            elapsed = time.monotonic() - t0
            if stop_after_s is not None and on_stop is not None and not stopped and elapsed >= stop_after_s:
                stopped = True
                say(f"soft deadline ({stop_after_s:.0f} s): asking it to stop")
                try:
                    on_stop()
                except Exception as e:  # noqa: BLE001 - the hard deadline still holds
                    say(f"the stop request failed: {e}")
            if elapsed >= timeout_s:
                killed = True
                say(f"hard deadline ({timeout_s:.0f} s): killing process group {p.pid}")
                _kill_group(p)
                break
            if while_running is not None:
                try:
                    while_running()
                except Exception as e:  # noqa: BLE001 - a driver's failure is logged, the run goes on
                    say(f"the driver failed: {type(e).__name__}: {e}")
            time.sleep(0.25)
        p.wait()
        reader.join(10)
    return CmdResult(argv, p.returncode, time.monotonic() - t0, log, stopped, killed)


def _kill_group(p: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def capture(argv: Sequence[str], timeout_s: float = 30.0, env: dict[str, str] | None = None) -> str:
    """A short command's stdout+stderr (or why it could not run)."""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(could not run {shell_line(argv)}: {e})"
    return (p.stdout + p.stderr).strip() or f"(no output, exit {p.returncode})"


class Budget:
    """The part's wall-clock budget: each step takes its share of what is left."""

    def __init__(self, total_s: float) -> None:
        self.total_s = total_s
        self.t0 = time.monotonic()

    def left(self) -> float:
        return self.total_s - (time.monotonic() - self.t0)

    def share(self, want_s: float, reserve_s: float = 0.0, floor_s: float = 20.0) -> float:
        """`want_s`, or less when only that much is left after `reserve_s` (never below floor_s)."""
        return max(floor_s, min(want_s, self.left() - reserve_s))


# ---------------------------------------------------------------------------------------
# kopt, its runs, the machine


def kopt_argv(root: Path, *args: str) -> list[str]:
    """kopt's CLI under this interpreter (the one the setup installed kopt into)."""
    return [sys.executable, "-m", "kopt_supervisor.kopt_tui.cli", "--root", str(root), *args]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("KOPT_ROOT", None)
    return {**env, **(extra or {})}


def stopper(root: Path, tag: str) -> Callable[[], None]:
    """`kopt stop TAG`: the engine ends its running step and stops (what it recorded stays)."""

    def stop() -> None:
        subprocess.run(kopt_argv(root, "stop", tag), timeout=30, capture_output=True, env=child_env())

    return stop


def kopt_engine(
    raw: Path,
    root: Path,
    tag: str,
    args: Sequence[str],
    log_name: str,
    *,
    soft_s: float,
    grace_s: float = 45.0,
    env: dict[str, str] | None = None,
    while_running: Callable[[], None] | None = None,
) -> CmdResult:
    """A kopt command that runs the engine (demo --headless, run --foreground): asked to stop
    (`kopt stop TAG`) at soft_s, killed at soft_s + grace_s. What it recorded stays in run.db."""
    return run_cmd(
        kopt_argv(root, *args),
        raw / log_name,
        timeout_s=soft_s + grace_s,
        stop_after_s=soft_s,
        on_stop=stopper(root, tag),
        env=child_env(env),
        cwd=REPO,
        echo=f"  [{tag}] ",
        while_running=while_running,
    )


def records_export(root: Path, tag: str) -> list[dict[str, Any]]:
    """Every iteration's whole record, as memory/vN.json carries it plus the indexed columns."""
    from kopt_supervisor.engine.workspace import Workspace

    ws = Workspace(root, tag)
    with ws.open_store(readonly=True) as store:
        return [
            {
                "version": it.version,
                "status": str(it.status),
                "masked": it.masked,
                "hypothesis": it.hypothesis,
                "target_class": it.target_class,
                "scope": it.scope,
                "started_at": it.started_at,
                "finished_at": it.finished_at,
                "record": dict(it.record),
            }
            for it in store.iterations()
        ]


WS_FILES = ("results.md", "performance.md", "README.md", "engine.log", "kopt.toml")
WS_DIRS = ("logs", "profiles", "memory", "plans")


def export_run(raw: Path, root: Path, tag: str) -> Path:
    """A run's evidence under raw/ws_TAG: every record as JSON, a copy of its run.db, its
    report and status, its logs, profiles, memory and plans. Returns the folder."""
    ws = root / tag
    export = raw / f"ws_{tag}"
    export.mkdir(parents=True, exist_ok=True)
    (export / "records.json").write_text(json.dumps(records_export(root, tag), indent=1, default=str))
    copy_db(ws, export / "run.db")
    for args, name in ((["report", tag], "report.log"), (["status", tag, "--json"], "status.json")):
        run_cmd(kopt_argv(root, *args), export / name, timeout_s=90, env=child_env(), cwd=REPO)
    for keep in WS_FILES:
        if (ws / keep).is_file():
            shutil.copy2(ws / keep, export / keep)
    for sub in WS_DIRS:
        if (ws / sub).is_dir():
            shutil.copytree(ws / sub, export / sub, dirs_exist_ok=True)
    return export


def sandbox_choice(summary: Summary, knob: str) -> bool:
    """--no-sandbox or not: the environment variable `knob` = on|off|auto (auto: bubblewrap when
    it works here)."""
    want = os.environ.get(knob, "auto")
    from kopt_supervisor.engine.sandbox import probe

    support = probe()
    if want == "off" or (want == "auto" and not support.works):
        summary.note(f"runs use --no-sandbox ({knob}={want}; bubblewrap: {support.summary()})")
        return True
    if not support.works:
        summary.note(f"{knob}=on but bubblewrap does not work here: {support.summary()}; the runs will refuse")
    return False


def find_ncu() -> str | None:
    """ncu on PATH, else where CUDA and Nsight Compute install it (then PATH gains its folder)."""
    found = shutil.which("ncu")
    if found:
        return found
    candidates = [Path("/usr/local/cuda/bin/ncu"), *sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"))]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            os.environ["PATH"] = f"{c.parent}:{os.environ.get('PATH', '')}"
            return str(c)
    return None


def gpu_name() -> str:
    """The GPU's name as nvidia-smi reports it, or why there is none."""
    if not shutil.which("nvidia-smi"):
        return "no GPU (no nvidia-smi on PATH)"
    return capture(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()[0]


def machine_info(*, smoke: bool, commit_env: str, scripts: Iterable[Path], digest_key: str) -> dict[str, Any]:
    """What ran the measurements: read off the machine now, never written from memory. The
    commit is `commit_env`'s value (the device's copy has no .git) or the checkout's HEAD;
    `digest_key` holds one hash over the wave's own `scripts`."""
    info: dict[str, Any] = {
        "utc": utc_now(),
        "hostname": platform.node(),
        "kernel": platform.release(),
        "python": f"{platform.python_version()} ({sys.executable})",
    }
    if shutil.which("nvidia-smi"):
        info["nvidia_smi_L"] = capture(["nvidia-smi", "-L"])
        info["gpu"] = capture(
            [
                "nvidia-smi",
                "--query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit,memory.total",
                "--format=csv,noheader",
            ]
        )
    else:
        info["gpu"] = "no nvidia-smi on PATH" + (" (smoke mode)" if smoke else "")
    for dist in ("torch", "triton", "kopt-supervisor", "ray", "textual", "nvidia-ml-py", "psutil"):
        try:
            info[f"{dist}_version"] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            info[f"{dist}_version"] = "not installed"
    ncu = find_ncu()
    info["ncu"] = f"{ncu}: {capture([ncu, '--version']).splitlines()[-1]}" if ncu else "not found"
    try:
        from kopt_supervisor.engine.sandbox import probe

        info["sandbox"] = probe().summary()
    except Exception as e:  # noqa: BLE001 - recorded
        info["sandbox"] = f"probe failed: {e}"
    info["repo_commit"] = os.environ.get(commit_env) or git_head()
    info[digest_key] = digest(scripts)
    return info


def git_head() -> str:
    if not (REPO / ".git").exists():
        return "unknown (no .git in the copy; the lead records the commit it sent)"
    out = capture(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    dirty = capture(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return out + (" (with uncommitted changes)" if dirty and not dirty.startswith("(") else "")


def digest(paths: Iterable[Path]) -> str:
    """One hash over files (name and content): which version of a wave's scripts produced a summary."""
    h = hashlib.sha256()
    for p in sorted(paths):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------
# Packing what comes back


SKIP_DIRS = ("cache", "best", "cand", "lanes", ".repos", "__pycache__", "looks")
"""Workspace folders that are trees or compile caches, not evidence."""
PROFILE_SIDES = ("best", "cand")
"""...except these under profiles/: a profile's folders, named after the tree's side."""


def pack(tgz: Path, members: Sequence[tuple[Path, str]], limit_bytes: int = PACK_LIMIT_BYTES) -> dict[str, Any]:
    """A gzipped tar of `members` (path, name in the archive) without trees and caches; if it
    is over `limit_bytes`, profiler reports (*.ncu-rep) are left out, then files over 1 MiB.
    Returns what was left out."""
    dropped: list[str] = []
    for level in range(3):
        with tarfile.open(tgz, "w:gz") as tar:
            for path, name in members:
                if not path.exists():
                    continue
                tar.add(path, arcname=name, filter=functools.partial(_keep, level=level, dropped=dropped))
        if tgz.stat().st_size <= limit_bytes:
            break
        dropped.clear()
    return {"file": tgz.name, "bytes": tgz.stat().st_size, "left_out": sorted(set(dropped))[:50]}


def _skipped(parts: tuple[str, ...]) -> bool:
    """A path inside a tree or a cache (SKIP_DIRS), except a profile's folder of a side
    (profiles/vN/best, profiles/vN/cand: ncu's CSV pages and the summary a profile is read from)."""
    return any(
        p in SKIP_DIRS and not (p in PROFILE_SIDES and "profiles" in parts[:i]) for i, p in enumerate(parts) if i
    )


def _keep(ti: tarfile.TarInfo, *, level: int, dropped: list[str]) -> tarfile.TarInfo | None:
    if _skipped(Path(ti.name).parts) or ti.issym() or ti.islnk():
        return None
    if level >= 1 and ti.name.endswith(".ncu-rep"):
        dropped.append(ti.name)
        return None
    if level >= 2 and ti.isfile() and ti.size > 1024 * 1024:
        dropped.append(ti.name)
        return None
    return ti


def copy_db(ws_dir: Path, dest: Path) -> None:
    """A consistent copy of a workspace's run.db (SQLite's backup: the WAL folded in)."""
    import sqlite3

    src = sqlite3.connect(f"file:{ws_dir / 'run.db'}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(dest)
        with dst:
            src.backup(dst)
        dst.close()
    finally:
        src.close()
