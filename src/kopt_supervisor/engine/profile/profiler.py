"""What every profiler adapter (engine/profile/ncu.py, rocprof.py) shares, and the check of
the candidate's outputs under the profiler (at the end, below): the interface the loop calls, and numbers and units as the tools print them, turned into base units (ns,
bytes, bytes/s). `choose_profiler` (engine/profile/__init__.py) picks the adapter for a vendor.

The loop asks `choose_profiler(cfg.profile.kind, vendor, outside_ranges=...)` for a
`Profiler`, then runs its passes, one run of the bench under the tool each:

    done = []
    while (p := profiler.next_pass(bench_argv, out_dir, kernel_regex, done)) is not None:
        ... run p.argv (cwd = the worktree, env with KOPT_PROFILE=1; p.out_dir lies in out_dir)
        ... then each of profiler.after_commands(p.out_dir) (reading the tool's output, no GPU)
        done.append(p)
    summary = profiler.parse_passes(done, kernel_regex)  # all the passes' launches, merged

`parse(out_dir, kernel_regex)` reads one pass's folder (what `command` wrote).

A profiler of one pass (rocprofv3, ncu with outside_ranges = "full") has `next_pass` return
`command(...)` once. ncu by default takes two (engine/profile/ncu.py): the full metrics
inside the `kopt:` ranges, GPU time alone outside them. The next pass may depend on what the
passes before it found (their folders are read), so the list is asked for one at a time.
Nothing here runs a subprocess.

Units. ncu prints values with thousands separators ("10,196,000") and, depending on
`--print-units`, scaled units ("usecond", "Kbyte/block", "Gbyte/second"); unsupported
metrics come back as "n/a". rocprofv3 prints plain integers in nanoseconds. The unit
parsers are pure and raise ValueError on text they cannot read; callers turn that into a
KoptFailure naming the file.

The candidate's outputs under the profiler against a trusted tree's (docs/security.md, "The
outputs under the profiler"): a tree that does less work, or wrong work, only while it is
profiled would otherwise have the profiler's kernel time agree with a patched timer.

The baseline's profile draws its inputs from a seed it records (KOPT_PROFILE_SEED) and the
harness summarises each config's profiled calls' outputs into `<profile folder>/outputs.json`
(KOPT_PROFILE_OUTPUTS, the audit's JSON). Every keep's profile draws the same inputs, and the
candidate's outputs are compared with the **baseline's**: the user's own tree, profiled before
any candidate ran, never best's, whose tree (a candidate once) could carry dormant code that
writes whatever the next cheat needs. A run whose baseline recorded no seed (begun before, or
its profile failed) compares with best's, as it did before. `compare_outputs` reads both files as any
file a sandbox wrote (never through a link, never blocking, bounded: sandbox.read_output) and
compares them with decide/audit.compare.

    compare_outputs(ref_dir, cand_dir, columns=..., configs=..., earlier=[records], reference=...) ->
        {"checked": n, "tolerance": {...}, "against": reference}   they agree
        {"checked": 0, "note": ...}          the reference wrote none (not kopt's harness), none compared before
        {"unconfirmed": ...}                 the keep goes to review
        raises CorrectnessRefuted            the candidate's outputs differ, or are missing

Reads two files; no other side effect.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.config import ProfileConfig
from kopt_supervisor.engine.decide import audit
from kopt_supervisor.engine.metrics import BenchError
from kopt_supervisor.engine.profile.summary import ProfileSummary
from kopt_supervisor.engine.sandbox.paths import read_output

PROFILE_ENV = {"KOPT_PROFILE": "1"}
"""Set by the loop for profiled runs; a bench may run fewer repetitions, but must run the
same number of calls for best and candidate (see docs/profiling.md)."""
PROFILE_WARM_ENV = "KOPT_PROFILE_WARM"
"""Set (with PROFILE_ENV and one call per config) for a held profile's warm-up: the same command
without the profiler, run only to compile the tree's kernels into the profile's cache
(loop/profile_runs.py WarmUp); its output is not read."""
PROFILE_CALLS_ENV = "KOPT_PROFILE_CALLS"
"""The calls per config kopt asks of a profile (`ProfileCalls.env`): a JSON object naming each
config's, or one number for a closer profile's configs (a bench that never said its own)."""
PROFILE_SEED_ENV = "KOPT_PROFILE_SEED"
"""The profiled inputs' base seed, the same for both trees (their outputs then compare)."""
PROFILE_OUTPUTS_ENV = "KOPT_PROFILE_OUTPUTS"
"""Where the harness summarises each config's last profiled output (decide/audit.py's JSON)."""
PROFILE_OUTPUTS = "outputs.json"
"""That file's name in a profile's folder."""
PROFILE_HOLD_ENV = "KOPT_PROFILE_HOLD"
"""A profile started ahead: the file kopt writes `go` (or `stop`) into; kopt's harness holds until
then, running nothing of the tree and nothing on the GPU (kernels/harness/hold.py)."""
PROFILE_HOLD_GO = "go"
"""That file's name in a profile's folder."""
PROFILE_HELD_SUFFIX = ".held"
"""`<go file>.held`: what a run that holds writes first."""
MAX_PROFILE_OUTPUTS_BYTES = 64 << 20
"""The most kopt reads of a candidate's outputs file (a summary is ~2 KB a config)."""
PROFILE_CONFIGS_ENV = "KOPT_PROFILE_CONFIGS"
"""With PROFILE_CALLS_ENV: the configs (a JSON list of their keys) that take those calls, the
others the bench's own (kernels/harness/bench.py `profile_calls_for`)."""
ESCALATED_CALLS = 12
"""Calls per config of a keep's second profile, taken when the first (2 calls per config under
ncu: on the H200 two launches of a 15 us kernel differed by 5%) could not tell on a class the
keep claims. Six times the launches: about 2.4 times narrower an interval."""
CLOSER_FACTOR = 3
"""With the bench's own calls known: a closer profile's configs take this many times their own,
at most ESCALATED_CALLS (kopt's harness: 4 -> 12; a config over its draw limit, 2 -> 6)."""


