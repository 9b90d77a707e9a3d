"""GPU check of the report's environment capture: run it on the GPU machine, from the repo root.

    python tests/report/device_env_check.py [OUT_DIR]      # OUT_DIR defaults to $OUT or .

Prints a short table: the driver and CUDA version read through NVML and through
`nvidia-smi`'s header (the two paths of engine.doctor's environment capture; they must agree), and
what the probe of this interpreter reports (Python, torch and the CUDA it was built for,
triton). Writes everything, with nvidia-smi's raw header, to OUT_DIR/report_env_check.json.
Exit status 0 when NVML and nvidia-smi agree on the driver, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kopt_supervisor.engine.doctor import nvidia_software, probe_python  # noqa: E402
from kopt_supervisor.engine.gpu.smi import run_command  # noqa: E402


def no_nvml() -> types.ModuleType:
    m = types.ModuleType("pynvml")

    def fail() -> None:
        raise RuntimeError("NVML skipped on purpose (checking the nvidia-smi path)")

    m.nvmlInit = fail
    return m


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    notes_nvml: list[str] = []
    notes_cli: list[str] = []
    via_nvml = nvidia_software(run_command, notes_nvml)
    via_cli = nvidia_software(run_command, notes_cli, no_nvml())
    rc, raw, err = run_command(["nvidia-smi"])
    probe = probe_python(sys.executable, Path.cwd(), {})
    rows = [
        (
            "driver (NVML)",
            (via_nvml or {}).get("driver"),
            f"read by {(via_nvml or {}).get('source', 'nothing')}; " + "; ".join(notes_nvml),
        ),
        ("CUDA driver API (NVML)", (via_nvml or {}).get("cuda_driver"), ""),
        ("driver (nvidia-smi)", (via_cli or {}).get("driver"), "; ".join(notes_cli)),
        ("CUDA driver API (nvidia-smi)", (via_cli or {}).get("cuda_driver"), ""),
        ("python", probe.get("version"), probe.get("executable", probe.get("error", ""))),
        ("torch", probe.get("torch"), f"CUDA build {probe.get('torch_cuda')}, HIP {probe.get('torch_hip')}"),
        ("triton", probe.get("triton"), ""),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value!s:<14} {note}")
    agree = bool(
        via_nvml
        and via_cli
        and via_nvml.get("source") == "NVML"
        and via_nvml.get("driver") == via_cli.get("driver")
        and via_nvml.get("cuda_driver") == via_cli.get("cuda_driver")
    )
    print(f"NVML and nvidia-smi agree: {agree}")
    result = {
        "nvml": via_nvml,
        "nvml_notes": notes_nvml,
        "nvidia_smi": via_cli,
        "nvidia_smi_notes": notes_cli,
        "nvidia_smi_header": "\n".join(raw.splitlines()[:4]) if rc == 0 else err,
        "probe": probe,
        "agree": agree,
    }
    path = out_dir / "report_env_check.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
