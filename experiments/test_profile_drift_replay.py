"""experiments/profile_drift_replay.py's counting, on synthetic profiles of one tree (no GPU)."""

from __future__ import annotations

from experiments.profile_drift_replay import excluded, tally
from tests.profile.test_profile_classes import REFS, WIDE, profile


def test_a_drift_between_profiles_of_one_tree_is_counted_until_the_run_term_covers_it():
    profiles = {"v1": profile(1), "v2": profile(2, shift=0.98), "v3": profile(3)}
    narrow_term = excluded(profiles, REFS, 0.3)[WIDE]
    assert len(narrow_term) == 6  # ordered pairs
    out, n, half = tally(narrow_term)
    assert (out, n) == (4, 6)  # v2 against each of the others, both ways
    wide_out, _, wide_half = tally(excluded(profiles, REFS, 1.0)[WIDE])
    assert wide_out == 0 and wide_half > 2 * half  # the run term dominates the pair's interval