@dataclass(frozen=True)
class ProfileCalls:
    """The calls per config kopt asks of one profile. Where the bench said its own numbers in the
    baseline's profile (`own_calls`: kopt's harness), every config is named with exactly its
    calls (`exact`), and each config's GPU time is divided by them on both sides: never by the
    tree's own launches, which it chooses (one tiny launch once in each range made a "call" of
    all of them; floors.py). Else, as before: `more` calls (None: the bench's own) of `configs`
    (none: all), counted from the launches."""

    more: int | None = None
    configs: tuple[str, ...] = ()
    exact: tuple[tuple[str, int], ...] = ()

    @classmethod
    def first(cls, own: Mapping[str, int]) -> ProfileCalls:
        """A keep's first profile: the bench's own calls, named."""
        return cls(exact=tuple(sorted(own.items())))

    @classmethod
    def closer(cls, own: Mapping[str, int], configs: Sequence[str]) -> ProfileCalls:
        """A closer profile: `configs` at CLOSER_FACTOR x their own (ESCALATED_CALLS without them)."""
        picked = set(configs)
        exact = ((k, min(ESCALATED_CALLS, CLOSER_FACTOR * n) if k in picked else n) for k, n in own.items())
        return cls(ESCALATED_CALLS, tuple(configs), tuple(sorted(exact)))

    @property
    def asked(self) -> tuple[tuple[str, int], ...] | None:
        """Per config, the calls the bench was told to make; None: its own."""
        return self.exact or None

    def env(self) -> dict[str, str]:
        if self.exact:
            return {PROFILE_CALLS_ENV: json.dumps(dict(self.exact))}
        return {
            **({PROFILE_CALLS_ENV: str(self.more)} if self.more is not None else {}),
            **({PROFILE_CONFIGS_ENV: json.dumps(list(self.configs))} if self.configs else {}),
        }


OUTSIDE_RANGES = ("time", "full")
"""[profile].outside_ranges: what ncu records of the kernels launched outside the kopt ranges."""
KEEP_MODES = ("time", "full")
"""[profile].keep: what a keep's two trees are profiled for. "time": GPU time (and, with ncu, L2
bytes) in one pass over the whole run (all the keep's check reads); "full": the baseline's passes."""


@dataclass(frozen=True)
class ProfilePass:
    """One run of the bench under the profiler: what it is for, its argv (the bench's argv at
    the end) and the folder it writes (created; `after_commands(out_dir)` reads it back)."""

    role: str
    """What the profiler parses it as: "single" (the one pass of `command`), or ncu's
    "ranges", "outside", "whole" (engine/profile/ncu.py)."""
    label: str
    argv: tuple[str, ...]
    out_dir: Path


