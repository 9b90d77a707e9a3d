"""The second wave's names for what every wave shares (experiments/device_wave.py: the summary
written as it goes, the machine's description, commands run with a deadline, packing): its
summary's title, its commit variable (WAVE2_COMMIT) and the files its scripts digest covers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments import device_wave
from experiments.device_wave import (  # noqa: F401 - the names the wave's modules import from here
    PACK_LIMIT_BYTES,
    REPO,
    SKIP_DIRS,
    Budget,
    CmdResult,
    capture,
    child_env,
    copy_db,
    find_ncu,
    kopt_argv,
    md_table,
    measured,
    pack,
    run_cmd,
    shell_line,
    utc_now,
)

HERE = Path(__file__).resolve().parent


class Summary(device_wave.Summary):
    TITLE = "h100_wave2"


def scripts() -> list[Path]:
    return [
        REPO / "experiments" / "h100_wave2.sh",
        REPO / "experiments" / "device_wave.sh",
        REPO / "experiments" / "device_wave.py",
        *HERE.glob("*.py"),
        *HERE.glob("*.sh"),
    ]


def machine_info(*, smoke: bool) -> dict[str, Any]:
    return device_wave.machine_info(
        smoke=smoke, commit_env="WAVE2_COMMIT", scripts=scripts(), digest_key="wave2_scripts_sha256"
    )
