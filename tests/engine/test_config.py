import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config.toml_io import dumps as dumps_config
from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.engine.config.toml_io import loads as loads_config

MIN = '[target]\nbench = "python b.py"\nmetric = "us"\n'


def test_defaults_are_the_reference_program_values():
    cfg = loads_config(MIN)
    assert cfg.decide.confidence == 0.99 and cfg.decide.min_effect_pct == 1.0 and cfg.decide.min_rounds == 3
    assert cfg.stop.consecutive_regressions == 5 and cfg.stop.target_pct_of_peak == 90
    assert cfg.gpu.wait_s == 600 and cfg.gpu.wait_max_s == 3600
    assert cfg.propose.repair_attempts == 3 and cfg.decide.review_default == "reject"


@pytest.mark.parametrize(
    "text,needle",
    [
        (MIN + "[decide]\nmin_round = 3\n", "unknown key [decide].min_round (did you mean 'min_rounds'?)"),
        (MIN + "[decid]\n", "unknown key decid"),
        (MIN + "[decide]\nconfidence = 'high'\n", "[decide].confidence must be a number"),
        (MIN + "[decide]\nmin_rounds = 1\n", "[decide].min_rounds must be at least 2"),
        (MIN + "[decide]\nproduction_verdicts = true\n", "[decide].production_verdicts needs [target].production"),
        (MIN + "[gpu]\nvendor = 'intel'\n", "[gpu].vendor must be"),
        (MIN + "[stop]\nconsecutive_regressions = true\n", "[stop].consecutive_regressions must be an integer"),
        ('[target]\nmetric = "us"\n', "[target].bench is required"),
        (MIN.replace('metric = "us"\n', ""), "[target].metric is required"),
        (MIN + 'correct = "os.system(1)"\n', "[target].correct"),
        (MIN + "protected = 'bench.py'\n", "[target].protected must be a list"),
        (MIN + "protected = [1]\n", "[target].protected[0] must be a string"),
        (MIN + "[propose]\nkind = 'command'\n", "[propose].command is required"),
        (MIN + "[propose]\nkind = 'tune'\n", "[propose.tune].params is required"),
        (MIN + "[propose.tune]\nshared_first = true\n", "[propose.tune].shared_first needs per_class = true"),
        (MIN + "[propose.tune]\nparams = 'p.json'\nspace = {BLOCK = []}\n", "[propose.tune].space.BLOCK must list"),
        (MIN + 'ab_command = "python ab.py {best} {cand}"\n', "kopt no longer measures both trees in one process"),
        (MIN + "ab_serve = true\n", "[target].ab_serve = True: kopt no longer measures both trees in one process"),
        (MIN + "ab_serve = 0\n", "[target].ab_serve = 0: kopt no longer"),  # only false is its off value
        (MIN + "ab_command = false\n", "[target].ab_command = False: kopt no longer"),
        (MIN + "[profile]\nkernel = '('\n", "[profile].kernel is not a valid regex"),
        ("[target\n", "not valid TOML"),
    ],
)
def test_every_error_names_its_key(text, needle):
    with pytest.raises(BadInput) as info:
        loads_config(text, source="t/kopt.toml")
    msg = str(info.value)
    assert needle in msg and msg.startswith("t/kopt.toml") and "\n" not in msg


def test_dumps_round_trips_every_value():
    cfg = loads_config(
        MIN + 'env = {CUDA_LAUNCH_BLOCKING = "0"}\nprotected = ["a b/*.py"]\n'
        "[propose.tune]\nspace = {BLOCK = [64, 128], 'x y' = ['a\"b']}\n[decide]\nconfidence = 0.995\n"
    )
    assert loads_config(dumps_config(cfg)) == cfg


def test_load_names_an_unreadable_file(tmp_path):
    with pytest.raises(BadInput, match="nope.toml: cannot read"):
        load_config(tmp_path / "nope.toml")


def test_a_retired_key_in_an_older_frozen_config_still_loads_and_is_not_written_back():
    """A run's kopt.toml is frozen (and sealed) with every key of its day: a key kopt no
    longer reads is accepted there, and a typo beside it is still an error."""
    cfg = loads_config(MIN + "[profile]\nagree_margin_pct = 1.0\nrepeats = 2\n")
    assert cfg.profile.repeats == 2 and "agree_margin_pct" not in dumps_config(cfg)
    with pytest.raises(BadInput, match=r"unknown key \[profile\]\.agree_margin"):
        loads_config(MIN + "[profile]\nagree_margin = 1.0\n")
