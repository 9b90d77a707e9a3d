"""The GPU block timers against a stand-in `torch.cuda`: what is flushed, captured, replayed.

The stand-in records every call in one log and reports a fixed 2 ms between the events, so
the tests check the order of operations and the per-launch arithmetic, not the GPU.
"""

from __future__ import annotations

from types import SimpleNamespace

from kopt_supervisor.kernels.harness import timing


class StandInCuda:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.capturing = False
        cuda = self

        class Event:
            def __init__(self, enable_timing: bool) -> None:
                self.name = "event"

            def record(self) -> None:
                cuda.log.append("record")

            def synchronize(self) -> None:
                cuda.log.append("sync")

            def elapsed_time(self, other: object) -> float:
                return 2.0  # ms

        class CUDAGraph:
            def __init__(self) -> None:
                self.calls = 0

            def replay(self) -> None:
                cuda.log.append(f"replay x{self.calls}")

        class Generator:
            """A CUDA generator as torch keeps it: a shared state marked while a capture runs."""

            def __init__(self) -> None:
                self.state = {"capturing": False}

            def clone_state(self) -> Generator:
                copy = Generator()
                copy.state = {"capturing": False}  # torch's clone: a fresh state, not capturing
                return copy

            def graphsafe_set_state(self, other: Generator) -> None:
                self.state = other.state

            def draw(self) -> None:
                if self.state["capturing"] and not cuda.capturing:
                    raise RuntimeError("Offset increment outside graph capture encountered unexpectedly.")

        class Capture:
            """torch.cuda.graph: the capture stream and the generators' mark on enter; on exit
            capture_end, which raises when the capture was invalidated, and only then the
            stream restored and the mark lifted (as torch does)."""

            def __init__(self, graph: CUDAGraph, pool: object = None, stream: str | None = None) -> None:
                self.graph, self.on = graph, stream
                cuda.pools.append(pool)
                if stream == "default":
                    raise RuntimeError("cannot capture on the legacy default stream")

            def __enter__(self) -> None:
                cuda.capturing, cuda.graph_now, cuda.invalidated = True, self.graph, False
                self.prev, cuda.stream = cuda.stream, self.on or "capture"
                for gen in cuda.default_generators:
                    gen.state["capturing"] = True

            def __exit__(self, *exc: object) -> None:
                cuda.capturing = False
                if cuda.invalidated:
                    raise RuntimeError("operation failed due to a previous error during capture")
                cuda.stream = self.prev
                for gen in cuda.default_generators:
                    gen.state["capturing"] = False

        self.Event, self.CUDAGraph, self.graph = Event, CUDAGraph, Capture
        self.stream, self.invalidated = "default", False
        self.default_generators = (Generator(),)
        self.pools: list[object] = []  # each capture's pool argument

    def graph_pool_handle(self) -> tuple[str, int]:
        self.handles = getattr(self, "handles", 0) + 1
        return ("pool", self.handles)

    def get_device_properties(self, device: int) -> SimpleNamespace:
        return SimpleNamespace(L2_cache_size=1 << 20)

    def synchronize(self) -> None:
        self.log.append("sync")

    def _sleep(self, cycles: int) -> None:
        self.log.append("spin")

    def current_stream(self) -> str:
        return self.stream

    def set_stream(self, stream: str) -> None:
        self.stream = stream

    def default_stream(self) -> str:
        return "default"

    def Stream(self) -> str:  # noqa: N802 (torch's name)
        self.streams = getattr(self, "streams", 0) + 1
        return f"side{self.streams}"


def make():
    cuda = StandInCuda()
    torch = SimpleNamespace(cuda=cuda)

    def fn() -> None:
        if cuda.capturing:
            cuda.graph_now.calls += 1
        else:
            cuda.log.append("launch")

    return torch, cuda, fn, lambda: cuda.log.append("flush")


def test_the_event_timer_flushes_then_times_reps_eager_launches():
    torch, cuda, fn, flush = make()
    t = timing.EventTimer(torch, fn, reps=4, flush=flush, warm_blocks=1)
    cuda.log.clear()
    assert t.block() == 2.0 * 1000.0 / 4  # µs per launch
    assert cuda.log == ["flush", "record", "launch", "launch", "launch", "launch", "record", "sync"]


