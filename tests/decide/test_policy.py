"""Policy is [decide] plus the direction: built from DecideConfig without restating it, and
validated by the same rules as kopt.toml."""

from __future__ import annotations

import dataclasses

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.decide.estimate import Policy

# A valid value other than the default for every [decide] key. A key added to DecideConfig
# fails test_every_key_is_covered until it is listed here: then it is checked to reach Policy.
OTHER = {
    "confidence": 0.995,
    "min_effect_pct": 2.5,
    "min_rounds": 4,
    "max_rounds": 31,
    "budget_gpu_s": 77.0,
    "max_other_regression_pct": 3.5,
    "suspicious_speedup": 7.0,
    "review_timeout_s": 12.0,
    "review_default": "accept",
    "two_in_a_row": True,
    "futility_confidence": 0.6,
    "verify_after_format": False,
    "production_verdicts": True,
    "guard_max_regression_pct": 4.0,
    "pooled_noise": False,
}
POLICY_ONLY = {"direction", "pool_blocks"}
"""Policy's own fields: not kopt.toml keys of [decide]."""


def test_every_key_is_covered() -> None:
    keys = {f.name for f in dataclasses.fields(DecideConfig)}
    assert keys == set(OTHER), "list a non-default value for the new [decide] key in OTHER"
    assert {f.name for f in dataclasses.fields(Policy)} == keys | POLICY_ONLY


def test_from_config_carries_every_key_and_the_direction() -> None:
    cfg = DecideConfig(**OTHER)
    p = Policy.from_config(cfg, "max")
    for key, value in OTHER.items():
        assert getattr(p, key) == value != getattr(DecideConfig(), key), key
    assert p.direction == "max" and p.pool_blocks is False
    assert Policy.from_config(cfg, "min", pool_blocks=True).pool_blocks is True


def test_defaults_are_kopt_toml_defaults() -> None:
    assert Policy.from_config(DecideConfig()) == Policy()
    assert Policy.from_config(loads_config('[target]\nbench = "b"\nmetric = "us"\n').decide) == Policy()


@pytest.mark.parametrize(
    "key,value",
    [
        ("confidence", 1.5),
        ("min_effect_pct", 0.0),
        ("min_rounds", 1),
        ("max_rounds", 2),
        ("budget_gpu_s", -1.0),
        ("suspicious_speedup", 1.0),
        ("review_default", "maybe"),
        ("futility_confidence", 0.99),
        ("max_other_regression_pct", -1.0),
    ],
)
def test_one_set_of_rules_for_kopt_toml_and_policy(key: str, value: object) -> None:
    with pytest.raises(BadInput) as in_code:
        Policy(**{key: value})  # type: ignore[arg-type]  # a wrong value on purpose
    toml_value = f'"{value}"' if isinstance(value, str) else value
    with pytest.raises(BadInput) as in_toml:
        loads_config(f'[target]\nbench = "b"\nmetric = "us"\n[decide]\n{key} = {toml_value}\n', source="k.toml")
    assert str(in_code.value).startswith(f"[decide].{key} ")
    assert str(in_toml.value) == f"k.toml: {in_code.value}"


def test_direction_is_checked() -> None:
    with pytest.raises(BadInput, match="direction"):
        Policy(direction="up")