class Profiler(ABC):
    """Base of the adapters: `name`, the executable it needs, and the calls above; an adapter
    must say how its tool is run (`command`) and read (`parse`)."""

    name = ""
    executable = ""

    def available(self) -> bool:
        """True when the tool is on PATH."""
        return shutil.which(self.executable) is not None

    @abstractmethod
    def command(self, inner_argv: list[str], out_dir: Path, kernel_regex: str) -> list[str]:
        """The argv that profiles `inner_argv` into `out_dir`."""

    def next_pass(
        self, inner_argv: list[str], out_dir: Path, kernel_regex: str, done: Sequence[ProfilePass]
    ) -> ProfilePass | None:
        """The next pass given those `done` (their outputs on disk), None when the profile is
        complete. By default one pass: `command` into `out_dir`."""
        if done:
            return None
        argv = self.command(inner_argv, out_dir, kernel_regex)
        return ProfilePass("single", "the whole run", tuple(argv), Path(out_dir).resolve())

    def for_keep(self, keep: str) -> Profiler:
        """The profiler a keep's two trees run under ([profile].keep, KEEP_MODES): by default
        this one (a tool of one cheap pass has nothing to leave out)."""
        return self

    def after_commands(self, out_dir: Path) -> list[list[str]]:
        """Commands to run after `command` succeeded and before `parse` (none by default);
        they read the pass's output and not each other's, so the loop may run them at once.
        A failing one is a failed profile."""
        return []

    @abstractmethod
    def parse(self, out_dir: Path, kernel_regex: str) -> ProfileSummary:
        """The summary of one pass's folder (the output of `command`)."""

    def parse_passes(self, done: Sequence[ProfilePass], kernel_regex: str) -> ProfileSummary:
        """The summary of the passes `next_pass` gave and the loop ran (the roles come from
        this list, never from what lies on disk). By default: the one pass, `parse`."""
        if len(done) != 1 or done[0].role != "single":
            raise KoptFailure(f"{self.name}: expected its one pass, got {[p.role for p in done]}")
        return self.parse(done[0].out_dir, kernel_regex)


# ---------------------------------------------------------------------------------------
# Numbers and units as the tools print them

_TIME_NS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "nsec": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "usec": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "msec": 1e6,
    "s": 1e9,
    "second": 1e9,
    "sec": 1e9,
}

_PREFIX = {
    "": 1.0,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 1024.0,
    "Mi": 1024.0**2,
    "Gi": 1024.0**3,
    "Ti": 1024.0**4,
}

_MISSING = {"", "n/a", "na", "nan", "-", "none", "(null)"}


def parse_number(text: str | None) -> float | None:
    """'10,196,000' -> 10196000.0; 'n/a' or '' -> None; anything else unreadable -> ValueError."""
    if text is None:
        return None
    s = str(text).strip().strip('"').strip()
    if s.lower() in _MISSING:
        return None
    s = s.replace(",", "").replace("_", "")
    value = float(s)
    if math.isnan(value):
        return None
    return value


def time_to_ns(value: float, unit: str) -> float:
    """A duration in `unit` ("nsecond", "usecond", "ms", ...) in nanoseconds."""
    u = unit.strip()
    if u not in _TIME_NS:
        raise ValueError(f"unknown time unit {unit!r}")
    return value * _TIME_NS[u]


def _split_prefix(word: str, base: str) -> float | None:
    """'Kbyte' with base 'byte' -> 1e3; None when `word` is not `base` with a known prefix."""
    if not word.endswith(base):
        return None
    prefix = word[: -len(base)]
    return _PREFIX.get(prefix)


def bytes_of(value: float, unit: str) -> float:
    """A size in `unit` ("byte", "Kbyte", "KiB", "byte/block", "Kbyte/block") in bytes."""
    u = unit.strip()
    head = u.split("/", 1)[0].strip()
    for base in ("byte", "B"):
        scale = _split_prefix(head, base)
        if scale is not None:
            return value * scale
    raise ValueError(f"unknown size unit {unit!r}")