def test_the_graph_timer_captures_reps_launches_once_and_replays_them_per_block():
    torch, cuda, fn, flush = make()
    before = len(timing.LIVE_GRAPHS)
    t = timing.GraphTimer(torch, fn, reps=5, flush=flush, warm_blocks=2)
    assert t.graph.calls == 5  # captured once, 5 launches
    assert cuda.log[:2] == ["launch", "sync"]  # one eager warm-up launch before the capture
    assert cuda.log.count("replay x5") == 2  # the warm blocks
    cuda.log.clear()
    assert t.block() == 2.0 * 1000.0 / 5
    assert cuda.log == ["flush", "record", "replay x5", "record", "sync"]
    assert timing.LIVE_GRAPHS[before] is t.graph  # the graph is kept until the process ends, not its buffers


def test_the_last_blocks_graph_calls_each_set_once_and_none_before_its_block():
    # a kernel that skips the work once its output holds a result must find none at any launch
    # of the audited block: no warm-up call, no warm block, one launch per set, one replay
    torch, cuda, fn, flush = make()
    before = len(timing.LIVE_GRAPHS)
    t = timing.ColdGraphTimer(torch, [fn, fn, fn], flush)
    assert t.graph.calls == 3 and t.reps == 3 and "launch" not in cuda.log  # captured, never run
    cuda.log.clear()
    assert t.block() == 2.0 * 1000.0 / 3
    assert cuda.log == ["flush", "record", "replay x3", "record", "sync"]
    assert timing.LIVE_GRAPHS[before] is t.graph


def test_a_one_tree_block_moves_a_fixed_amount_whatever_the_kernels_speed():
    # known bytes: the same count for a fast and a slow kernel (and a noisy calibration), a multiple of the sets
    mb = 1 << 20
    fast, slow = (timing.block_launches(56 * mb, us, 300.0, 1000, 2) for us in (20.0, 50.0))
    assert fast == slow == 20 and fast * 56 * mb >= timing.BLOCK_BYTES
    # a microsecond kernel: capped at MAX_BYTE_LAUNCHES, then a multiple of its sets, whether its
    # eager estimate is its own 1.6 µs or the 60 µs of its wrapper on the host
    assert (
        timing.block_launches(512, 1.6, 300.0, 1000, 256) == timing.block_launches(512, 60.0, 300.0, 1000, 256) == 256
    )
    assert (
        timing.block_launches(1 * mb, 3.4, 300.0, 1000, 94)
        == timing.block_launches(1 * mb, 300.0, 300.0, 1000, 94)
        == 282
    )
    assert timing.block_launches(2 << 30, 600.0, 300.0, 1000, 1) == 1  # one call moves more than a block
    # a compute-bound kernel (a block of BLOCK_BYTES would last past LONG_BLOCK_US): by its time
    assert timing.block_launches(1 * mb, 5000.0, 300.0, 1000, 3) == 3
    # no bytes known: by its time, as reps_for
    assert timing.block_launches(0, 20.0, 300.0, 1000, 1) == timing.reps_for(20.0, 300.0, 1000) == 15


def test_the_cpu_timer_counts_the_processs_cpu_time_not_the_wall_clock():
    # what other processes (or a sleep) take of the wall clock is not the call's: the CPU
    # timer's looks of best and the candidate run in two processes at different moments
    import time

    asleep = timing.CpuTimer(lambda: time.sleep(0.05), reps=2, warm_blocks=0)
    assert asleep.block() < 10_000.0  # µs per call: the 50 ms asleep do not count

    def busy() -> None:
        end = time.process_time() + 0.02
        while time.process_time() < end:
            pass

    assert timing.CpuTimer(busy, reps=2, warm_blocks=0).block() >= 20_000.0


