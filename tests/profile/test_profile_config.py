"""The [profile] keys of kopt.toml that the per-class comparison reads."""

from __future__ import annotations

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.profile.classes import DEFAULT_RUN_NOISE_PCT

MIN = '[target]\nbench = "python b.py"\nmetric = "us"\n'


def test_defaults():
    p = loads_config(MIN).profile
    assert p.run_noise_pct == DEFAULT_RUN_NOISE_PCT == 0.3 and p.repeats == 1
    p = loads_config(MIN + "[profile]\nrun_noise_pct = 0.5\nrepeats = 3\n").profile
    assert (p.run_noise_pct, p.repeats) == (0.5, 3)
    assert p.outside_ranges == "time"
    assert loads_config(MIN + '[profile]\noutside_ranges = "full"\n').profile.outside_ranges == "full"
    assert p.baseline == "auto" and loads_config(MIN + '[profile]\nbaseline = "start"\n').profile.baseline == "start"


TUNE = 'kind = "tune"\n[propose.tune]\nparams = "p.json"\nspace = { B = [1, 2] }'


@pytest.mark.parametrize(
    "propose, baseline, when",
    [
        (TUNE, "auto", "early"),  # proposals in seconds: the first keep reuses the baseline's profile
        (TUNE + '\n[profile]\nkeep = "full"', "auto", "first-keep"),  # nothing it could reuse
        (TUNE + "\n[profile]\nreuse_best_s = 0", "auto", "first-keep"),
        ('kind = "command"\ncommand = "python p.py"', "auto", "first-keep"),
        ('kind = "command"\nagent = "claude-code"', "auto", "start"),  # the agent's first context pack
        ('kind = "manual"', "auto", "start"),  # the person at the dashboard
        ('kind = "command"\nagent = "claude-code"', "first-keep", "first-keep"),
        (TUNE, "start", "start"),
        (TUNE, "first-keep", "first-keep"),
    ],
)
def test_the_baseline_is_profiled_first_where_someone_reads_it(propose, baseline, when):
    cfg = loads_config(
        MIN
        + f"[propose]\n{propose}\n"
        + ("" if "[profile]" in propose else "[profile]\n")
        + f"baseline = {baseline!r}\n"
    )
    assert cfg.baseline_profile() == when


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[profile]\nrun_noise_pct = -0.1\n", "[profile].run_noise_pct must be between 0 and 50"),
        ("[profile]\nrun_noise_pct = 'low'\n", "[profile].run_noise_pct must be a number"),
        ("[profile]\nrepeats = 0\n", "[profile].repeats must be between 1 and 20"),
        ("[profile]\nrepeats = 2.5\n", "[profile].repeats must be an integer"),
        ("[profile]\noutside_ranges = 'none'\n", '[profile].outside_ranges must be "time" or "full", not \'none\''),
        (
            "[profile]\nbaseline = 'later'\n",
            '[profile].baseline must be "auto", "first-keep", "early" or "start", not \'later\'',
        ),
        ("[profile]\nrepeat = 2\n", "unknown key [profile].repeat (did you mean 'repeats'?)"),
    ],
)
def test_bad_values_name_their_key(text, needle):
    with pytest.raises(BadInput) as info:
        loads_config(MIN + text, source="t/kopt.toml")
    assert needle in str(info.value) and str(info.value).startswith("t/kopt.toml")
