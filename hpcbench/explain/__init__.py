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

from hpcbench.explain import bounds, causes, rules
from hpcbench.explain.context import Context
from hpcbench.explain.inputs import Subject
from hpcbench.explain.links import Peak
from hpcbench.findings import Finding, ranked
from hpcbench.vocab import ERROR, INFO, OUT_OF_MEMORY, TIMEOUT, UNSUPPORTED, WARNING


@dataclass
class PointWhy:
    point: Subject
    # root causes by estimated effect, each followed by the symptoms credited to it (Finding.because; causes.py)
    findings: list[Finding] = field(default_factory=list)
    peak: Peak | None = None  # communication points: the slowest link's peak
    peak_why: str = ""  # ... or why it is not known

    @property
    def label(self) -> str:
        return self.point.label

    def top(self, n: int | None = None) -> list[Finding]:
        """The causes worth reading first, by estimated effect: the costly and the severe, not the informational,
        nor a symptom credited to one of them."""
        return [f for f in self.findings if f.because is None and (f.severity != INFO or f.cost)][:n]

    def under(self, cause: Finding) -> list[Finding]:
        """The symptoms credited to ``cause``."""
        return [f for f in self.findings if f.because == cause.rule and cause.because is None and f is not cause]

    def effect(self, cause: Finding) -> float | None:
        """A root cause's estimated share of the step: its own cost or the largest of what it explains."""
        return causes.effect(cause, self.findings)


def _unmeasured(p: Subject, ctx: Context) -> PointWhy | None:
    """A point with nothing measured to explain: what its logs show, or why it has no result."""
    if not p.measures:  # a log of NCCL lines only: evidence about transports, nothing else
        return PointWhy(p, ranked(rules.run(ctx, logs_alone=True)))
    if p.state == UNSUPPORTED:  # the ranks recorded that their library has no such collective
        return PointWhy(p, [Finding(INFO, "unsupported", p.reason, "measure this collective with a library that "
                                    f"has it: {ctx.key('backend')} (torch.distributed has every one of nccl-tests')",
                                    subject=p.label)])
    if not p.ok:
        fix = _no_result_fix(p, ctx)
        said = f"{p.state}: {p.reason or 'no reason recorded'}"
        if p.point_id is None:  # someone else's log without a result: an excerpt as likely as a failed job; its
            # lines say which (a failure line is rule 'crash''s error), and what else they show
            found = rules.run(ctx, logs_alone=True)
            if not {"unfinished", "no-rows", "crash"} & {f.rule for f in found}:  # those say it, with what the log holds
                found.append(Finding(WARNING, "no-result", said, fix, subject=p.label))
            return PointWhy(p, ranked(found))
        return PointWhy(p, [Finding(ERROR, "no-result", said, fix, subject=p.label)])
    return None


def _no_result_fix(p: Subject, ctx: Context) -> str:
    """What to change for a point without a result: its time or memory where Slurm ended it for those."""
    if p.state == TIMEOUT:
        return f"give it more time: {ctx.key('time')}"
    if p.state == OUT_OF_MEMORY:
        return f"give it more memory: {ctx.key('mem')}, or a smaller {ctx.key('batch_size')}"
    if p.point_id:
        return ("see the job's logs in the point folder (hpcbench status RUN names them); where the cluster failed "
                f"it (a node, a lost peer), {ctx.key('max_retries')} = 1 resubmits it")
    return f"read the end of {p.source}: the job may have stopped before its first measurement"


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
        found = bounds.with_model(ctx, fitted, found)
        why = PointWhy(p, causes.credit(found, rules.explains(), rules.caveats()))
        if p.kind != "train":
            why.peak, why.peak_why = bounds.peak(ctx)
        out.append(why)
    return out


def explain_paths(paths: Sequence[str | Path], baseline: str = "auto", cluster: str | None = None,
                  allreduce_file: str | Path | None = None) -> list[PointWhy]:
    from hpcbench.explain.inputs import subjects
    from hpcbench.figures.study import study

    return explain(subjects(study(list(paths), cluster, baseline).aggs), allreduce_file)
