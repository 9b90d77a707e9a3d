"""experiments/profile_noise.py's counting of A/A profile pairs (`null_rates`), without a GPU."""

from __future__ import annotations

import pytest

from experiments.profile_noise import FAKE_CLAIM, null_rates


def test_null_rates_count_what_each_rule_would_have_shown():
    pairs = [
        {"wide": (0.990, 0.980, 0.999), "narrow": (1.00, 0.98, 1.02)},  # below 1, short of half of -3.4%
        {"wide": (0.980, 0.968, 0.992), "narrow": (0.99, 0.97, 1.01)},  # below 1 and past -1.7%: shown
        {"wide": (1.010, 0.995, 1.025), "narrow": (1.01, 0.99, 1.03)},
        {"wide": (0.995, 0.985, 1.005)},  # narrow missing from one pair
    ]
    rates = null_rates(pairs)
    assert rates["wide"]["pairs"] == 4 and rates["narrow"]["pairs"] == 3
    assert rates["wide"]["below_1"] == pytest.approx(0.5) and rates["wide"]["shown"] == pytest.approx(0.25)
    assert rates["narrow"]["below_1"] == 0.0 and rates["narrow"]["shown"] == 0.0
    assert rates["wide"]["sd_pct"] == pytest.approx(1.25, abs=0.01)


def test_the_fake_claim_is_the_real_steps_and_half_of_it_is_the_line():
    assert FAKE_CLAIM == pytest.approx(0.966)
    just = [{"c": (1.0 - 0.017, 0.97, 0.999)}, {"c": (1.0 - 0.016, 0.97, 0.999)}]
    assert null_rates(just)["c"]["shown"] == pytest.approx(0.5)