def rate_to_bytes_per_s(value: float, unit: str) -> float:
    """A bandwidth in `unit` ("byte/second", "Gbyte/second", "GB/s", "TB/s") in bytes/s."""
    u = unit.strip()
    if "/" not in u:
        raise ValueError(f"unknown bandwidth unit {unit!r}")
    num, den = (p.strip() for p in u.split("/", 1))
    size = bytes_of(1.0, num)
    if den not in _TIME_NS:
        raise ValueError(f"unknown bandwidth unit {unit!r}")
    return value * size / (_TIME_NS[den] * 1e-9)


WHERE = "the candidate's outputs under the profiler"


class CorrectnessRefuted(KoptFailure):
    """A keep whose rows fail their correctness rule when run in fresh processes (or whose
    outputs under the profiler differ from best's)."""


def compare_outputs(
    ref_dir: Path,
    cand_dir: Path,
    *,
    columns: list[str],
    configs: set[str],
    earlier: Iterable[Mapping[str, Any]],
    reference: str = "best",
    asked: Mapping[str, int] | None = None,
    own: Path | None = None,
) -> dict[str, Any]:
    """The reference's and the candidate's outputs.json compared config by config (`reference`:
    "baseline", the baseline's profile at the same seed, or "best", best's; `columns`: the
    baseline's config columns; `configs`: its config keys; `earlier`: the run's iteration
    records so far).

    The reference's file missing or unreadable: a note (a bench that is not kopt's harness)
    while no earlier keep compared outputs, else unconfirmed (best's tree, a candidate once, may
    be what stopped writing them); a reference whose configs are not the baseline's:
    unconfirmed. The tolerance is the reference's file's; best's only until a comparison of the
    run recorded one, then that one (best's tolerance is its tree's word). A candidate that
    wrote none where the reference did, one that does not parse, or a config missing, added or
    different: CorrectnessRefuted.

    `asked` (a closer pair, compared with best's alone: a new seed), with `own` (the baseline's
    profile's folder): each side holds as many outputs per config as the calls kopt asked make,
    at the baseline's outputs per call (a best short of them: unconfirmed; a candidate:
    refuted). Two trees of one proposer that both ran fewer calls would otherwise agree."""
    records = list(earlier)
    whose = "the baseline's" if reference == "baseline" else "best's"
    try:
        ref = audit.parse(
            read_output(ref_dir / PROFILE_OUTPUTS, MAX_PROFILE_OUTPUTS_BYTES).decode(),
            columns,
            f"{whose} outputs under the profiler",
        )
    except (BenchError, OSError, UnicodeDecodeError) as e:
        why = f"{whose} profile wrote no outputs kopt could read (unreadable: {e})"
        if compared_before(records):
            return {"unconfirmed": f"{why}, though an earlier keep of this run compared them"}
        return {"checked": 0, "note": f"{why}: not kopt's harness, not compared"}
    if configs and set(ref) != configs:
        return {"unconfirmed": f"{whose} outputs list {len(ref)} config(s), not the baseline's {len(configs)}"}
    trusted = first_tolerances(records) if reference != "baseline" else {}
    ref = {
        k: dataclasses.replace(b, atol=trusted[k][0], rtol=trusted[k][1]) if k in trusted else b for k, b in ref.items()
    }
    try:
        data = read_output(cand_dir / PROFILE_OUTPUTS, MAX_PROFILE_OUTPUTS_BYTES + 1)
    except FileNotFoundError:
        raise CorrectnessRefuted(f"{WHERE}: none written, while {whose} profile wrote them") from None
    except OSError as e:  # a link, a FIFO, a folder: never read through
        raise CorrectnessRefuted(f"{WHERE}: none written as a regular file ({e})") from None
    if len(data) > MAX_PROFILE_OUTPUTS_BYTES:
        raise CorrectnessRefuted(f"{WHERE}: over {MAX_PROFILE_OUTPUTS_BYTES} bytes, more than a summary can be")
    try:
        cand = audit.parse(data.decode(), columns, WHERE)
    except (BenchError, UnicodeDecodeError) as e:
        raise CorrectnessRefuted(str(e)) from None
    per_call = _outputs_per_call(own, columns) if asked and own else {}
    for side, got in (("best", ref), ("cand", cand)):
        for key, n in (asked or {}).items():
            want = n * per_call.get(key, 0)
            if want and key in got and len(got[key].outputs) != want:
                why = f"config {key}: {len(got[key].outputs)} output summaries for the {n} calls asked, not {want}"
                if side == "best":
                    return {"unconfirmed": f"{whose} closer profile: {why}"}
                raise CorrectnessRefuted(f"{WHERE}, {why}")
    extra = sorted(set(cand) - set(ref))
    missing = sorted(set(ref) - set(cand))
    if missing or extra:
        which = f"config {missing[0]} missing" if missing else f"config {extra[0]} not in {whose}"
        raise CorrectnessRefuted(f"{WHERE}: {which}")
    for key, b in ref.items():
        differs = audit.compare(b, cand[key])
        if differs:
            said = differs.replace("audited timed call (set 0)", "its profiled calls' outputs in order").replace(
                "best's", whose
            )
            raise CorrectnessRefuted(f"{WHERE}, config {key}: {said}")
    return {"checked": len(ref), "tolerance": {k: [b.atol, b.rtol] for k, b in ref.items()}, "against": reference}


