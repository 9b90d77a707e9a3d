"""Choosing a backend (open_backend), the scripted fake, and NoGpu."""

from __future__ import annotations

import json

import pytest
from gpu_helpers import gpu, write_script

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.gpu import NA, AutoBackend, GpuState, backends
from kopt_supervisor.engine.gpu.backends import FakeBackend, NoGpu, NvmlBackend, open_backend
from kopt_supervisor.engine.gpu.smi import NvidiaSmiBackend


class Stub:
    """A backend that answers a fixed list and records its life cycle."""

    log: list[str] = []

    def __init__(self, name: str, gpus: list[GpuState], status: str) -> None:
        self.name, self.vendor, self.gpus, self.status = name, "nvidia", gpus, status
        Stub.log.append(f"make {name}")

    def read(self) -> list[GpuState]:
        Stub.log.append(f"read {self.name}")
        return list(self.gpus)

    def close(self) -> None:
        Stub.log.append(f"close {self.name}")


def test_auto_is_lazy_and_keeps_the_first_backend_that_finds_a_gpu():
    Stub.log = []
    h100 = GpuState(0, name="NVIDIA H100", uuid="GPU-1")
    auto = AutoBackend(
        "auto",
        [
            ("nvml", lambda: Stub("nvml", [], "nvmlInit failed: Driver Not Loaded")),
            ("nvidia-smi", lambda: Stub("nvidia-smi", [h100], "nvidia-smi (/usr/bin/nvidia-smi)")),
            ("rocm-smi", lambda: Stub("rocm-smi", [], "never tried")),
        ],
    )
    assert Stub.log == [] and auto.status == "not started"  # nothing loaded before read()
    assert auto.read() == [h100]
    assert Stub.log == ["make nvml", "read nvml", "close nvml", "make nvidia-smi", "read nvidia-smi"]
    assert auto.name == "nvidia-smi" and auto.vendor == "nvidia"
    assert auto.tried[0] == {"backend": "nvml", "status": "nvmlInit failed: Driver Not Loaded", "gpus": 0}
    assert auto.read() == [h100]  # no second probe
    assert Stub.log[-1] == "read nvidia-smi"
    auto.close()
    assert Stub.log[-1] == "close nvidia-smi"


def test_auto_with_no_gpu_reads_nothing_and_says_why_for_each_candidate():
    auto = AutoBackend(
        "amd",
        [
            ("amdsmi", lambda: Stub("amdsmi", [], "No module named 'amdsmi'")),
            ("rocm-smi", lambda: Stub("rocm-smi", [], "rocm-smi is not on PATH")),
        ],
    )
    assert auto.read() == [] and auto.read() == []
    assert auto.name == "none"
    assert auto.status == ("no GPU found: amdsmi: No module named 'amdsmi'; rocm-smi: rocm-smi is not on PATH")


def test_open_backend_chains_and_named_backends(monkeypatch):
    assert [n for n, _ in open_backend("auto").candidates] == ["nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi"]
    assert [n for n, _ in open_backend("nvidia").candidates] == ["nvml", "nvidia-smi"]
    assert [n for n, _ in open_backend("amd").candidates] == ["amdsmi", "amd-smi", "rocm-smi"]
    assert isinstance(open_backend("nvml"), NvmlBackend)
    assert isinstance(open_backend("nvidia-smi"), NvidiaSmiBackend)
    none = open_backend("none")
    assert isinstance(none, NoGpu) and none.read() == [] and "CPU-only" in none.status
    with pytest.raises(BadInput, match="'cuda' is not one of: auto, nvidia, amd, none, nvml"):
        open_backend("cuda")


def test_the_real_chain_on_this_machine_never_raises():
    auto = open_backend("auto")
    gpus = auto.read()
    if gpus:  # run on a GPU machine: a real reading
        assert all(isinstance(g.index, int) for g in gpus)
    else:
        for name in backends.CHAINS["auto"]:
            assert f"{name}: " in auto.status
    auto.close()


