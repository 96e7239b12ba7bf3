"""Rules about how a point was measured, where the procedure itself is inside the figures."""

from __future__ import annotations

from hpcbench.explain.context import Context
from hpcbench.findings import Finding
from hpcbench.vocab import INFO


def timeline(ctx: Context) -> list[Finding]:
    """A Horovod timeline recorded while the steps were timed: rank 0 writes an event for every tensor operation
    of every rank (negotiation and processing phases) and flushes it to disk as the job runs, all inside the
    step times the point reports."""
    rec = ctx.record
    if rec is None or not rec.timeline or ctx.point.framework != "horovod":
        return []
    return [Finding(INFO, "timeline", f"the Horovod timeline was recorded during the timed steps ({rec.timeline}): "
                    "rank 0 writing every operation's events is part of each step time",
                    f"set {ctx.key('timeline')} = false for the figures, and record the timeline in a point of its own",
                    "result.json timeline", subject=ctx.name)]


RULES = (timeline,)
ORDER = 40  # after the figures: how it was measured, the least of what limits a point