def baseline_reference(
    baseline: tuple[int, Mapping[str, Any]], later: Iterable[tuple[int, Mapping[str, Any]]], profiles: Path
) -> tuple[int, Path] | None:
    """The seed and folder of the baseline's outputs under the profiler, from its (version,
    record) and the run's iterations after it, in order: the baseline's own profile
    (profiles/vN/best), else the first keep's profile of the baseline's tree (its record's
    `anchor`: [profile].baseline = "first-keep"); None where neither drew one (a run begun
    before, a profile that failed): then best's outputs are the reference."""
    for n, (version, record) in enumerate((baseline, *(x for x in later if x[0] > baseline[0]))):
        prof = record.get("profile") or {}
        seed = prof.get("seed") if n == 0 else prof.get("anchor")
        if isinstance(seed, int) and not isinstance(seed, bool):
            return seed, profiles / f"v{version}" / "best"
    return None


def _baselines_word(folder: Path, columns: Sequence[str]) -> dict[str, audit.ConfigAudit]:
    """The baseline's profile's outputs.json in `folder` (trusted: the baseline's tree), per
    config; {} where it cannot be read."""
    try:
        return audit.parse(read_output(folder / PROFILE_OUTPUTS, MAX_PROFILE_OUTPUTS_BYTES).decode(), columns, "")
    except (BenchError, OSError, UnicodeDecodeError):
        return {}


