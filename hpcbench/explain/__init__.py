"""Why each point scales as it does: ranked findings (claim, evidence, size of the effect, fix) from the
transports NCCL used, where the ranks ran, how noisy the figures are, the peak of the link the traffic
crosses and an alpha-beta scaling model checked against the runs.

``explain(points)`` takes the report's aggregated points (duck-typed, see context.py) and returns a
PointWhy per point. The rules never guess: missing evidence gives a finding that says what to collect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.explain import bounds, rules_host, rules_net, rules_stats
from hpcbench.explain.context import Context
from hpcbench.explain.links import Peak
from hpcbench.findings import Finding, ranked
from hpcbench.vocab import ERROR, INFO, UNSUPPORTED

RULES = (*rules_net.RULES, *rules_host.RULES, *rules_stats.RULES)


@dataclass
class PointWhy:
    point: Any
    findings: list[Finding] = field(default_factory=list)  # most costly first
    peak: Peak | None = None  # communication points: the slowest link's peak
    peak_why: str = ""  # ... or why it is not known

    @property
    def label(self) -> str:
        return str(self.point.label)

    def top(self, n: int = 5) -> list[Finding]:
        """The findings worth reading first: the costly and the severe, not the informational."""
        return [f for f in self.findings if f.severity != "info" or f.cost][:n]


def explain(points: list[Any], allreduce_file: str | Path | None = None) -> list[PointWhy]:
    fitted = bounds.fits(points, allreduce_file)
    out: list[PointWhy] = []
    shared: dict[str, Any] = {}
    for p in points:
        ctx = Context.of(p, points, shared)
        if not p.measures:  # a log of NCCL lines only: evidence about transports, nothing else
            out.append(PointWhy(p, ranked([f for rule in rules_net.RULES for f in rule(ctx)])))
            continue
        if p.state == UNSUPPORTED:  # the ranks recorded that their library has no such collective
            out.append(PointWhy(p, [Finding(INFO, "unsupported", p.reason, "measure this collective with a library "
                                            "that has it (torch.distributed has every one of nccl-tests')",
                                            subject=p.label)]))
            continue
        if not p.ok:
            fix = ("see the job's logs in the point folder (hpcbench status RUN names them)" if p.point_id
                   else f"read the end of {p.source}: the job may have stopped before its first measurement")
            out.append(PointWhy(p, [Finding(ERROR, "no-result", f"{p.state}: {p.reason or 'no reason recorded'}",
                                            fix, subject=p.label)]))
            continue
        found = [f for rule in RULES for f in rule(ctx)]
        found += bounds.model_findings(ctx, fitted, found)
        why = PointWhy(p, ranked(found))
        if p.kind != "train":
            why.peak, why.peak_why = bounds.peak(ctx)
        out.append(why)
    return out
