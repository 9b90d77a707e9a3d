"""kopt.toml's [target].format and [target.adapter]: validated, frozen and read back."""

from __future__ import annotations

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config.toml_io import dumps as dumps_config
from kopt_supervisor.engine.config.toml_io import loads as loads_config

BASE = '[target]\nbench = "python bench.py"\nmetric = "median_us"\n'


def test_format_and_adapter_options_round_trip() -> None:
    cfg = loads_config(BASE + 'format = "pytest-benchmark"\ncsv = "out.json"\n[target.adapter]\nunit = "ns"\n')
    assert cfg.target.format == "pytest-benchmark" and cfg.target.adapter.unit == "ns"
    frozen = loads_config(dumps_config(cfg))  # what `kopt init` freezes into the workspace
    assert frozen == cfg and "[target.adapter]" in dumps_config(cfg)
    assert loads_config(BASE).target.format == "csv"  # kopt's CSV, as before


@pytest.mark.parametrize(
    "extra,match",
    [
        ('format = "json"\n', r"\[target\].format must be one of 'csv', 'table'"),
        ('[target.adapter]\nunit = "fortnights"\n', r"\[target.adapter\].unit must be"),
        ('[target.adapter]\nstat = "p99"\n', r"\[target.adapter\].stat must be"),
        ('[target.adapter]\ntabel = "1"\n', r"unknown key \[target.adapter\].tabel \(did you mean 'table'\?\)"),
    ],
)
def test_bad_values_name_the_key(extra: str, match: str) -> None:
    with pytest.raises(BadInput, match=match):
        loads_config(BASE + extra)
