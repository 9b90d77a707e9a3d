"""Faulty benchmarks: hang, crash, non-zero exit, no CSV, empty or malformed CSV, wrong or
missing columns, NaN/Inf, gigabytes of output, a CSV left over from an earlier run, a bench
that writes into the tree. Each candidate's bench misbehaves through a knob of its
kernel.json (tests/fake_target/bench.py); best/ keeps a sound bench. For each: what kopt
did (status and reason in the store) and what was preserved (BEST_COMMIT, best/, counters)."""

from __future__ import annotations

import json
import random

import pytest

from kopt_supervisor.engine import adapters, api, metrics
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.daemon import run_engine
from tests.conftest import git
from tests.reliability.helpers import FAST, check_invariants, events, init, iterations, memory

STALE = (
    "do:k['no_csv'] = True; json.dump(k, open('kernel.json', 'w')); "
    "os.utime('results/stale.csv', (time.time() + 86400,) * 2)"
)

# (proposer action, expected status, expected words in the reason)
FAULTS = [
    ("knob:crash", "fail_bench", "bench on cand/ exit code 3"),
    ("knob:segv", "fail_bench", "bench on cand/ exit code 139 (SIGSEGV)"),
    ("knob:hang", "fail_bench", "bench on cand/ timed out after 2 s"),
    ("knob:no_csv", "fail_bench", "no CSV matching 'results/*.csv' was written by this run in cand/"),
    (STALE, "fail_bench", "no CSV matching 'results/*.csv' was written by this run in cand/"),
    ("knob:empty", "fail_bench", "out.csv: empty CSV"),
    ("knob:malformed", "fail_bench", "out.csv: malformed CSV"),
    ('knob:drop="us"', "fail_bench", "out.csv: metric column 'us' missing"),
    ('knob:drop="cls"', "fail_bench", "out.csv: class_by column 'cls' missing"),
    ('knob:drop="err"', "fail_bench", "cannot evaluate 'err == 0'"),
    ("knob:nan", "fail_correctness", "us missing or not a number"),
    ("knob:inf", "fail_correctness", "us is inf"),
    ("knob:flood_mib=8", "fail_bench", "wrote more output than the limit ([target].max_output_mib); killed"),
    ("knob:write_tree", "fail_bench", "the bench modified tracked file(s) in cand/: kopt.toml (restored)"),
]


@pytest.mark.slow
def test_every_bench_fault_fails_the_candidate_and_preserves_the_run(fake_env, monkeypatch):
    script = [a for a, _, _ in FAULTS] + ["gain5"]
    repo, root = fake_env(
        script,
        toml_replace={
            **FAST,
            'csv = "-"': 'csv = "results/*.csv"',
            "timeout_s = 20\n\n[decide]": "timeout_s = 2\nmax_output_mib = 1\n\n[decide]",
            'kind = "command"': 'kind = "command"\nrepair_attempts = 0',
        },
        extra_toml="\n[stop]\nconsecutive_failures = 50\n",
    )
    # a stale CSV, tracked in the repo: it would read as a 100x speedup
    (repo / "results").mkdir()
    (repo / "results" / "stale.csv").write_text(
        "shape,cls,n,us,err\n"
        + "".join(
            f"s{i},{c},{n},0.1,0\n"
            for i, (c, n) in enumerate([("small", 128), ("small", 256), ("large", 4096), ("large", 8192)])
        )
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "stale results")
    monkeypatch.setenv("FAKE_CSV_TO", "results/out.csv")
    ws = init(repo, root)
    base = git(repo, "rev-parse", "HEAD")

    assert run_engine(ws, max_iters=len(script)) == 0

    its = iterations(ws)
    assert len(its) == len(script) + 1
    for (action, status, words), it in zip(FAULTS, its[1:], strict=False):
        reason = it.record["decision"]["reason"]
        assert it.status == status and words in reason, (action, it.status, reason)
        assert it.commit is None and it.best_commit_before == base, action
        assert memory(ws, it.version)["status"] == status
    # the run went on: the sound candidate after all of them is kept, on the unchanged baseline
    last = its[-1]
    assert last.status == "keep" and last.best_commit_before == base
    st = api.status(ws)
    assert st["consecutive_regressions"] == 0 and st["keeps"] == 1
    check_invariants(ws, repo)
    # best/'s bench never ran a faulty kernel, and what a bench wrote is not in the keep
    assert "# written by the bench" not in (ws.best / "kopt.toml").read_text()
    assert git(repo, "ls-tree", "-r", "--name-only", "kopt/t").splitlines() == [
        "bench.py",
        "kernel.json",
        "kopt.toml",
        "results/stale.csv",
    ]
    # the flood was cut at the limit, not written in full
    assert (ws.log_dir(13) / "eval_r0_cand.out").stat().st_size <= 2**20