def _outputs_per_call(folder: Path, columns: Sequence[str]) -> dict[str, int]:
    """Per config, the output summaries one call made in the baseline's profile (in `folder`)."""
    said = _baselines_word(folder, columns)
    return {k: len(a.outputs) // a.calls for k, a in said.items() if a.calls and len(a.outputs) % a.calls == 0}


def own_calls(folder: Path, columns: Sequence[str], keys: Iterable[str]) -> dict[str, int]:
    """The bench's own calls per config, as the baseline's profile (in `folder`) said them in its
    outputs.json; {} unless it said them for every config of `keys` (a bench that is not kopt's
    harness, or an older one: calls counted from launches)."""
    own = {k: a.calls for k, a in _baselines_word(folder, columns).items() if a.calls}
    wanted = set(keys)
    return {k: n for k, n in own.items() if k in wanted} if wanted and wanted <= set(own) else {}


@dataclass(frozen=True)
class ReusedProfile:
    """Best's tree's profile as the keep that made it BEST took it (`reusable`)."""

    summary: ProfileSummary
    version: int
    """The keep that took it."""
    age_s: float
    seed: int | None
    """Its inputs' seed (the new candidate's profile draws the same inputs); None: not recorded."""
    out_dir: Path
    """Its folder (its outputs.json, compared with the new candidate's)."""


PROFILE_FORMAT = 2
"""What a keep's profile holds, as `profile.taken.format` records it: 2 since 2026-12-01 (each config
called 4 times, 2 past 256 MB; each launch's L2 bytes beside its time). Best's profile of another
format (a run resumed across an upgrade) is not reused: its calls and counters are not the
candidate's."""


REUSED_RUN_NOISE_PCT = 0.8
"""The run-to-run term (% per profile) of a comparison against best's reused profile, at least:
the two trees profiled minutes apart, not seconds. On the H200 (2026-12-03, the RMSNorm demo's
tree profiled once per try over ~8 minutes, docs/h100-wave3/part31-profiler-shows-half-h200.md)
the wide class's 99% intervals between profiles of one unchanged tree excluded no change in 84
of 400 comparisons at the default 0.3%, in 20 at 0.6% and in none at 0.8%."""


def run_noise_pct(configured: float, reused: ReusedProfile | None) -> float:
    """The run-to-run term of a keep's comparison (`compare_per_class`): [profile].run_noise_pct,
    and at least REUSED_RUN_NOISE_PCT when best's side is a reused profile (`reusable`)."""
    return configured if reused is None else max(configured, REUSED_RUN_NOISE_PCT)


def reusable(
    made: tuple[int, Mapping[str, Any]] | None,
    best_tree: str,
    gpu: str | None,
    cfg: ProfileConfig,
    *,
    now: float,
    profiles: Path,
) -> ReusedProfile | None:
    """Best's tree's profile as the keep that made it BEST (`made`: its version and record)
    profiled it (its candidate's summary; the baseline's own, taken with [profile].baseline
    "early", where best is still the baseline's tree), when this keep would profile it the same way: the
    same tree (a format step may have changed it before the commit), the same GPU, [profile].keep
    "time", one profile per tree, of today's PROFILE_FORMAT, and at most [profile].reuse_best_s ago
    (0: never). A keep's profile then runs the candidate alone: half the profiler's time. kopt
    parsed that summary itself when it was taken; nothing the candidate can write is read again."""
    if cfg.reuse_best_s <= 0 or cfg.keep != "time" or cfg.repeats != 1 or gpu is None or made is None:
        return None
    version, record = made
    taken = (record.get("profile") or {}).get("taken") or {}
    if not isinstance(taken, dict) or not isinstance(taken.get("trees"), dict):
        return None
    # a keep's candidate; the baseline's own profile ([profile].baseline "early") says it is one
    side = "best" if taken.get("baseline") is True and set(taken["trees"]) == {"best"} else "cand"
    age = now - float(taken.get("t") or 0)
    if (
        taken["trees"].get(side) != best_tree
        or taken.get("gpu") != gpu
        or taken.get("keep") != "time"
        # taken again with more calls: not the bench's own. Nor is its first pass lent instead: that
        # is the pass that could not tell, and a tree knows which pass it is in (KOPT_PROFILE_CALLS),
        # so it could slow that one at will and lend the next candidate a gain against it
        or taken.get("calls") is not None
        or taken.get("format") != PROFILE_FORMAT
        or not 0 <= age <= cfg.reuse_best_s
    ):
        return None
    seed = taken.get("seed")
    return ReusedProfile(
        ProfileSummary.from_dict(record["profile"][side]),
        version,
        age,
        seed if isinstance(seed, int) else None,
        profiles / f"v{version}" / side,
    )


def kept_profile(
    made: tuple[int, Mapping[str, Any]] | None, best_tree: str, gpu: str | None
) -> tuple[int, ProfileSummary] | None:
    """Best's tree's profile from the keep that made it BEST (`made`: its version and record),
    whatever its age or calls: the candidate's summary kopt parsed then, the floor best's fresh
    profile is held to (floors.slower_than_kept). None when that keep profiled another tree
    than best's (neither it nor its formatted commit), on another GPU (or none known), or in
    another format."""
    if made is None or gpu is None:
        return None
    version, record = made
    profile = record.get("profile") or {}
    taken = profile.get("taken") or {}
    if not isinstance(taken, dict) or not isinstance(taken.get("trees"), dict) or not profile.get("cand"):
        return None
    # the tree profiled, or the one committed from it by [format].command (not a tree carried to
    # another BEST: that holds another keep's code): a formatted tree slower than its profile is
    # held to it all the same
    trees = (taken["trees"].get("cand"), None if record.get("carried") else record.get("commit_tree"))
    if best_tree not in trees or taken.get("gpu") != gpu or taken.get("format") != PROFILE_FORMAT:
        return None
    return version, ProfileSummary.from_dict(profile["cand"])


def outputs_of(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """An iteration record's comparison of outputs under the profiler ({} without one)."""
    got = (record.get("profile") or {}).get("outputs") or {}
    return got if isinstance(got, Mapping) else {}


def first_tolerances(records: Iterable[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per config, the (atol, rtol) of the run's first comparison that recorded one; {} before."""
    for record in records:
        tol = outputs_of(record).get("tolerance")
        if isinstance(tol, dict) and tol:
            return {str(k): (float(v[0]), float(v[1])) for k, v in tol.items()}
    return {}


def compared_before(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a keep of the run had its outputs under the profiler compared."""
    return any(outputs_of(r).get("checked", 0) > 0 for r in records)
