"""Is the engine's slower held profile its environment or its circumstances? (issue 26; part 18 found
each small config's four profiled calls at 0.51 s inside the engine and 0.14-0.24 s outside it.)

On the device, around a product run:

    python experiments/profile_replay.py watch CAPTURES &     # every held profile's process, as started
    ... the RMSNorm demo (experiments/h100_wave3.sh part1) ...
    kill %1
    python experiments/profile_replay.py replay CAPTURES OUT

`watch` saves, for every process whose environment names KOPT_PROFILE_HOLD, its command line,
working directory and environment, and its parent's (ncu's): CAPTURES/<pid>.json.

`replay` takes the last capture whose tree still exists and runs ncu's exact command again, here,
outside the engine, held and released as the engine does, in three ways:

- A: the captured environment (ncu's, as the engine and the sandbox gave it), only the go file
  and the output paths moved;
- B: this shell's environment, with the captured compile caches and KOPT_PROFILE_* variables
  (what differs from A: everything else the engine sets);
- A again.

Before them, one plain timed run of the tree with the captured caches fills Triton's cache (the
engine removed the candidates' caches). It prints each variant's per-config lines (the harness's
`profile CONFIG: ... calls X s`) and writes OUT/replay.json.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HOLD = "KOPT_PROFILE_HOLD"
LINE = re.compile(r"^profile (\S+) \S+: inputs ([0-9.]+) s, calls ([0-9.]+) s")


def read_proc(pid: int) -> dict | None:
    base = Path(f"/proc/{pid}")
    try:
        env = dict(
            item.split("=", 1)
            for item in (base / "environ").read_bytes().decode(errors="replace").split("\0")
            if "=" in item
        )
        cmd = [a for a in (base / "cmdline").read_bytes().decode(errors="replace").split("\0") if a]
        cwd = os.readlink(base / "cwd")
        ppid = int((base / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return {"pid": pid, "ppid": ppid, "cmd": cmd, "cwd": cwd, "env": env}


def watch(captures: Path) -> None:
    captures.mkdir(parents=True, exist_ok=True)
    seen: set[int] = set()
    while True:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in seen:
                continue
            info = read_proc(int(entry))
            if info is None or HOLD not in info["env"]:
                continue
            seen.add(info["pid"])
            parent = read_proc(info["ppid"])
            if parent is None or "ncu" not in " ".join(parent["cmd"][:2]):
                continue  # the held python's parent is ncu; a process it started carries the variable too
            info["parent"] = parent
            (captures / f"{info['pid']}.json").write_text(json.dumps(info, indent=1) + "\n")
        time.sleep(0.2)


def moved(cmd: list[str], out: Path) -> list[str]:
    """ncu's argv with its report and log written into `out`."""
    argv = list(cmd)
    for flag, name in (("--export", "ncu"), ("--log-file", "ncu.csv")):
        if flag in argv:
            argv[argv.index(flag) + 1] = str(out / name)
    return argv


def run_held(argv: list[str], env: dict[str, str], cwd: str, out: Path, hold_s: float = 3.0) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    go = out / "go"
    env = {**env, HOLD: str(go), "KOPT_PROFILE_OUTPUTS": str(out / "outputs.json")}
    t0 = time.monotonic()
    with open(out / "stderr", "w") as err, open(out / "stdout", "w") as so:
        proc = subprocess.Popen(moved(argv, out), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=so, stderr=err)
        held = Path(f"{go}.held")
        while not held.exists() and proc.poll() is None and time.monotonic() - t0 < 90:
            time.sleep(0.05)
        acked = time.monotonic() - t0
        time.sleep(hold_s)
        go.write_text("go\n")
        t_go = time.monotonic()
        code = proc.wait(timeout=300)
        after = time.monotonic() - t_go
    lines = (out / "stderr").read_text(errors="replace").splitlines()
    per = {m.group(1): float(m.group(3)) for ln in lines if (m := LINE.match(ln))}
    return {
        "exit": code,
        "acknowledged_s": round(acked, 2),
        "go_to_end_s": round(after, 2),
        "calls_s": per,
        "phases": [ln for ln in lines if ln.startswith("bench phases")],
    }


def replay(captures: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    found = sorted(captures.glob("*.json"), key=lambda p: p.stat().st_mtime)
    caps = [json.loads(p.read_text()) for p in found]
    caps = [c for c in caps if Path(c["cwd"]).is_dir()]
    if not caps:
        print("no capture whose tree still exists")
        return
    cap = caps[-1]
    ncu_env = cap["parent"]["env"]
    argv = cap["parent"]["cmd"]
    print("ncu argv:", " ".join(argv))
    print("cwd:", cap["cwd"])
    mine = dict(os.environ)
    diff = {k: v for k, v in ncu_env.items() if mine.get(k) != v}
    gone = sorted(k for k in mine if k not in ncu_env)
    print("captured env, where it differs from this shell's:", json.dumps(diff, indent=1))
    print("in this shell, not in the captured env:", gone)
    inner = argv[argv.index("--log-file") + 2 :] if "--log-file" in argv else argv[-4:]
    keep_keys = [
        k
        for k in ncu_env
        if k.startswith(
            (
                "KOPT_PROFILE",
                "TRITON",
                "CUDA_CACHE",
                "XDG_CACHE",
                "PYTHONPYCACHE",
                "TORCH",
                "NUMBA",
                "CUPY",
                "CUDA_VISIBLE",
                "CUDA_DEVICE",
            )
        )
    ]
    plain = [a for a in inner if a != "--profile"]
    for k in ("TRITON_CACHE_DIR", "TRITON_HOME", "CUDA_CACHE_PATH", "XDG_CACHE_HOME", "PYTHONPYCACHEPREFIX"):
        if k in ncu_env:
            Path(ncu_env[k]).mkdir(parents=True, exist_ok=True)
    warm_env = {k: v for k, v in ncu_env.items() if k not in (HOLD, "KOPT_PROFILE_OUTPUTS")}
    t0 = time.monotonic()
    w = subprocess.run(plain, cwd=cap["cwd"], env=warm_env, capture_output=True, text=True, timeout=300)
    print(f"warm run ({' '.join(plain)}): exit {w.returncode} in {time.monotonic() - t0:.1f} s")
    results = {}
    variants = [
        ("A_captured_env", ncu_env),
        ("B_shell_env", {**mine, **{k: ncu_env[k] for k in keep_keys}}),
        ("A_again", ncu_env),
    ]
    for name, env in variants:
        env = {k: v for k, v in env.items() if k not in (HOLD, "KOPT_PROFILE_OUTPUTS")}
        r = run_held(argv, env, cap["cwd"], out / name)
        results[name] = r
        print(f"{name}: exit {r['exit']}, go->end {r['go_to_end_s']} s; calls s per config: {r['calls_s']}")
        for ph in r["phases"]:
            print("   ", ph)
    (out / "replay.json").write_text(
        json.dumps({"capture": cap["pid"], "results": results, "env_diff": diff, "env_missing": gone}, indent=1) + "\n"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["watch"]:
        watch(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["replay"]:
        replay(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        raise SystemExit(__doc__)
