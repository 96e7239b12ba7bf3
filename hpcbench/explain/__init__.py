"""Why each point scales as it does: ranked findings (claim, evidence, size of the effect, fix) from the
transports NCCL used, where the ranks ran, how noisy the figures are, the peak of the link the traffic
crosses and an alpha-beta scaling model checked against the runs.

``explain_paths(paths)`` is `hpcbench explain`: the figures of runs and logs (hpcbench.figures.study, as the
report starts from them), explained. ``explain(subjects)`` takes the points as explain reads them (inputs.Subject: the figures, the record and
provenance, what parse found with file and line) and returns a PointWhy per point, in their order. The rules
(rules/, one module per group) never guess: missing evidence gives a finding that says what to collect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.explain import bounds, rules
from hpcbench.explain.context import Context
from hpcbench.explain.inputs import Subject
from hpcbench.explain.links import Peak
from hpcbench.findings import Finding, ranked
from hpcbench.vocab import ERROR, INFO, UNSUPPORTED


@dataclass
class PointWhy:
    point: Subject
    findings: list[Finding] = field(default_factory=list)  # most costly first
    peak: Peak | None = None  # communication points: the slowest link's peak
    peak_why: str = ""  # ... or why it is not known

    @property
    def label(self) -> str:
        return self.point.label

    def top(self, n: int = 5) -> list[Finding]:
        """The findings worth reading first: the costly and the severe, not the informational."""
        return [f for f in self.findings if f.severity != "info" or f.cost][:n]


def _unmeasured(p: Subject, ctx: Context) -> PointWhy | None:
    """A point with nothing measured to explain: what its logs show, or why it has no result."""
    if not p.measures:  # a log of NCCL lines only: evidence about transports, nothing else
        return PointWhy(p, ranked(rules.run(ctx, logs_alone=True)))
    if p.state == UNSUPPORTED:  # the ranks recorded that their library has no such collective
        return PointWhy(p, [Finding(INFO, "unsupported", p.reason, "measure this collective with a library that "
                                    "has it (torch.distributed has every one of nccl-tests')", subject=p.label)])
    if not p.ok:
        fix = ("see the job's logs in the point folder (hpcbench status RUN names them)" if p.point_id
               else f"read the end of {p.source}: the job may have stopped before its first measurement")
        return PointWhy(p, [Finding(ERROR, "no-result", f"{p.state}: {p.reason or 'no reason recorded'}", fix,
                                    subject=p.label)])
    return None


def explain(subjects: Sequence[Subject], allreduce_file: str | Path | None = None) -> list[PointWhy]:
    fitted = bounds.fits(subjects, allreduce_file)
    out: list[PointWhy] = []
    shared: dict[str, Any] = {}
    for p in subjects:
        ctx = Context.of(p, subjects, shared)
        unmeasured = _unmeasured(p, ctx)
        if unmeasured is not None:
            out.append(unmeasured)
            continue
        found = rules.run(ctx)
        found += bounds.model_findings(ctx, fitted, found)
        why = PointWhy(p, ranked(found))
        if p.kind != "train":
            why.peak, why.peak_why = bounds.peak(ctx)
        out.append(why)
    return out


def explain_paths(paths: Sequence[str | Path], baseline: str = "auto", cluster: str | None = None,
                  allreduce_file: str | Path | None = None) -> list[PointWhy]:
    from hpcbench.explain.inputs import subjects
    from hpcbench.figures.study import study

    return explain(subjects(study(list(paths), cluster, baseline).aggs), allreduce_file)
