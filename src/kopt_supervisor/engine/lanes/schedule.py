"""Several lanes at once: each lane runs its iterations from a thread of its own; this loop
starts them, watches them end, and keeps the run's rules (docs/lanes.md).

- A lane starts an iteration only while no stop condition holds, counting the iterations
  in flight ([stop].max_iters and --max-iters are never overshot).
- A stop or a masked restart from the engineer ends every lane's running step (each lane's
  pump raises it: control.py's INTERRUPTS); the restart is applied once no lane runs.
- A pause holds the loop here and preempts each lane's timed step (it is taken again).
- A lane that finds no idle GPU within [gpu].wait_max_s waits for its next turn; the run
  stops for want of GPUs only when no lane could get one.
- The counters follow the order iterations ended (engine.bookkeeping): when the regression
  limit is reached no lane starts another iteration; the ones in flight finish and count,
  and the run stops if the limit still holds then.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from kopt_supervisor.engine.gpu.gate import NoIdleGpu
from kopt_supervisor.engine.loop.control import Request

if TYPE_CHECKING:
    from kopt_supervisor.engine.loop.machine import Engine, LaneLoop


def run_lanes(engine: Engine) -> str:
    """Run the engine's lanes until a stop condition; returns the stop reason."""
    loops = engine.loops
    idle: list[LaneLoop] = list(loops)
    running: dict[Future[None], LaneLoop] = {}
    no_gpu: dict[int, str] = {}
    with ThreadPoolExecutor(max_workers=len(loops), thread_name_prefix="kopt-lane") as pool:
        try:
            while True:
                request = engine.control.checkpoint()
                if request is not None:
                    _finish(running, idle, no_gpu)  # their own pumps end their steps
                    if request.request == Request.STOP:
                        return request.reason
                    engine.recovery.restart(request, engine.lanes)
                    continue
                for loop in sorted(idle, key=lambda x: x.lane.index):
                    if engine.stop_reason(in_flight=len(running)):
                        break
                    idle.remove(loop)
                    engine.session_iters += 1  # counted as it starts: --max-iters is never overshot
                    running[pool.submit(loop.iteration)] = loop
                if not running:
                    stop = engine.stop_reason()
                    if stop:
                        return stop
                    if len(no_gpu) == len(loops):
                        return f"no idle GPU: {'; '.join(f'lane {i}: {why}' for i, why in sorted(no_gpu.items()))}"
                done, _ = wait(list(running), timeout=engine.ctx.poll_interval_s, return_when=FIRST_COMPLETED)
                engine.session_iters -= _collect(done, running, idle, no_gpu)
        finally:
            if running:  # an error in this loop: the lanes must not run on without it
                engine.control.request_stop("the lanes' scheduler stopped")
                _finish(running, idle, no_gpu)


def _collect(done: set[Future[None]], running: dict[Future[None], LaneLoop], idle: list[LaneLoop],
             no_gpu: dict[int, str]) -> int:
    """Lanes whose iteration ended go back to idle; returns how many never started one (no
    GPU for them: they did not count)."""
    unstarted = 0
    for fut in done:
        loop = running.pop(fut)
        idle.append(loop)
        try:
            fut.result()
            no_gpu.pop(loop.lane.index, None)
        except NoIdleGpu as e:  # this lane waited its fill: it tries again at its next turn
            no_gpu[loop.lane.index] = str(e)
            unstarted += 1
    return unstarted


def _finish(running: dict[Future[None], LaneLoop], idle: list[LaneLoop], no_gpu: dict[int, str]) -> None:
    """Wait for every lane in flight to end its iteration (re-raising what is not theirs to
    swallow: a forged history, a crash)."""
    done, _ = wait(list(running))
    _collect(done, running, idle, no_gpu)
