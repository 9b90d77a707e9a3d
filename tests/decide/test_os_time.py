"""The OS's accounting against the bench's claimed seconds (engine/decide/external_truth.py
`weigh`), with the claims a hostile candidate makes: a patched timer, work moved outside the
timed calls, noise added to hide either, and the honest gains that must never be refuted."""

from __future__ import annotations

import random

from kopt_supervisor.engine.decide.external_truth import LookCost, OsTruth, SideCost, looks_of, weigh

CPU, WALL, TIMED = 1.5, 1.8, 1.0
"""best's look: 1.5 CPU seconds, 1.8 wall seconds, of which its bench claims 1.0 s timed."""


def look(
    r: int, *, cpu_saved: float, wall_saved: float, claimed_saved: float, noise: float = 0.01, rng: random.Random
) -> LookCost:
    """One look: best as above (with noise), the candidate `*_saved` seconds cheaper."""

    def jitter() -> float:
        return rng.gauss(0.0, noise)

    best = SideCost("best", r, CPU + jitter(), WALL + jitter(), TIMED)
    cand = SideCost("cand", r, CPU - cpu_saved + jitter(), WALL - wall_saved + jitter(), TIMED - claimed_saved)
    return LookCost(best, cand)


def looks(n: int, seed: int = 0, **kw: float) -> list[LookCost]:
    rng = random.Random(seed)
    return [look(r, rng=rng, **kw) for r in range(n)]  # type: ignore[arg-type]


def test_a_timer_patch_claiming_40_percent_with_unchanged_cpu_time_is_refuted():
    for seed in range(50):
        truth = weigh(looks(6, seed, cpu_saved=0.0, wall_saved=0.0, claimed_saved=0.4))
        assert truth.outcome == "refuted", (seed, truth.reason)
    assert truth.reason.startswith("the OS's accounting shows") and "0.4 s the bench claims" in truth.reason
    assert {c.clock for c in truth.clocks} == {"cpu", "wall"} and abs(truth.claimed_s - 0.4) < 1e-9


def test_a_real_40_percent_saving_is_shown():
    for seed in range(50):
        truth = weigh(looks(6, seed, cpu_saved=0.4, wall_saved=0.4, claimed_saved=0.4))
        assert truth.outcome == "shown", (seed, truth.reason)
    assert "of the 0.4 s the bench claims" in truth.reason


def test_a_real_saving_is_shown_only_once_its_bound_clears_half_the_claim():
    """CPU time in 10 ms ticks, a real saving of about what is claimed: 4 looks prove a saving
    but cannot bound it above half the claim, so the OS cannot tell yet (the confirmation takes
    more looks); 12 such looks bound it there and show it. Proving only that something was saved
    is not enough (until 2026-12-03 it was: a timer patch's noise did that, see
    test_a_timer_patch_a_quiet_machine_once_showed_is_not_shown)."""
    rng = random.Random(11)
    quantized = []
    for r in range(12):
        lk = look(r, cpu_saved=0.045, wall_saved=0.045, claimed_saved=0.045, noise=0.05, rng=rng)
        quantized.append(
            LookCost(
                SideCost("best", r, 0.15, lk.best.wall_s, lk.best.claimed_s),
                SideCost("cand", r, 0.15 - (0.03, 0.06, 0.04, 0.05)[r % 4], lk.cand.wall_s, lk.cand.claimed_s),
            )
        )
    few = weigh(quantized[:4])
    cpu = few.clocks[0]
    assert few.outcome == "inconclusive" and 0 < cpu.lower_s < 0.0225 < cpu.saved_s, few.reason
    many = weigh(quantized)
    assert many.outcome == "shown" and many.clocks[0].lower_s > 0.0225, many.reason


def test_a_small_real_gain_under_a_patched_timer_that_claims_five_times_more_is_refuted():
    for seed in range(50):
        truth = weigh(looks(6, seed, cpu_saved=0.08, wall_saved=0.08, claimed_saved=0.4))
        assert truth.outcome == "refuted", (seed, truth.reason)


def test_a_noisy_but_real_3_percent_saving_is_not_refuted():
    """3% of the timed seconds, on a machine whose clocks vary by twice that per look: the
    OS cannot show it, and must not refute it (at most 2 of 200 runs)."""
    outcomes = [
        weigh(looks(6, seed, cpu_saved=0.03, wall_saved=0.03, claimed_saved=0.03, noise=0.06)).outcome
        for seed in range(200)
    ]
    assert outcomes.count("refuted") <= 2, outcomes.count("refuted")
    assert outcomes.count("inconclusive") > 150  # it is told as such, not shown


