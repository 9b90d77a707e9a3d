"""Timers and statistics: L2 flush, CUDA graphs, CUDA events, a CPU stand-in.

- `L2Flush`: a buffer of max(2 x L2, 64 MiB) zeroed before every timed block, so a block never
  starts with its inputs in L2 (the flush itself is not timed).
- `GraphTimer`: a CUDA graph of `reps` launches, replayed between two CUDA events after a
  flush; `block()` returns microseconds per launch. For microsecond kernels: no launch gaps,
  no CPU in the measurement. Callers rotate buffer sets across the launches (`cycle`) so that
  the graph's working set exceeds L2 and each launch reads cold data.
- `EventTimer`: the same without a graph (for callables that cannot be captured).
- `CpuTimer`: the process's CPU time (time.process_time) around `reps` calls (no GPU:
  Triton's interpreter).
- `summarize`: median, mean, std, min, p10, p90 of a list of samples.

`torch` is passed in (never imported here), so the timers run against a stand-in in tests.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

FLUSH_MIN_BYTES = 64 << 20

LIVE_GRAPHS: list[Any] = []
"""Every CUDA graph a GraphTimer captured lives until the process ends (the buffers its
launches touch do not: a graph that is never replayed again may point at freed memory, and a
served look makes new buffers and graphs every look, harness/serve.py KEEP_BUFFERS).
Measured on the H100 (torch 2.11+cu130, triton 3.6, 2026-11-23): once a graph that replayed
a Triton kernel was destroyed, a later graph's replay of the same kernel faulted
with "illegal memory access" (compute-sanitizer, which serialises launches, found no bad
access; keeping the graphs alive, or timing without graphs, never faulted). What a graph
keeps is its own memory pool: what the launches allocated during the capture."""


def use_side_stream(torch: Any) -> None:
    """Put this thread on a stream of its own for the whole process (a GPU harness calls it
    once, before the bench's code runs), and captures then run on it (`capture_stream`).

    Autograd runs each backward op on the stream its forward op ran on. A benchmark function
    that builds `y = f(x)` in its setup and times `y.backward(dy)` ran its forward on the
    legacy default stream, which no capture may use, so the backward's launches invalidated
    every capture and were timed eagerly: host-bound, 170-390 µs whatever the size, the look's
    level moving by 2x from process to process. Measured on the H200 (torch 2.11, 2026-11-30,
    docs/h100-wave3/part10-wild-served-h200.md): Liger-Kernel's RMSNorm backward, served, an
    A/A undecided after 20 looks. With the forward on this stream, the capture on the same
    stream records the backward's launches."""
    torch.cuda.set_stream(torch.cuda.Stream())


def capture_stream(torch: Any) -> Any | None:
    """The stream a capture runs on: the thread's own (`use_side_stream`), so that launches
    ordered after work done before the capture land in it; None (torch's side stream) when
    the thread is on the default stream, which cannot be captured."""
    current = torch.cuda.current_stream()
    return None if current == torch.cuda.default_stream() else current


@contextmanager
def capturing(torch: Any, graph: Any, pool: Any = None) -> Iterator[None]:
    """`torch.cuda.graph(graph)`, leaving the process fit for eager launches when the capture
    fails. torch's context manager ends a capture in `capture_end` and only then restores the
    stream it replaced; when the capture was invalidated (a callable that launches on another
    stream, as autograd's backward does on the forward's stream), `capture_end` raises, the
    thread stays on the capture stream and each CUDA generator stays marked as capturing: every
    later random draw then fails ("Offset increment outside graph capture encountered
    unexpectedly"). Measured on the H200 (torch 2.11, 2026-11-30): Triton's layer-norm tutorial
    served by import, whose backward mode times `y.backward(dy)`, failed every config after the
    first capture. On failure this puts the thread back on the stream it was on and gives each
    CUDA generator a copy of its state that is not capturing (`clone_state`), then re-raises
    for the caller's eager fallback. `pool`: a memory pool shared with other captures
    (Timing.share_pool); None: the graph's own."""
    stream = torch.cuda.current_stream()
    side = capture_stream(torch)
    try:
        with torch.cuda.graph(graph, pool=pool, stream=side):
            yield
    except BaseException:
        torch.cuda.set_stream(stream)
        for gen in torch.cuda.default_generators:
            try:
                gen.graphsafe_set_state(gen.clone_state())
            except Exception:  # a torch without graph-safe generators: the eager fallback says what fails
                pass
        raise


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """median, mean, std (sample; 0 for one sample), min, p10, p90 and n of `samples`."""
    xs = [float(x) for x in samples]
    if not xs:
        raise ValueError("summarize: no samples")
    return {
        "median": statistics.median(xs),
        "mean": statistics.fmean(xs),
        "std": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        "min": min(xs),
        "p10": percentile(xs, 10),
        "p90": percentile(xs, 90),
        "n": float(len(xs)),
    }


def cycle(fns: Sequence[Callable[[], Any]]) -> Callable[[], Any]:
    """One callable that calls fns[0], fns[1], ... in turn (buffer rotation in a graph)."""
    state = {"i": 0}

    def call() -> Any:
        i = state["i"]
        state["i"] = (i + 1) % len(fns)
        return fns[i]()

    return call


def rotation_sets(bytes_per_call: int, l2_bytes: int, reps: int) -> int:
    """Buffer sets to rotate so that `reps` launches touch at least 2 x L2 of distinct data."""
    if bytes_per_call <= 0:
        return 1
    return max(1, min(reps, math.ceil(2 * l2_bytes / bytes_per_call)))


def reps_for(one_call_us: float, block_us: float, max_reps: int) -> int:
    """Launches per timed block so that a block lasts about `block_us`."""
    return max(1, min(max_reps, round(block_us / max(one_call_us, 1e-3))))


BLOCK_BYTES = 1 << 30
"""What a one-tree look's timed block moves when the spec says how many bytes a call moves:
about 330 µs of a memory-bound kernel at an H100's 3.3 TB/s."""
MAX_BYTE_LAUNCHES = 256
"""The most launches a block gets by the bytes rule: the regression grid's 1.6 µs RMSNorm
launches then make 0.4 ms blocks, and the naive start's 277 µs launches on 320 KB (one
program per row) 71 ms rather than the 0.28 s of 1000."""
LONG_BLOCK_US = 500_000.0
"""A block of BLOCK_BYTES that the calibration says lasts longer (a compute-bound kernel on
little data) is cut to --block-us instead. Far above what the host's share of an eager call
can make a microsecond kernel's estimate look like: the estimate times one call between CUDA
events, Python wrapper and launch included, and on the H100 that put the RMSNorm regression
grid's 2-3 µs configs at 30-60 µs x 1000 launches, so a threshold of 6 ms or 50 ms sent a
config to the calibration in one tree's process and not in the other's (219 against 1095
launches a block; per launch, in two runs, 1.47 µs at 1024 and 1.63 µs at 256 for one-row)."""


def block_launches(nbytes: int, one_call_us: float, block_us: float, max_reps: int, sets: int) -> int:
    """Launches per timed block of a one-tree look, a multiple of `sets` (each set called
    equally often): enough to move BLOCK_BYTES (at most MAX_BYTE_LAUNCHES) when the bytes a
    call moves are known, so the
    count is the same in every process for the config, whatever the kernel's speed or the
    calibration's noise (on the H100 a single flushed call's estimate of a 20 µs kernel swung
    between 20 and 50 µs from look to look, giving 6 to 14 launches); else, or when such a
    block would last more than LONG_BLOCK_US by the calibration, `reps_for` (the count then
    follows the kernel's speed)."""
    reps = reps_for(one_call_us, block_us, max_reps)
    if nbytes > 0:
        by_bytes = max(1, min(max_reps, MAX_BYTE_LAUNCHES, math.ceil(BLOCK_BYTES / nbytes)))
        if by_bytes * one_call_us <= LONG_BLOCK_US:
            reps = by_bytes
    return math.ceil(max(reps, sets) / sets) * sets


def byte_launches(nbytes: int, max_reps: int, sets: int) -> int | None:
    """The count `block_launches` gives by the bytes rule (the same in every process, whatever
    the calibration read); None when the bytes a call moves are not known."""
    return block_launches(nbytes, 0.0, 1.0, max_reps, sets) if nbytes > 0 else None


LOOK_BLOCKS_US = 100_000.0
"""What a config's timed blocks need last in one look, in all, once a block is long: a tree
whose first timed block lasts B µs gets ceil(LOOK_BLOCKS_US / B) blocks (at least MIN_BLOCKS,
at most --blocks). Measured on the H200 (RMSNorm's naive start, 2026-11-29): the guard shape
long-20000 took 293 µs a call in blocks of 256 launches (its small rows need 256 buffer sets
to exceed L2), so its 9 blocks were 0.69 s of a side's 1.1 s look; three such blocks average
768 launches, and a tuned tree's blocks of a few ms keep all nine."""
MIN_BLOCKS = 3


def look_blocks(blocks: int, first_block_us: float) -> int:
    """Timed blocks of a config in a look whose first timed block lasted `first_block_us`
    (LOOK_BLOCKS_US): `blocks` unless that block was long. Decided after the first block, so
    the count may differ between trees (a slow tree gets fewer, longer blocks); each side's
    statistics are over its own blocks."""
    if not math.isfinite(first_block_us) or first_block_us <= 0:
        return blocks
    return max(min(blocks, MIN_BLOCKS), min(blocks, math.ceil(LOOK_BLOCKS_US / first_block_us)))


def l2_bytes(torch: Any, device: int = 0) -> int:
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 50 << 20) or (50 << 20))


