"""Where a keep's held profile spends the seconds after kopt says go (issue 26: a keep iteration
of the RMSNorm demo was 28-40 s on the H200, 12 s of it the profile, 2026-12-01, part 18).

On a GPU host with ncu, after `kopt demo --kernel rmsnorm --max-iters 0` made the target repo:

    python experiments/profile_after_go.py REPO OUT

runs the bench's `--profile` in REPO under kopt's keep pass of ncu (as the product does, outside
the sandbox), held (KOPT_PROFILE_HOLD) and released HOLD_S seconds after it acknowledged, and
prints per variant the seconds from `go` to the end of ncu, the harness's phase lines, the
launches ncu profiled and the read-back's seconds (ncu --import, both pages at once):

- keep pass (GPU time and L2 bytes), as today;
- GPU time alone (what the L2 counter costs);
- the largest shape's inputs drawn on the host while held too (GPU_DRAW_BYTES lifted for the
  run: its draw's launches leave the profile);
- that, plus the outputs' summaries off (what the host's summaries cost after go);
- unprofiled, held the same way (what ncu costs at all);
- the keep pass beside two idle processes that hold a CUDA context and a fifth of the GPU's
  memory each (as best's and the candidate's served processes do while the product profiles).

- the keep pass with the compile caches the product gives an unconfined tree (sandbox
  cache_env: a folder of the tree's own, empty at first; Triton's kept warm), then with only
  CUDA_CACHE_PATH, then only XDG_CACHE_HOME, of those (which one costs the product's extra);
- the keep pass with its stdin an open pipe kopt never writes (the product starts a held profile
  as a server: stdin and stdout pipes), where the others have /dev/null;
- the keep pass with an empty Triton cache, and with one filled by the bench's plain timed run
  (the served looks' code path) instead of a --profile run: whether the profile compiles.

- the keep pass as the product starts a command given as a string (`/bin/sh -c "..."`, ncu then
  following the shell and python), and with `exec` (the shell replaced by python).

PAG_VARIANTS (comma-separated numbers, 1-14; default 1-6) picks the variants.
"""

from __future__ import annotations

import concurrent.futures
import csv
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.profile.ncu import M_TIME, NcuProfiler
from kopt_supervisor.engine.sandbox.confinement import cache_env

HOLD_S = float(os.environ.get("HOLD_S", "14"))
KERNEL = "_rms_(kernel|whole_tiles)"
LIFT = (
    "import runpy, sys; import kopt_supervisor.kernels.harness.bench as b; b.GPU_DRAW_BYTES = 1 << 40; "
    "sys.argv = ['bench.py'] + sys.argv[1:]; runpy.run_path('bench.py', run_name='__main__')"
)


def launches(folder: Path) -> int:
    path = folder / "ncu.csv"
    if not path.exists():
        return -1
    rows = list(csv.reader(line for line in path.read_text().splitlines() if not line.startswith("==")))
    return max(0, len(rows) - 2)


