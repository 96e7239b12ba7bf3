"""Rules about what the figures can bear: too few repeats, noisy steps, a speedup within noise of its
baseline, how much of the step is communication, and a communication result that was wrong."""

from __future__ import annotations

import math
import statistics

from hpcbench.explain.context import Context
from hpcbench.findings import Finding
from hpcbench.parse.transport import describe
from hpcbench.vocab import ERROR, INFO, WARNING

MIN_REPEATS = 3
NOISY_CV = 0.10  # coefficient of variation of the step times
COMM_BOUND = 0.25  # share of the step


def repeats(ctx: Context) -> list[Finding]:
    """Fewer than MIN_REPEATS repeats: the interval is over the timed steps of one run, not over runs."""
    p = ctx.point
    if not p.ok or p.point_id is None or p.repeats >= MIN_REPEATS:
        return []
    return [Finding(INFO, "few-repeats", f"{p.repeats} repeat(s): its interval is over the timed steps of "
                    "each run, so run-to-run variation (placement, neighbours, clocks) is not in it",
                    f"set {ctx.key('repeats')} = 3 or more", f"{p.repeats} result record(s)", subject=ctx.name)]


def noisy_steps(ctx: Context) -> list[Finding]:
    """Step times whose coefficient of variation exceeds NOISY_CV: the mean hides a wide spread."""
    times = list(getattr(ctx.record, "step_times_s", None) or [])
    if len(times) < 3:
        return []
    cv = statistics.stdev(times) / statistics.fmean(times)
    if cv < NOISY_CV:
        return []
    return [Finding(WARNING, "noisy-steps", f"its step times vary by {cv:.0%} (coefficient of variation over "
                    f"{len(times)} steps): the mean hides a wide spread",
                    f"more {ctx.key('warmup_steps')}, whole nodes "
                    f"({ctx.key('sbatch_args')} = [\"--exclusive\"]), or look at what else ran there",
                    "result.json step_times_s", subject=ctx.name)]


def within_noise_of_baseline(ctx: Context) -> list[Finding]:
    """A speedup whose throughput interval overlaps its baseline's: not distinguishable from no change."""
    p = ctx.point
    if p.speedup is None or p.speedup_lo is None or p.speedup_hi is None or p.world_size == p.base_world_size:
        return []
    if not p.speedup_lo <= 1.0 <= p.speedup_hi:
        return []
    hi = "∞" if math.isinf(p.speedup_hi) else f"{p.speedup_hi:.2f}"
    return [Finding(WARNING, "within-noise", f"its speedup {p.speedup:.2f} (95% CI {p.speedup_lo:.2f}–{hi}, against "
                    f"{p.baseline}) is not distinguishable from no change", f"more {ctx.key('steps')} or {ctx.key('repeats')}",
                    "the speedup (95% CI) column: the point's and the baseline's samples/s intervals combined",
                    subject=ctx.name)]


def communication(ctx: Context) -> list[Finding]:
    """Communication not hidden behind compute (step - compute-only step) of COMM_BOUND or more of the step; an
    info line when its interval reaches 0."""
    p = ctx.point
    share = p.comm_fraction
    if share is None or share < COMM_BOUND or p.comm_time_s is None or (p.world_size or 1) < 2:
        return []  # one rank exchanges nothing: its step - compute-only step is noise
    if p.comm_within_noise:
        return [Finding(INFO, "comm-share", f"communication shows as {share:.0%} of the step, but its interval "
                        "reaches 0: within noise", f"more {ctx.key('steps')} or {ctx.key('repeats')} to measure the "
                        "split",
                        "comm_time_s and its CI", subject=ctx.name)]
    hi = p.comm_time_s + (p.comm_time_ci95_s or 0.0)
    lo = max(p.comm_time_s - (p.comm_time_ci95_s or 0.0), 0.0)
    span = f" ({lo / p.step_time_s:.0%}–{min(hi / p.step_time_s, 1.0):.0%})" if p.step_time_s else ""
    if p.step_time_s and lo / p.step_time_s < COMM_BOUND:  # claimed only where the interval clears the bound
        return [Finding(INFO, "comm-share", f"communication shows as {share:.0%} of the step{span}, but its interval "
                        f"reaches below {COMM_BOUND:.0%}: not told apart from a step that hides it",
                        f"more {ctx.key('steps')} or {ctx.key('repeats')} to measure the split",
                        "comm_time_s and its CI", subject=ctx.name)]
    said = describe(p.backend, ctx.provenance)  # Gloo's and MPI's transport, from the ranks' provenance
    return [Finding(WARNING, "comm-share", f"communication not hidden behind compute is {share:.0%} of the step"
                    f"{span}" + (f", over {said.text}" if said else ""),
                    f"a faster transport ({ctx.key('backend')}), more work per exchange ({ctx.key('batch_size')}), "
                    "or gradient compression / fusion",
                    "comm_time_s = step - compute-only step (comm_method)" + (f"; {said.evidence}" if said else ""),
                    f"{share:.0%} of the step", ctx.name, share if math.isfinite(share) else None)]


def wrong_results(ctx: Context) -> list[Finding]:
    """A communication point whose ranks did not all hold the exact result: its figures time a broken operation."""
    bad = [(n, mode, r.size_bytes) for r in ctx.point.rows
           for mode, n in (("in place", r.wrong), ("out of place", r.oop_wrong)) if n is not None and n > 0]
    if not bad:
        return []
    where = "; ".join(f"{n:,} {mode} at {size:,} B" for n, mode, size in bad[:4]) + (" …" if len(bad) > 4 else "")
    return [Finding(ERROR, "wrong-results", f"{sum(n for n, _, _ in bad):,} element(s) of the "
                    f"{ctx.point.collective or 'all_reduce'} results differed from the exact ones "
                    f"({where})", "run it again; if it repeats, the library or the transport corrupts data: compare "
                    f"another {ctx.key('backend')} on the same nodes, and report it with the job log",
                    "result.json allreduce[].wrong / oop_wrong; the job log's '# Out of bounds values : N FAILED'",
                    subject=ctx.name)]


RULES = (repeats, noisy_steps, within_noise_of_baseline, communication, wrong_results)
ORDER = 30  # then what the figures can bear
# Findings about what the figures can bear, not about what slows a point: said after its causes, never one of them
CAVEATS = ("few-repeats", "noisy-steps", "within-noise")