SPIN_US = 100.0
"""How long the GPU spins after a CUDA graph block's L2 flush, before the block's start event
(L2Flush.spin; --spin-us, 0: none). Measured on the H200 (experiments/process_offset.py,
2026-12-01, 8 fresh process pairs x 6 looks of A/A per variant): without the spin, a look's
per-config log ratio had a 0.9-2.0% sd within a pair of processes, and the pairs' means spread
by up to 0.7% more than that explains (the common per-decision offset of
docs/h100-wave3/part21); with 100 µs of spin the sd within a pair fell to 0.14-0.35% (one-row
0.79%) and the offset to 0.0-0.28% (docs/h100-wave3/part22-the-spin-after-the-flush-h200.md)."""

SPIN_CYCLES_PER_US = 2000
"""GPU clock cycles per microsecond of spin (about: an H100's and an H200's SMs run at up to
1.98 GHz; the spin is a margin, its length need not be exact)."""


class L2Flush:
    """Zeroes a buffer of max(2 x L2, 64 MiB) bytes; call before each timed block.

    `spin()`, after the zeroing and before a CUDA graph's block (GraphTimer, ColdGraphTimer:
    Timing passes it to them alone), keeps the GPU busy `spin_us` (SPIN_US; torch.cuda._sleep,
    looked up once, here), so that the host has enqueued the block's start event and its replay
    before the GPU reaches them (NVBench holds its stream with a blocking kernel for the same
    reason: nvbench/blocking_kernel.cuh). Without it, a block whose replay reaches the GPU after
    the flush has ended counts the GPU's wait for the host between its events: a host slower to
    enqueue (its core, its caches) reads every short block a few microseconds longer, an offset
    its process keeps for life. The spin is before the start event, no block's time, and a
    graph's block has no host time of its own to hide beyond its one replay call. An eager block
    (EventTimer) and a calibration (one_call_us) never spin: their launches' host time is part of
    what they measure, and a spin would hide its first ~100 µs."""

    def __init__(self, torch: Any, device: int = 0, spin_us: float = SPIN_US) -> None:
        self.torch = torch
        self.nbytes = max(2 * l2_bytes(torch, device), FLUSH_MIN_BYTES)
        self.buffer = torch.empty(self.nbytes // 4, dtype=torch.int32, device="cuda")
        self.sleep = getattr(torch.cuda, "_sleep", None)
        self.spin_cycles = int(spin_us * SPIN_CYCLES_PER_US) if self.sleep is not None else 0
        """0 where this torch build has no torch.cuda._sleep: no spin (the harness says so)."""

    def __call__(self) -> None:
        self.buffer.zero_()

    def spin(self) -> None:
        if self.spin_cycles > 0 and self.sleep is not None:
            self.sleep(self.spin_cycles)


class EventTimer:
    """A block of `reps` eager launches between CUDA events after a flush (launch gaps
    included): the fallback for callables a CUDA graph cannot capture. block() returns
    microseconds per launch."""

    def __init__(
        self,
        torch: Any,
        fn: Callable[[], Any],
        reps: int,
        flush: Callable[[], None],
        warm_blocks: int = 2,
        span: Callable[[], AbstractContextManager[Any]] | None = None,
        pool: Any = None,
        spin: Callable[[], None] | None = None,
    ) -> None:
        self.torch, self.fn, self.reps, self.flush = torch, fn, reps, flush
        self.spin = spin  # after the flush, before the start event (L2Flush.spin: graph timers only)
        self.pool = pool  # the graph timers' capture pool (capturing)
        self.span = span or nullcontext  # the profiler range around the timed launches only
        self.prepare()
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        for _ in range(warm_blocks):
            self.block()

    def prepare(self) -> None:
        """Before the first block (GraphTimer captures its graph here)."""

    def launch(self) -> None:
        for _ in range(self.reps):
            self.fn()

    def block(self) -> float:
        self.flush()  # outside the range: the flush is no launch of the config's
        if self.spin is not None:
            self.spin()
        with self.span():
            self.start.record()
            self.launch()
            self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1000.0 / self.reps


class GraphTimer(EventTimer):
    """One block: the L2 flushed (untimed), then one replay of a CUDA graph of `reps`
    launches between two CUDA events: no launch gaps, no CPU in the measurement."""

    def prepare(self) -> None:
        torch, fn = self.torch, self.fn  # the launches' buffers live as long as this timer
        fn()
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        LIVE_GRAPHS.append(self.graph)  # before the capture: a graph whose capture failed stays too
        with capturing(torch, self.graph, self.pool):
            for _ in range(self.reps):
                fn()
        torch.cuda.synchronize()

    def launch(self) -> None:
        self.graph.replay()


class ColdGraphTimer(EventTimer):
    """A config's last timed block on a GPU: a CUDA graph of one call per set, captured with no
    call of theirs before it (the block's own timer ran the same code first: Triton's compile,
    the allocator's pools), replayed once between two CUDA events after the flush. Each set is
    called once in the block, onto the outputs its refresh filled with NaN: a kernel that
    tests its output (or a flag it wrote) to skip the work finds nothing done at any launch.
    A block of the regular timer calls each set reps/sets times, and its later calls of a set
    could skip (harness/sets.py, bench.Bench.timed_rows). block() returns µs per launch."""

    def __init__(
        self,
        torch: Any,
        calls: Sequence[Callable[[], Any]],
        flush: Callable[[], None],
        span: Callable[[], AbstractContextManager[Any]] | None = None,
        pool: Any = None,
        spin: Callable[[], None] | None = None,
    ) -> None:
        self.calls = list(calls)
        super().__init__(
            torch, cycle(self.calls), len(self.calls), flush, warm_blocks=0, span=span, pool=pool, spin=spin
        )

    def prepare(self) -> None:
        self.graph = self.torch.cuda.CUDAGraph()
        LIVE_GRAPHS.append(self.graph)  # before the capture, as GraphTimer does
        with capturing(self.torch, self.graph, self.pool):
            for call in self.calls:
                call()
        self.torch.cuda.synchronize()

    def launch(self) -> None:
        self.graph.replay()


class CpuTimer:
    """No GPU: the CPU time this process spent on `reps` calls (time.process_time, every
    thread of the process), microseconds per call. Not the wall clock: on a loaded machine
    the wall clock counts the time other processes held the cores, and best's and the
    candidate's looks run in two processes at different moments. Measured on this project's
    2-core machine at a load of 6 (RMSNorm in Triton's interpreter, two served processes of
    the same tree, ABBA): a look's A/A ratio spread 9-14% (sd) by CPU time, 20-54% by the
    wall clock. Work a call hands to another process is not counted here; kopt's own
    accounting of the whole process tree is (docs/files.md)."""

    def __init__(
        self,
        fn: Callable[[], Any],
        reps: int,
        warm_blocks: int = 1,
        span: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.fn, self.reps, self.span = fn, reps, span or nullcontext
        for _ in range(warm_blocks):
            self.block()

    def block(self) -> float:
        with self.span():
            t0 = time.process_time()
            for _ in range(self.reps):
                self.fn()
            return (time.process_time() - t0) * 1e6 / self.reps


def event_times(
    torch: Any, fn: Callable[[], Any], iters: int, warmup: int, flush: Callable[[], None] | None = None
) -> list[float]:
    """Seconds per call of `fn`, one pair of CUDA events around each call (flushed before
    each when `flush` is given)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, end in events:
        if flush is not None:
            flush()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 for start, end in events]


def one_call_us(torch: Any | None, fn: Callable[[], Any], flush: Callable[[], None] | None) -> float:
    """An estimate of one call, in µs: on a GPU (torch given) the fastest of 3 calls after a
    warm-up, CUDA events after a flush; on the CPU (torch None) one perf_counter call (the
    interpreter compiles nothing, and its calls are slow enough to time one)."""
    if torch is None:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    fn()
    return min(event_times(torch, fn, 3, 0, flush)) * 1e6