def test_a_quiet_real_3_percent_saving_is_shown():
    truth = weigh(looks(8, 3, cpu_saved=0.03, wall_saved=0.03, claimed_saved=0.03, noise=0.002))
    assert truth.outcome == "shown", truth.reason


def test_work_moved_outside_the_timed_calls_is_refuted():
    """The candidate prepares its results while the contract check runs (or after its reply,
    until the audit reads them): its timed calls claim 0.3 s less, the look costs the same,
    a little more for the bookkeeping."""
    for seed in range(50):
        truth = weigh(looks(5, seed, cpu_saved=-0.01, wall_saved=-0.01, claimed_saved=0.3))
        assert truth.outcome == "refuted", (seed, truth.reason)


def test_noise_added_to_hide_a_timer_patch_does_not_save_it():
    """A patched timer that also burns CPU and sleeps at random in some looks widens the
    spread of the savings so that no bound can refute it; but burning and sleeping only make
    its looks dearer, so every look still falls short of half its claim."""
    for seed in range(50):
        rng = random.Random(seed)
        hidden = []
        for r in range(6):
            burn = rng.choice([0.0, 0.0, 2.0, 5.0])
            hidden.append(look(r, cpu_saved=-burn, wall_saved=-burn * 1.3, claimed_saved=0.4, rng=rng))
        truth = weigh(hidden)
        assert truth.outcome == "refuted", (seed, truth.reason)
        assert all(c.short_looks == 6 for c in truth.clocks)


def test_a_kernel_that_spreads_over_threads_saves_wall_time_and_is_shown():
    """Two threads: the timed calls take 40% less wall time and 20% more CPU time. Against the
    CPU clock's refutation the wall clock shows it from 7 looks on, each look showing it."""
    truth = weigh(looks(7, 1, cpu_saved=-0.2, wall_saved=0.4, claimed_saved=0.4))
    assert truth.outcome == "shown" and "wall time" in truth.reason, truth.reason
    assert {c.clock: c.outcome for c in truth.clocks} == {"cpu": "refuted", "wall": "shown"}
    assert weigh(looks(6, 1, cpu_saved=-0.2, wall_saved=0.4, claimed_saved=0.4)).outcome == "inconclusive"


def test_a_busy_machine_lengthening_bests_looks_does_not_show_a_patched_timer():
    """A patched timer's CPU time is unchanged (the CPU clock refutes it), but on a loaded
    machine some of best's looks waited for a core: its wall time grew by more than the claim
    in those looks, and the wall clock's mean "showed" the claim (kept on this project's 2-core
    machine at a load of ~5.5, 2026-11-30). The wall clock must show it in every look."""
    for seed in range(50):
        rng = random.Random(seed)
        waited = set(rng.sample(range(9), rng.randint(3, 7)))  # the looks of best's a burst of load hit
        loaded = [
            look(r, cpu_saved=0.0, wall_saved=rng.uniform(0.9, 1.2) if r in waited else 0.0, claimed_saved=0.4, rng=rng)
            for r in range(9)
        ]
        for truth in (weigh(loaded[:5]), weigh(loaded)):  # never shown: refuted, or review
            assert truth.outcome in ("refuted", "inconclusive"), (seed, truth.reason)
            clocks = {c.clock: c.outcome for c in truth.clocks}
            assert clocks["cpu"] == "refuted" and clocks["wall"] != "shown", (seed, truth.reason)


def test_a_look_that_started_a_process_is_left_out():
    """The candidate's process starts at the decision's first look: 2 s of imports in its CPU
    time. That look is left out, and the real gain is shown."""
    rng = random.Random(5)
    first = look(0, cpu_saved=0.4, wall_saved=0.4, claimed_saved=0.4, rng=rng)
    started = LookCost(
        first.best,
        SideCost("cand", 0, first.cand.cpu_s + 2.0, first.cand.wall_s + 2.0, first.cand.claimed_s, started=True),
    )
    rest = [look(r, cpu_saved=0.4, wall_saved=0.4, claimed_saved=0.4, rng=rng) for r in range(1, 6)]
    truth = weigh([started, *rest])
    assert truth.outcome == "shown" and truth.starts_left_out == 1 and truth.looks == 5, truth.reason


