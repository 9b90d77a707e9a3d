"""`kopt init --bench` on a bundled kernel's materialized repo proposes what the catalog writes
by hand: the harness's CSV is recognised, the served A/B config follows (the catalog's own
kopt.toml also protects contract.py and roofline.py, which the harness loads by path)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from kopt_supervisor.engine import onboard
from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.kernels import catalog
from tests.conftest import installed

pytestmark = installed("torch", "triton")


def test_the_detected_config_matches_the_catalogs(tmp_path: Path) -> None:
    repo = tmp_path / "rms"
    repo.mkdir()
    catalog.materialize("rmsnorm", repo, naive=True, cpu=True)
    written = load_config(repo / "kopt.toml").target
    (repo / "kopt.toml").unlink()  # onboarding starts from a repo without one
    bench = f"{sys.executable} bench.py --dtypes bfloat16"
    run = onboard.run_once(repo, bench, onboard.local_run_bench(tmp_path / "logs", env={"TRITON_INTERPRET": "1"}))
    p = onboard.settle(run)
    t = tomllib.loads(p.text())["target"]
    assert (t["metric"], t["correct"], t["production"], t["class_by"]) == (
        written.metric,
        written.correct,
        written.production,
        written.class_by,
    )
    assert t["config"] == written.config and sorted(t["ignore"]) == sorted(written.ignore)
    assert (
        sorted(t["serve"].split())
        == sorted(written.serve.replace(catalog.shlex.quote(sys.executable), sys.executable).split())
        and "ab_command" not in t
    )
    assert t["calls"] == written.calls == "calls"
    # kopt's spec harness answers `prepare`: both the catalog's config and init's proposal say so
    assert t["serve_prepare"] is True and written.serve_prepare is True
    # the bench is protected, the solution is the kernel's; contract.py and roofline.py are loaded
    # by path inside the harness, which a static scan of imports does not see (said in the docs)
    assert "bench.py" in t["protected"] and "solution/rmsnorm.py" not in t["protected"]