def test_a_failed_capture_leaves_the_thread_on_its_stream_and_random_draws_working():
    """What autograd's backward does under a capture (launches on the forward's stream) makes
    torch's capture_end raise before it restores the stream and lifts the generators' mark:
    every later draw failed on the H200 (Triton's layer-norm tutorial, backward). The timer's
    capture puts both back, so the caller's eager fallback runs."""
    torch, cuda, fn, flush = make()

    def backward_like() -> None:
        if cuda.capturing:
            cuda.invalidated = True  # a launch on another stream: the capture is invalidated
        else:
            cuda.log.append("launch")

    try:
        timing.GraphTimer(torch, backward_like, reps=3, flush=flush)
    except RuntimeError as exc:
        assert "previous error during capture" in str(exc)
    else:
        raise AssertionError("the invalidated capture must raise for the eager fallback")
    assert cuda.stream == "default"
    cuda.default_generators[0].draw()  # no "Offset increment outside graph capture"
    t = timing.EventTimer(torch, backward_like, reps=3, flush=flush, warm_blocks=0)
    assert t.block() == 2.0 * 1000.0 / 3
    # torch's own context manager alone leaves both broken: what the stand-in models
    with_torch_alone = StandInCuda()
    try:
        with with_torch_alone.graph(with_torch_alone.CUDAGraph()):
            with_torch_alone.invalidated = True
    except RuntimeError:
        pass
    assert with_torch_alone.stream == "capture"
    try:
        with_torch_alone.default_generators[0].draw()
    except RuntimeError as exc:
        assert "Offset increment outside graph capture" in str(exc)
    else:
        raise AssertionError("the stand-in must model torch's broken state")
    # a capture that succeeds changes neither
    torch, cuda, fn, flush = make()
    gen_state = cuda.default_generators[0].state
    timing.GraphTimer(torch, fn, reps=2, flush=flush, warm_blocks=0)
    assert cuda.stream == "default" and cuda.default_generators[0].state is gen_state


def backward_of_a_forward_run_now(cuda: StandInCuda):
    """A stand-in for `y.backward(dy)` where `y = f(x)` ran in the benchmark's setup: autograd
    launches the backward on the stream the forward ran on; under a capture on another stream
    that launch invalidates the capture (torch: cudaErrorStreamCaptureInvalidated)."""
    forward_stream = cuda.stream

    def backward() -> None:
        if cuda.capturing:
            if cuda.stream != forward_stream:
                cuda.invalidated = True
            else:
                cuda.graph_now.calls += 1
        else:
            cuda.log.append("launch")

    return backward


def test_a_backward_whose_forward_ran_on_the_default_stream_cannot_be_captured():
    torch, cuda, _, flush = make()
    backward = backward_of_a_forward_run_now(cuda)
    try:
        timing.GraphTimer(torch, backward, reps=4, flush=flush)
        raise AssertionError("captured")
    except RuntimeError as e:
        assert "previous error during capture" in str(e)
    assert cuda.stream == "default"  # and the thread is fit for the eager fallback


def test_on_the_harness_side_stream_a_backward_is_captured_on_its_forwards_stream():
    torch, cuda, _, flush = make()
    timing.use_side_stream(torch)  # what setup_device does on a GPU, before the bench's code
    assert cuda.stream == "side1" and timing.capture_stream(torch) == "side1"
    backward = backward_of_a_forward_run_now(cuda)
    t = timing.GraphTimer(torch, backward, reps=4, flush=flush)
    assert t.graph.calls == 4 and not cuda.invalidated  # every launch in the graph
    cuda.log.clear()
    t.block()
    assert cuda.log == ["flush", "record", "replay x4", "record", "sync"]
    assert cuda.stream == "side1"  # the capture gave the thread its stream back


