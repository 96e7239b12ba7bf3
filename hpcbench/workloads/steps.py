"""The timed training step and what is measured around it: the step itself, its wait for the batch, the
injected faults and stragglers, and the per-step and per-rank figures drawn from every rank's times.

A synchronous data-parallel step is as slow as its slowest rank, so the slowest rank's steps are kept (the rank
with the longest total: see slowest). Each rank's own mean is kept too: in the timed steps every rank waits for the slowest at the gradient
exchange, so the ranks' own step means come out nearly equal; in the compute-only steps (no exchange) a
slow rank stands out by its own mean.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

from hpcbench.errors import InjectedFault
from hpcbench.stats import mean_ci95


def train_step(model: Any, opt: Any, data: Any, info: Any, loss_fn: Any,
               waits: list[float] | None = None) -> Callable[[], None]:
    """One training step as a closure: the step every point times (benchmarks/harness_overhead.py too).

    ``waits`` gets, per step, the host time spent in ``next(data)``: what the step waited for its batch
    (reading and decoding on the rank's own thread, and issuing the copy to the device).
    """
    keep = waits.append if waits is not None else (lambda _: None)
    clock = time.perf_counter

    def step() -> None:
        t0 = clock()
        x, y = next(data)
        keep(clock() - t0)
        opt.zero_grad()  # set_to_none is the default; Horovod's optimizer takes no argument
        out = model(x)
        if info.tokens:  # a prediction per position: (batch*seq, vocab) against (batch*seq,)
            out, y = out.reshape(-1, info.num_classes), y.reshape(-1)
        loss_fn(out, y).backward()
        opt.step()
    return step


def timed_steps(n_warmup: int, n: int, step: Callable[[], None], sync: Callable[[], Any], around: Any = None,
                waits: list[float] | None = None) -> list[float]:
    """Run warm-up then ``n`` timed steps; ``around`` (GPU monitor, node load) covers only the timed ones,
    and ``waits`` keeps only theirs."""
    for _ in range(n_warmup):
        step()
    sync()
    if waits is not None:
        waits.clear()
    times = []
    with around if around is not None else contextlib.nullcontext():
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - t0)
    return times


def with_fault(cfg: Any, rank: int, step: Callable[[], None]) -> Callable[[], None]:
    """``step``, raising InjectedFault at step ``cfg.fail_step`` (1-based, warm-up included) on ``cfg.fail_rank``."""
    if rank != cfg.fail_rank:
        return step
    count = 0

    def faulty() -> None:
        nonlocal count
        count += 1
        if count == cfg.fail_step:
            raise InjectedFault(f"injected failure of rank {rank} at step {count}")
        step()
    return faulty


def with_delay(cfg: Any, rank: int, step: Callable[[], None]) -> Callable[[], None]:
    """``step``, preceded by a sleep of ``cfg.slow_ms`` on rank ``cfg.slow_rank``: a straggler on demand.

    The sleep comes first, as a slow rank's compute would: the rank reaches the gradient exchange late
    and the others wait there for it. A rank beyond the world size never exists, so nothing sleeps.
    """
    if rank != cfg.slow_rank or cfg.slow_ms <= 0:
        return step
    delay = cfg.slow_ms / 1000

    def slow() -> None:
        time.sleep(delay)
        step()
    return slow


def slowest(per_rank: list[list[float]]) -> list[float]:
    """The steps of the slowest rank, the one with the longest total (``per_rank[r][i]``: rank r's step i). Not each
    step's maximum over ranks: the ranks of a synchronous step leave the exchange together, and each rank's step
    also holds its own jitter after it (optimizer, next batch), so a maximum per step adds the largest jitter to
    every step. Their mean overstated the period (total time / steps) by 7% at 2 ranks and 20% at 4 ranks on
    the minicluster's shared CPUs."""
    return max(per_rank, key=math.fsum, default=[])


def rank_means(per_rank: list[list[float]]) -> list[float | None]:
    """Each rank's own mean, indexed by rank (None for a rank with no steps)."""
    return [sum(times) / len(times) if times else None for times in per_rank]


def rank_ci95s(per_rank: list[list[float]]) -> list[float | None]:
    """Each rank's own mean's 95% CI half-width, indexed by rank (None for fewer than two steps): the straggler
    rule weighs a rank's gap against it."""
    return [mean_ci95(times)[1] if times else None for times in per_rank]