def test_kopt_fake_gpus_replaces_every_backend(tmp_path, monkeypatch):
    script = write_script(tmp_path / "g.json", [[gpu(0)]])
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(script))
    for vendor in ("auto", "nvidia", "none"):
        assert isinstance(open_backend(vendor), FakeBackend)


def test_fake_takes_the_next_snapshot_and_repeats_the_last(tmp_path):
    fake = FakeBackend(write_script(tmp_path / "g.json", [[gpu(0, util=50)], [gpu(0, util=1)], []]))
    assert [g.util_pct for g in fake.read()] == [50.0]
    assert [g.util_pct for g in fake.read()] == [1.0]
    assert fake.read() == [] and fake.read() == []  # the GPU vanished and stays vanished


def test_fake_optional_fields_and_nulls(tmp_path):
    entry = gpu(
        1,
        util=None,
        procs=None,
        sm_clock_mhz=1980,
        mem_clock_mhz=2619,
        temp_c=41,
        power_w=120.5,
        throttle=["sw_power_cap"],
        throttle_counters={"power_ns": 12},
        vendor="amd",
    )
    (g,) = FakeBackend(write_script(tmp_path / "g.json", [[entry]])).read()
    assert g.util_pct is NA and g.processes is NA
    assert (g.sm_clock_mhz, g.mem_clock_mhz, g.temp_c, g.power_w) == (1980, 2619, 41, 120.5)
    assert g.throttle == ("sw_power_cap",) and g.throttle_counters == {"power_ns": 12.0}
    assert g.vendor == "amd" and g.backend == "fake"
    d = g.to_dict()
    assert d["util_pct"] is None and d["processes"] is None
    json.dumps(d)


def test_fake_minimal_entry_uses_the_design_defaults(tmp_path):
    (g,) = FakeBackend(write_script(tmp_path / "g.json", [[{"index": 2}]])).read()
    assert (g.uuid, g.util_pct, g.mem_used_mib, g.processes) == ("GPU-fake-2", 0.0, 0.0, ())


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "cannot read"),
        ("[]", "must be a non-empty JSON list of snapshots"),
        ('[{"index": 0}]', "snapshot 0 must be a list of GPUs"),
        ('[[{"name": "x"}]]', "bad GPU entry"),
        ('[[{"index": 0, "util_pct": "high"}]]', "util_pct must be a number"),
        ('[[{"index": 0, "vendor": "intel"}]]', "vendor must be 'nvidia' or 'amd'"),
    ],
)
def test_fake_bad_scripts_are_bad_input_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BadInput, match=message) as err:
        FakeBackend(path)
    assert f"KOPT_FAKE_GPUS={path}" in str(err.value)


def test_fake_claim_namespace_depends_on_the_script(tmp_path):
    a = FakeBackend(write_script(tmp_path / "a.json", [[gpu(0)]]))
    b = FakeBackend(write_script(tmp_path / "b.json", [[gpu(0)]]))
    assert a.claim_namespace != b.claim_namespace
    assert a.claim_namespace == FakeBackend(tmp_path / "a.json").claim_namespace


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("mem_used_max_mib", -1, r"\[gpu\].mem_used_max_mib must be >= 0"),
        ("mem_growth_max_mib", -5, r"\[gpu\].mem_growth_max_mib must be >= 0"),
        ("devices", [-1], r"\[gpu\].devices must list GPU indices >= 0"),
    ],
)
def test_gpu_config_keys_are_validated(key, value, message):
    from kopt_supervisor.engine.config.toml_io import loads

    toml = f'[target]\nbench = "true"\nmetric = "us"\n[gpu]\n{key} = {json.dumps(value)}\n'
    with pytest.raises(BadInput, match=message):
        loads(toml)


def test_a_library_backend_must_say_how_to_start_and_stop_its_library() -> None:
    import pytest

    from kopt_supervisor.engine.gpu.backends import LibraryBackend

    class StartsOnly(LibraryBackend):
        def _init(self, lib: object) -> None:
            pass

    with pytest.raises(TypeError, match="_shutdown"):
        StartsOnly()  # type: ignore[abstract]