def test_an_imported_benchs_captures_share_one_pool_and_a_specs_keep_their_own():
    """An imported bench makes new graphs every look and keeps each alive (LIVE_GRAPHS): with a
    pool of its own each, the layer-norm tutorial's served processes left for memory every 7
    looks on the H200. Its captures share one pool, so what an old graph freed is used again;
    a bundled spec's timers are replayed look after look (Bench.held), so theirs stay apart."""
    from kopt_supervisor.kernels.harness.bench import Timing

    torch, cuda, fn, flush = make()
    torch.int32 = "int32"
    torch.empty = lambda *a, **k: SimpleNamespace(zero_=lambda: cuda.log.append("flush"))
    spec = Timing(torch, True, 300.0, 1000)
    spec.sets_timer([fn, fn], 1 << 20)
    spec.last_timer([fn, fn], graphed=True)
    assert cuda.pools == [None, None]  # each graph its own pool
    imported = Timing(torch, True, 300.0, 1000)
    imported.share_pool()
    for _look in range(2):
        imported.sets_timer([fn, fn], 1 << 20)
        imported.last_timer([fn, fn], graphed=True)
    assert cuda.pools[2:] == [("pool", 1)] * 4  # one pool for every look's captures
    cpu = Timing(torch, False, 300.0, 50)
    cpu.share_pool()  # no CUDA on the interpreter: nothing asked of it
    assert cpu.pool is None and getattr(cuda, "handles", 0) == 1


def test_a_profiled_backward_is_replayed_in_its_range_by_the_harness_thread():
    """NVTX push/pop ranges are per thread and autograd launches a backward from a device thread
    of its own: under --profile the layer-norm tutorial's backward called eagerly in its range
    launched nothing ncu put in the range (H200, 2026-11-30). ImportedBench.profile_graph
    captures the call outside the range, and the harness thread replays it inside."""
    from pathlib import Path

    from kopt_supervisor.kernels.harness.imported import ImportedBench

    torch, cuda, _, flush = make()
    timing.use_side_stream(torch)
    ranges: dict[str, list[str]] = {"harness": [], "autograd": []}  # each thread's NVTX stack
    launches: list[tuple[str, str | None]] = []
    backward = backward_of_a_forward_run_now(cuda)

    def call() -> None:  # y.backward(dy): the launch is autograd's thread's
        backward()
        if not cuda.capturing:
            launches.append(("backward", (ranges["autograd"] or [None])[-1]))

    b = ImportedBench.__new__(ImportedBench)
    b.torch, b.gpu, b.script, b.timing = torch, True, Path("05-layer-norm.py"), SimpleNamespace(pool=("pool", 7))
    ranges["harness"].append("kopt:N=4096")
    call()  # as before: eager in the range
    ranges["harness"].pop()
    assert launches == [("backward", None)]  # outside every kopt range

    graph = b.profile_graph(call, "N=4096")
    assert graph is not None and graph.calls == 1 and len(launches) == 1  # captured, not run
    assert cuda.pools[-1] == ("pool", 7) and cuda.stream == "side1"
    ranges["harness"].append("kopt:N=4096")
    cuda.log.clear()
    graph.replay()  # the harness thread's launch, inside its range
    assert cuda.log == ["replay x1"] and ranges["harness"] == ["kopt:N=4096"]

    def never() -> None:  # refused (a host sync, a first call's tuning): eager in the range, as before
        if cuda.capturing:
            cuda.invalidated = True

    assert b.profile_graph(never, "N=16384") is None and cuda.stream == "side1"


def test_a_refused_capture_gets_no_call_outside_the_range():
    """Hostile review (2026-11-30) of ImportedBench.profile_graph's first fallback (an eager warm
    call on a spare set, then a second capture): the refused capture is itself a call on the
    profiled set, so the tree kept its inputs, computed their result in the warm call outside the
    range, and the second capture copied it. Now one capture; refused, the call runs in the range."""
    from pathlib import Path

    from kopt_supervisor.kernels.harness.imported import ImportedBench

    torch, cuda, _, _ = make()
    timing.use_side_stream(torch)
    in_range: list[bool] = [False]
    work: list[tuple[str, bool]] = []  # (whose inputs, inside the range)
    seen: dict[str, str] = {}  # the candidate's module state: inputs it saw, results it holds

    def candidate(inputs: str) -> None:
        if cuda.capturing and "stash" not in seen:
            seen["stash"] = inputs  # a reference to the profiled set's tensors
            cuda.invalidated = True  # refused: a host sync, say
        elif cuda.capturing:
            cuda.graph_now.calls += 1  # captures a copy of seen[inputs] into the output
        else:
            work.append((inputs, in_range[0]))
            if "stash" in seen:  # the warm call: the profiled set's result too, outside the range
                work.append((seen["stash"], in_range[0]))

    b = ImportedBench.__new__(ImportedBench)
    b.torch, b.gpu, b.script, b.timing = torch, True, Path("05-layer-norm.py"), SimpleNamespace(pool=None)
    graph = b.profile_graph(lambda: candidate("profiled"), "N=4096")
    assert graph is None  # one capture, refused: no second one, no call outside the range
    in_range[0] = True
    candidate("profiled")  # profile_rows: the refused call runs eagerly, inside its range
    assert work and all(inside for _, inside in work), "a call of the tree ran outside the range"