def test_a_server_that_starts_anew_for_every_look_pays_for_its_starts():
    """A patched timer in a server that leaves after every look (`done N last`), so that
    every look is a start: no look is left out then, and its starts only lower its savings."""
    rng = random.Random(6)
    restarting = []
    for r in range(6):
        lk = look(r, cpu_saved=0.0, wall_saved=0.0, claimed_saved=0.4, rng=rng)
        restarting.append(
            LookCost(
                lk.best, SideCost("cand", r, lk.cand.cpu_s + 0.3, lk.cand.wall_s + 0.3, lk.cand.claimed_s, started=True)
            )
        )
    truth = weigh(restarting)
    assert truth.outcome == "refuted" and truth.starts_left_out == 0 and truth.looks == 6, truth.reason


def test_a_claim_under_the_cpu_clocks_tick_is_never_refuted_by_it():
    """A real 1% gain of a 40 ms look: 0.4 ms claimed, and the CPU clock counts in 10 ms
    ticks, so both sides read the same every time. The CPU clock takes no part (it would
    refute), the noisy wall clock cannot tell. A 16 ms claim that no clock shows is still
    refuted by the wall clock alone."""
    rng = random.Random(8)
    quantized = []
    for r in range(8):
        lk = look(r, cpu_saved=0.0004, wall_saved=0.0004, claimed_saved=0.0004, noise=0.002, rng=rng)
        quantized.append(
            LookCost(
                SideCost("best", r, 0.04, lk.best.wall_s, lk.best.claimed_s),
                SideCost("cand", r, 0.04, lk.cand.wall_s, lk.cand.claimed_s),
            )
        )
    truth = weigh(quantized)
    assert [c.clock for c in truth.clocks] == ["wall"] and truth.outcome == "inconclusive", truth.reason
    patched = [
        LookCost(lk.best, SideCost("cand", lk.cand.round, 0.04, lk.best.wall_s, lk.best.claimed_s - 0.016))
        for lk in quantized
    ]  # 40% of the same look claimed, no clock moved
    assert weigh(patched).outcome == "refuted"


def test_without_timed_seconds_or_with_too_few_looks_the_os_has_nothing_to_weigh():
    no_calls = [LookCost(SideCost("best", r, 1.0, 1.0, None), SideCost("cand", r, 0.5, 0.5, None)) for r in range(6)]
    assert weigh(no_calls).outcome == "not_applicable" and "[target].calls" in weigh(no_calls).reason
    assert weigh(looks(2, cpu_saved=0.0, wall_saved=0.0, claimed_saved=0.4)).outcome == "not_applicable"
    slower = looks(6, cpu_saved=0.0, wall_saved=0.0, claimed_saved=-0.1)
    assert weigh(slower).outcome == "not_applicable" and "claims no saved seconds" in weigh(slower).reason


def test_looks_pair_by_round_and_the_record_reads_back():
    costs = [
        SideCost("best", 0, 1.0, 1.1, 0.5),
        SideCost("cand", 0, 0.8, 0.9, 0.3),
        SideCost("cand", 1, 0.8, 0.9, 0.3),
        SideCost("best", 2, 1.0, 1.0, 0.5),
    ]  # rounds 1, 2: one side only
    paired = looks_of(costs)
    assert len(paired) == 1 and paired[0].claim_s == 0.2
    truth = weigh(looks(6, 2, cpu_saved=0.4, wall_saved=0.4, claimed_saved=0.4))
    assert OsTruth.from_dict({**truth.to_dict(), "from_a_newer_kopt": 1}).to_dict() == truth.to_dict()


def test_a_busy_machine_does_not_show_a_patched_timers_claim_under_the_cpu_clocks_tick():
    """Hostile review (2026-11-30) of the rule above: the same burst of load on best's looks,
    with a patched timer claiming 16 ms a look, under two of the CPU clock's 10 ms ticks. The
    CPU clock is then blind (it refutes nothing), so a wall clock lengthened by chance in most
    of best's looks "showed" the claim on its own. A clock that shows a saving no other clock
    can judge must show it in every look too."""
    for seed in range(50):
        rng = random.Random(seed)
        waited = set(rng.sample(range(9), rng.randint(3, 7)))
        loaded = []
        for r in range(9):
            lk = look(r, cpu_saved=0.0, wall_saved=0.0, claimed_saved=0.016, noise=0.002, rng=rng)
            wait = rng.uniform(0.03, 0.04) if r in waited else 0.0
            loaded.append(
                LookCost(
                    SideCost("best", r, 0.5, lk.best.wall_s + wait, lk.best.claimed_s),
                    SideCost("cand", r, 0.5, lk.cand.wall_s, lk.cand.claimed_s),
                )
            )
        truth = weigh(loaded)
        assert truth.outcome != "shown", (seed, truth.reason)
    honest = looks(9, 3, cpu_saved=0.016, wall_saved=0.016, claimed_saved=0.016, noise=0.002)
    assert weigh(honest).outcome == "shown"  # a real saving under the tick: every look shows it


