"""`kopt ceilings`: measure this GPU's copy bandwidth and bf16 matrix rate, register them.

Runs `python -m kopt_supervisor.kernels.ceilings --json` (the only torch code, in a subprocess) on an idle
GPU chosen by the gate, and writes the result as a wiki page of measured sources under
`<root>/.ceilings/`, where every run's roofline lookup finds it (measured values are
preferred to the datasheet's, which stay listed beside them).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config.sections import GpuConfig
from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.gate import Gate
from kopt_supervisor.engine.roofline.evaluate import lookup_specs, register_measured
from kopt_supervisor.engine.runner.command import run as run_command


def measured_dir(root: Path) -> Path:
    return root / ".ceilings"


def measure_ceilings(root: Path, *, gpu: GpuConfig | None = None, timeout_s: float = 600.0) -> dict[str, Any]:
    gate = Gate(gpu or GpuConfig(), open_backend((gpu or GpuConfig()).vendor), owner="kopt ceilings")
    try:
        decision = gate.acquire()
        if decision.gpu is None:
            raise KoptFailure(f"kopt ceilings needs a GPU: {decision.note or 'none found'}")
        with tempfile.TemporaryDirectory(prefix="kopt-ceilings-") as tmp:
            res = run_command(
                [sys.executable, "-m", "kopt_supervisor.kernels.ceilings", "--json", "--out", f"{tmp}/ceilings.json"],
                cwd=Path(__file__).resolve().parent.parent,
                log_dir=tmp,
                name="ceilings",
                timeout_s=timeout_s,
                env=decision.env,
            )
            if not res.ok:
                raise KoptFailure(f"the ceilings measurement {res.why()}: {res.tail(1)}")
            result = json.loads(Path(tmp, "ceilings.json").read_text())
    finally:
        gate.close()
    page = register_measured(result, measured_dir(root))
    specs = lookup_specs(result["gpu_name"], measured_dir=measured_dir(root), gpu_uuid=result.get("gpu_uuid"))
    lines = [f"{result['gpu_name']} ({result.get('gpu_uuid')}), measured {time.strftime('%Y-%m-%d')}:"]
    lines += [f"  {specs[m].line()}" for m in ("hbm_bandwidth", "bf16_dense_tflops") if m in specs]
    lines.append(f"registered in {page}")
    return {"result": result, "page": str(page), "lines": lines}