def test_csv_reader_survives_garbage(tmp_path):
    """Fuzz: mangled CSVs give a Measurement or a one-line BenchError, never another error."""
    cfg = loads_config('[target]\nbench = "b"\nmetric = "us"\ncorrect = "err == 0"\nclass_by = ["cls"]\n').target
    good = b"shape,cls,n,us,err\ns0,small,128,10.0,0\ns1,large,4096,120.5,0\n"
    rng = random.Random(7)
    path = tmp_path / "fuzz.csv"  # removed with the test's folder, not left in /tmp
    for _ in range(400):
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            op = rng.randrange(4)
            i = rng.randrange(len(data) + 1)
            if op == 0 and data:
                del data[i % len(data)]
            elif op == 1:
                data.insert(i, rng.choice(b',"\n\r\x00 ;\xff\xfe-e.9nNaIif'))
            elif op == 2:
                data[i:i] = rng.randbytes(rng.randint(1, 20))
            else:
                data = data[:i]
        path.write_bytes(bytes(data))
        try:
            m = adapters.read_measurement(path, cfg)
        except metrics.BenchError as e:
            assert "\n" not in str(e) and str(e).startswith("fuzz.csv")
        else:
            assert all(c.ok or c.reasons for c in m.configs.values())


@pytest.mark.slow
def test_a_baseline_run_that_fails_once_is_run_again_and_said_one_that_always_fails_stops_the_run(
    fake_env,
):
    # the unmodified code failing only sometimes is the bench's own flakiness (Triton's layer-norm
    # tutorial asserts at import against a fixed tolerance): said, recorded, run again
    repo, root = fake_env(["gain5"], toml_replace=FAST)
    kernel = json.loads((repo / "kernel.json").read_text())
    (repo / "kernel.json").write_text(json.dumps({**kernel, "flaky": True}))
    git(repo, "commit", "-qam", "a bench that fails its first run")
    ws = init(repo, root, "flaky")
    assert run_engine(ws, max_iters=1) == 0
    base = iterations(ws)[0]
    assert (
        base.status == "baseline" and "1 run(s) failed and passed when run again" in base.record["decision"]["reason"]
    )
    (flake,) = base.record["baseline_flaky"]
    assert flake.startswith("run 1: the bench failed: ") and "exit code 4" in flake
    assert any("baseline run 1 failed" in m and "running it again" in m for m in events(ws, "baseline"))
    assert (ws.log_dir(0) / "baseline_r0_again1.out").exists()  # the retry's own logs; the failure's kept
    # a bench that fails every time stops the run after BASELINE_TRIES runs, as before

    def baseline_of(name: str, knob: str, toml_replace: dict[str, str]):
        """The baseline iteration of a fresh run whose bench has `knob` set, and the run ended non-zero."""
        repo, root = fake_env(["gain5"], name=name, toml_replace=toml_replace)
        (repo / "kernel.json").write_text(json.dumps({**kernel, knob: True}))
        git(repo, "commit", "-qam", f"a bench with {knob}")
        ws = init(repo, root, name)
        assert run_engine(ws, max_iters=1) != 0
        (base,) = iterations(ws)
        return base

    base2 = baseline_of("crashing", "crash", FAST)
    assert base2.status == "fail_bench" and "exit code 3" in base2.record["decision"]["reason"]
    assert len(base2.record["baseline_flaky"]) == 2  # tries 1 and 2 said; the third stops the run
    # a hang is not tried again: the timeout is paid once
    base3 = baseline_of("hanging", "hang", {**FAST, "timeout_s = 20\n": "timeout_s = 2\n"})
    assert base3.status == "fail_bench" and "timed out after 2 s" in base3.record["decision"]["reason"]
    assert "baseline_flaky" not in base3.record