def test_a_kernel_spread_over_threads_with_one_disturbed_look_is_not_refuted():
    """Two threads (40% less wall time, 20% more CPU time) over 10 looks; in one look a burst
    of load lengthened the candidate's wall time: its saving there is below half the claim."""
    for seed in range(20):
        rng = random.Random(seed)
        threaded = looks(10, seed, cpu_saved=-0.2, wall_saved=0.4, claimed_saved=0.4)
        r = rng.randrange(10)
        lk = threaded[r]
        threaded[r] = LookCost(lk.best, SideCost("cand", r, lk.cand.cpu_s, lk.cand.wall_s + 0.3, lk.cand.claimed_s))
        truth = weigh(threaded)
        assert truth.outcome != "refuted", (seed, truth.reason)


def test_a_busy_machine_does_not_show_a_patched_timer_on_the_wall_clock_where_the_cpu_clock_cannot_tell():
    """Three looks, the CPU clock's 10 ms ticks: one look's CPU saving read a tick or two high
    leaves the CPU clock unable to tell (neither refuted nor shown), and best's looks lengthened
    by the load made the wall clock alone "show" the claim of a patched timer (two kept in the
    suite at four workers on 2 cores, 2026-11-30). The wall clock alone shows only in every look
    from 7 looks on."""
    ticks = [(0.0, 0.045), (0.02, 0.04), (0.03, 0.043)]  # (CPU saved, wall saved) per look, seconds
    few = [
        LookCost(
            SideCost("best", r, 1.0 + cpu, 1.2 + wall, 0.15),
            SideCost("cand", r, 1.0, 1.2, 0.09),
        )
        for r, (cpu, wall) in enumerate(ticks)
    ]
    truth = weigh(few)
    clocks = {c.clock: c.outcome for c in truth.clocks}
    assert clocks["cpu"] == "inconclusive" and truth.outcome == "inconclusive", truth.reason
    # the same wall savings in every one of 7 looks, the CPU clock still unable to tell: shown
    many = [
        LookCost(SideCost("best", r, 1.0 + ticks[r % 3][0], 1.2 + 0.045, 0.15), SideCost("cand", r, 1.0, 1.2, 0.09))
        for r in range(7)
    ]
    truth = weigh(many)
    assert {c.clock: c.outcome for c in truth.clocks}["cpu"] == "inconclusive" and truth.outcome == "shown"


QUIET_TIMER_PATCH = [
    ("best", 7, 0.46, 0.4608, 0.225996),
    ("cand", 7, 0.38, 0.3731, 0.08168),
    ("best", 8, 0.31, 0.2916, 0.136385),
    ("cand", 8, 0.29, 0.2876, 0.068287),
    ("best", 9, 0.42, 0.4182, 0.207084),
    ("cand", 9, 0.31, 0.3005, 0.067642),
    ("best", 10, 0.41, 0.4076, 0.203381),
    ("cand", 10, 0.35, 0.3414, 0.082834),
    ("best", 11, 0.27, 0.2776, 0.134065),
    ("cand", 11, 0.29, 0.2875, 0.068021),
    ("best", 12, 0.36, 0.3467, 0.162388),
    ("cand", 12, 0.3, 0.3043, 0.071288),
    ("best", 13, 0.41, 0.4026, 0.204562),
    ("cand", 13, 0.32, 0.313, 0.074786),
    ("best", 14, 0.36, 0.3675, 0.19113),
    ("cand", 14, 0.32, 0.3231, 0.073946),
]
"""Eight consecutive looks (side, look, CPU s, wall s, claimed s) of the pyserve target's BEST
against hostile.py's "marshal" timer patch (every process_time reading halved: it saves
nothing), recorded on this project's 2-core machine with nothing else running
(`python -m experiments.os_truth_null --cand marshal --looks 40 --load none`, 2026-12-03):
each side's look costs 0.3-0.46 CPU s and moves by ~0.05 s from look to look, half the claim."""