def test_only_a_graphs_block_spins_after_the_flush_and_the_spin_is_bound_once():
    """L2Flush zeroes; its spin() keeps the GPU busy SPIN_US (torch.cuda._sleep, looked up at
    construction: a later patch of torch.cuda._sleep is never called) and is given to the graph
    timers alone, between the flush and the start event. An eager block and the calibration
    (one_call_us, which calls the flush alone) never spin: their launches' host time is what
    they measure. --spin-us
    defaults to SPIN_US; 0, or a torch without _sleep, means no spin and never an error."""
    from kopt_supervisor.kernels.harness import bench

    log: list[str] = []

    class Buffer:
        def zero_(self) -> None:
            log.append("zero")

    cuda = SimpleNamespace(
        get_device_properties=lambda device: SimpleNamespace(L2_cache_size=60 << 20),
        _sleep=lambda cycles: log.append(f"sleep {cycles}"),
    )
    torch = SimpleNamespace(cuda=cuda, int32="i32", empty=lambda n, dtype, device: Buffer())
    flush = timing.L2Flush(torch)
    cuda._sleep = lambda cycles: log.append("patched")  # the candidate's, after the harness's flush was made
    flush()
    flush.spin()
    assert log == ["zero", f"sleep {int(timing.SPIN_US * timing.SPIN_CYCLES_PER_US)}"]
    assert timing.SPIN_US >= 50  # a margin the H200's measurement showed enough (part22)
    log.clear()
    timing.L2Flush(torch, spin_us=0.0).spin()
    del cuda._sleep
    timing.L2Flush(torch).spin()
    assert log == []
    assert bench.parse_args([], True).spin_us == timing.SPIN_US
    assert bench.parse_args(["--spin-us", "0"], True).spin_us == 0.0

    # the block's order: flush, spin, start event, the replay, end event
    torch2, cuda2, fn, flush2 = make()
    t = timing.GraphTimer(torch2, fn, reps=5, flush=flush2, warm_blocks=0, spin=lambda: cuda2.log.append("spin"))
    cuda2.log.clear()
    t.block()
    assert cuda2.log == ["flush", "spin", "record", "replay x5", "record", "sync"]

    # Timing hands the spin to graph timers only; the eager fallback and the calibration get none
    made: dict[str, object] = {}
    timing_ = bench.Timing.__new__(bench.Timing)
    timing_.torch, timing_.pool = torch2, None
    timing_.flush = SimpleNamespace(spin="the flush's spin")  # type: ignore[assignment]
    real_graph, real_event = bench.GraphTimer, bench.EventTimer
    try:
        bench.GraphTimer = lambda *a, **kw: made.setdefault("graph", kw.get("spin"))  # type: ignore[assignment,misc]
        bench.EventTimer = lambda *a, **kw: made.setdefault("eager", kw.get("spin", "none"))  # type: ignore[assignment,misc]
        timing_._block_timer(fn, 3, timing_.flush, True, None)  # type: ignore[arg-type]
        timing_._block_timer(fn, 3, timing_.flush, False, None)  # type: ignore[arg-type]
    finally:
        bench.GraphTimer, bench.EventTimer = real_graph, real_event  # type: ignore[misc]
    assert made == {"graph": "the flush's spin", "eager": "none"}
    # (the calibration calls the flush itself, which only zeroes: above)