def run(
    repo: Path,
    out: Path,
    name: str,
    *,
    ncu: str,
    lift: bool,
    outputs: bool,
    extra: dict[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
    shell: str = "",
) -> None:
    folder = out / name.replace(" ", "_")
    folder.mkdir(parents=True, exist_ok=True)
    go = folder / "go"
    for f in (go, Path(f"{go}.held")):
        f.unlink(missing_ok=True)
    env = {
        **os.environ,
        "KOPT_PROFILE": "1",
        "KOPT_PROFILE_SEED": "12345",
        "KOPT_PROFILE_HOLD": str(go),
        "TRITON_CACHE_DIR": str(out / "triton-cache"),
    }
    env.update(extra or {})
    if outputs:
        env["KOPT_PROFILE_OUTPUTS"] = str(folder / "outputs.json")
    inner = [sys.executable, "-c", LIFT] if lift else [sys.executable, "bench.py"]
    argv = [*inner, "--profile", "--dtypes", "bfloat16"]
    if shell:  # as the product runs a command given as a string: /bin/sh -c (with `exec`: sh replaced by python)
        argv = ["/bin/sh", "-c", ("exec " if shell == "exec" else "") + shlex.join(argv)]
    prof = None
    if ncu:
        prof = NcuProfiler().for_keep("time")
        if ncu == "time":
            prof = NcuProfiler(metrics=(M_TIME,), outside_ranges="full")
        step = prof.next_pass(argv, folder, KERNEL, [])
        assert step is not None
        argv = list(step.argv)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=repo, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    held = Path(f"{go}.held")
    while not held.exists() and proc.poll() is None:
        time.sleep(0.01)
    t_ack = time.monotonic()
    time.sleep(HOLD_S)
    go.write_text("go")
    t_go = time.monotonic()
    if proc.stdin is not None:  # held open, never written (as the product's server pipe is) until the end
        while proc.poll() is None:
            time.sleep(0.05)
        proc.stdin.close()
        proc.stdin = None
    _, err = proc.communicate(timeout=600)
    t_end = time.monotonic()
    read_s = 0.0
    if prof is not None:
        cmds = prof.after_commands(folder)
        t1 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(len(cmds) or 1) as pool:
            list(pool.map(lambda c: subprocess.run(c, capture_output=True, timeout=300), cmds))
        read_s = time.monotonic() - t1
    counted = f", {launches(folder)} launches" if ncu else ""
    print(
        f"== {name}: ack {t_ack - t0:.2f} s, go->end {t_end - t_go:.2f} s, read-back {read_s:.2f} s "
        f"(rc {proc.returncode}){counted}",
        flush=True,
    )
    for line in err.splitlines():
        if line.startswith(("profile ", "bench phases")) or "Error" in line:
            print("   " + line[:220], flush=True)
    if proc.returncode != 0:
        print(err[-2000:], flush=True)


IDLE = (
    "import time, torch; free, total = torch.cuda.mem_get_info(); "
    "x = torch.empty(int(total * 0.2), dtype=torch.uint8, device='cuda'); x.fill_(1); torch.cuda.synchronize(); "
    "print('ready', flush=True); time.sleep(900)"
)


def beside_idle(repo: Path, out: Path, name: str) -> None:
    """The keep pass while two idle CUDA processes hold their contexts and memory."""
    idle = [subprocess.Popen([sys.executable, "-c", IDLE], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for p in idle:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        run(repo, out, name, ncu="keep", lift=False, outputs=True)
    finally:
        for p in idle:
            p.kill()
            p.wait()


def fresh(only: str = "") -> dict[str, str]:
    """The product's cache variables for an unconfined tree, in a new empty folder (Triton's left
    on the warm cache); `only`: that variable alone."""
    folder = Path(tempfile.mkdtemp(prefix="pag-cache-"))
    env = {k: v for k, v in cache_env(folder).items() if k != "TRITON_CACHE_DIR"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return {only: env[only]} if only else env


def triton_cache(repo: Path, out: Path, fill: str) -> dict[str, str]:
    """A Triton cache of its own: empty, or filled by the bench's plain timed run (the served
    looks' code path) rather than by a --profile run."""
    folder = Path(tempfile.mkdtemp(prefix="pag-triton-", dir=out))
    if fill == "timed":
        subprocess.run(
            [sys.executable, "bench.py", "--dtypes", "bfloat16"],
            cwd=repo,
            env={**os.environ, "TRITON_CACHE_DIR": str(folder)},
            capture_output=True,
            timeout=300,
        )
    return {"TRITON_CACHE_DIR": str(folder)}


def main() -> int:
    repo, out = Path(sys.argv[1]), Path(sys.argv[2])
    chosen = {int(v) for v in os.environ.get("PAG_VARIANTS", "1,2,3,4,5,6").split(",")}
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "bench.py", "--profile", "--dtypes", "bfloat16"],
        cwd=repo,
        env={**os.environ, "TRITON_CACHE_DIR": str(out / "triton-cache")},
        capture_output=True,
        timeout=300,
    )  # fills the Triton cache, as the candidate's served process has when its profile runs

    def keep(name: str, **kw: Any) -> Callable[[], None]:
        """A variant of kopt's keep pass (outputs summarised, the run's own draws) with `kw` changed."""
        return lambda: run(repo, out, name, **{"ncu": "keep", "lift": False, "outputs": True, **kw})

    variants: dict[int, Callable[[], None]] = {
        1: keep("keep pass"),
        2: keep("time alone", ncu="time"),
        3: keep("keep pass, largest drawn while held", lift=True),
        4: keep("keep pass, largest drawn while held, no outputs", lift=True, outputs=False),
        5: keep("unprofiled, largest drawn while held", ncu="", lift=True),
        6: lambda: beside_idle(repo, out, "keep pass beside two idle CUDA processes"),
        # the extra environments are made when the variant runs, not when the table is
        7: lambda: keep("keep pass, the tree's own caches", extra=fresh())(),
        8: lambda: keep("keep pass, CUDA_CACHE_PATH fresh", extra=fresh("CUDA_CACHE_PATH"))(),
        9: lambda: keep("keep pass, XDG_CACHE_HOME fresh", extra=fresh("XDG_CACHE_HOME"))(),
        10: keep("keep pass, stdin an open pipe", stdin=subprocess.PIPE),
        11: lambda: keep("keep pass, an empty Triton cache", extra=triton_cache(repo, out, ""))(),
        12: lambda: keep("keep pass, Triton's cache filled by a timed run", extra=triton_cache(repo, out, "timed"))(),
        13: keep("keep pass under /bin/sh -c, as the product", shell="sh"),
        14: keep("keep pass under /bin/sh -c exec", shell="exec"),
    }
    for n in sorted(chosen):
        variants[n]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