def test_a_timer_patch_a_quiet_machine_once_showed_is_not_shown():
    """The recorded looks' CPU clock reads 0.055 s saved per look of the 0.11 s claimed, its
    99% lower bound above zero (0.011 s from the savings' own spread, 0.024 s from the spread
    net of half each look's claim): the old rule (a saving proven, its mean at least half the
    claim) showed the patch from the 7th look, and suite run GW kept the same case that way
    under load. The saving must be bounded above half the claim (0.055 s): never shown, at any
    look the confirmation could stop at (inconclusive at 8: more looks, or review)."""
    recorded = looks_of(SideCost(side, r, cpu, wall, claimed) for side, r, cpu, wall, claimed in QUIET_TIMER_PATCH)
    cpu = weigh(recorded).clocks[0]
    assert cpu.clock == "cpu" and 0 < cpu.lower_s < 0.5 * weigh(recorded).claimed_s <= cpu.saved_s + 0.001, cpu
    for n in range(3, len(recorded) + 1):
        truth = weigh(recorded[:n])
        assert truth.outcome != "shown", (n, truth.reason)


GY_HONEST = {
    "eval": [
        ("best", 0, 0.47, 0.698, 0.2022, True),
        ("cand", 0, 0.33, 0.489, 0.0786, True),
        ("best", 1, 0.37, 0.774, 0.2003, False),
        ("cand", 1, 0.32, 0.398, 0.1051, False),
        ("best", 2, 0.36, 0.571, 0.1974, False),
        ("cand", 2, 0.26, 0.337, 0.0962, False),
        ("best", 3, 0.42, 0.723, 0.2077, False),
        ("cand", 3, 0.28, 0.489, 0.0864, False),
        ("best", 4, 0.37, 0.684, 0.1924, False),
        ("cand", 4, 0.28, 0.477, 0.0902, False),
        ("best", 5, 0.41, 0.558, 0.204, False),
        ("cand", 5, 0.3, 0.475, 0.1045, False),
    ],
    "reverify": [
        ("best", 0, 0.51, 0.811, 0.2062, True),
        ("cand", 0, 0.43, 0.662, 0.1068, True),
        ("best", 1, 0.28, 0.364, 0.1329, False),
        ("cand", 1, 0.32, 0.53, 0.1065, False),
        ("best", 2, 0.41, 0.73, 0.2044, False),
        ("cand", 2, 0.25, 0.453, 0.082, False),
        ("best", 3, 0.35, 0.595, 0.1727, False),
        ("cand", 3, 0.23, 0.287, 0.0681, False),
        ("best", 4, 0.3, 0.578, 0.1415, False),
        ("cand", 4, 0.3, 0.494, 0.103, False),
        ("best", 5, 0.28, 0.549, 0.1359, False),
        ("cand", 5, 0.26, 0.373, 0.0741, False),
        ("best", 6, 0.33, 0.47, 0.1633, False),
        ("cand", 6, 0.25, 0.405, 0.0761, False),
        ("best", 7, 0.42, 0.649, 0.2027, False),
        ("cand", 7, 0.3, 0.513, 0.0972, False),
        ("best", 8, 0.36, 0.557, 0.1726, False),
        ("cand", 8, 0.32, 0.442, 0.1085, False),
        ("best", 9, 0.27, 0.464, 0.1312, False),
        ("cand", 9, 0.24, 0.396, 0.0805, False),
        ("best", 10, 0.32, 0.412, 0.1679, False),
        ("cand", 10, 0.25, 0.401, 0.0808, False),
        ("best", 11, 0.28, 0.505, 0.1392, False),
        ("cand", 11, 0.25, 0.484, 0.0765, False),
    ],
}
"""record["side_costs"] of an honest ~2x keep (tests/security/test_hostile_role_e2e.py's
control on the pyserve target), suite run GY, 2026-12-03: (side, look, CPU s, wall s, claimed s,
started) for the decision's 6 looks and the confirmation's 12."""


def test_an_honest_gain_whose_claim_moves_with_the_machine_is_shown():
    """Its CPU saving, 0.07 s per look of the 0.083 s claimed, moves from look to look with its
    claim (0.026..0.124 s): a look whose machine ran best's timed calls slower claims more and
    saves more. Bounded from the spread of the savings alone, 16 steady looks could not place it
    above half the claim (0.0344 s against 0.0416: inconclusive, review, rejected in GY); from
    the spread of each look's saving net of half its own claim they do."""
    recorded = [
        look
        for stage in ("eval", "reverify")
        for look in looks_of(
            SideCost(side, r, cpu, wall, claimed, started=st) for side, r, cpu, wall, claimed, st in GY_HONEST[stage]
        )
    ]
    truth = weigh(recorded)
    cpu = truth.clocks[0]
    assert truth.outcome == "shown" and truth.looks == 16 and cpu.clock == "cpu", truth.reason
    assert cpu.lower_s > 0.5 * truth.claimed_s > 0.0344, cpu
