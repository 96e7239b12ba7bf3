"""Repeats of one point -> one row: the means and their 95% intervals, the states and reasons kept.

The intervals are honest about what they cover and never go below zero:
- 3 or more measured repeats: Student's t over the repeats' means (run-to-run variation included);
- 1 or 2: the interval over the timed steps within each run (combined for 2), and the row says so;
  a t interval over 2 runs (t = 12.7) says nothing, and over 1 it does not exist.
The step time's interval is the one computed; throughput's is its inverse, [k/(t+h), k/(t-h)] with
k the samples per step, so it is asymmetric and its upper end is unbounded when t-h <= 0 (a
throughput interval taken by itself could reach below zero). A Horovod log's own "+-" (1.96 sigma of
its iterations' rates) is kept as Horovod printed it, clipped at zero.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpcbench.figures._generated import PointView
from hpcbench.figures.samples import ENV_COLUMN, OTHERS, Sample, axis_values
from hpcbench.plan.fields import BY_NAME, MEASURED, NAMES
from hpcbench.stats import mean_ci95
from hpcbench.vocab import NOT_MEASURED

if TYPE_CHECKING:
    from hpcbench.parse.api import Log

MIN_REPEATS_FOR_RUN_CI = 3
CI_BASES = {"runs": "over the repeats (run-to-run variation included)",
            "steps": "over the timed steps within each run (fewer than 3 repeats: run-to-run variation is not in it)",
            "horovod": "Horovod's own +- (1.96 x std of its iterations' rates), clipped at zero"}


@dataclass(eq=False)  # a point is itself: compared field by field, `in` over 1,000 points took seconds
class Agg(PointView):
    """One point, all its repeats. Its parameters and origin are its first repeat's (PointView)."""

    samples: list[Sample]
    n_ok: int
    step_time_s: float | None
    step_time_ci95_s: float | None
    throughput: float | None
    throughput_lo: float | None  # the 95% interval, never below zero; hi may be math.inf
    throughput_hi: float | None
    ci_basis: str | None  # a key of CI_BASES
    ci_df: float | None  # the degrees of freedom of the step time's interval (for tests between points)
    comm_time_s: float | None
    comm_time_ci95_s: float | None  # comm = step - compute: both CIs combined, or across repeats
    compute_time_s: float | None
    comm_fraction: float | None
    gpu_util_mean: float | None
    gpu_util_min: float | None
    state: str
    reason: str
    hosts: tuple[str, ...] = ()  # the distinct hosts its ranks ran on, over all repeats
    speedup: float | None = None
    speedup_lo: float | None = None  # the 95% intervals of speedup and efficiency, from the point's and the
    speedup_hi: float | None = None  # baseline's (stats.ratio_interval): never below zero, maybe unbounded above
    efficiency: float | None = None
    efficiency_lo: float | None = None
    efficiency_hi: float | None = None
    baseline: str = ""  # which point (or pooled runs) the speedup is relative to
    base_throughput: float | None = None
    base_lo: float | None = None  # the baseline's own 95% interval
    base_hi: float | None = None
    base_world_size: int | None = None
    notes: list[str] = field(default_factory=list)
    apart: str = ""  # the values that tell it from the other points beyond its name: "steps=10, NCCL_ALGO=Ring"

    @property
    def first(self) -> Sample:
        return self.samples[0]

    @property
    def first_measured(self) -> Sample:
        """The repeat whose logs, provenance and record tell how the point ran: the first measured, else the first."""
        return next((s for s in self.samples if s.ok), self.samples[0])

    def logs(self) -> list[Log]:
        """first_measured's logs as hpcbench.parse read them: facts and evidence (read once, kept on the sample)."""
        s = self.first_measured
        if not s.parsed and s.logs:
            from hpcbench.parse.api import read_log

            s.parsed = [read_log(f) for f in s.logs]
        return list(s.parsed)

    @property
    def ok(self) -> bool:
        return self.n_ok > 0

    @property
    def final(self) -> bool:
        return all(s.final for s in self.samples)

    @property
    def measures(self) -> bool:
        """A point of a study; False for a log that holds no measurement (only transport evidence)."""
        return self.state != NOT_MEASURED

    @property
    def servers(self) -> int | None:
        """Distinct hosts when the ranks said where they ran, else the node count asked for."""
        return len(self.hosts) if self.hosts else self.nodes

    @property
    def comm_within_noise(self) -> bool:
        return comm_within_noise(self.comm_time_s, self.comm_time_ci95_s)

    @property
    def name(self) -> str:
        """How the report names the point (samples.Sample.name), with what else tells it apart."""
        return f"{self.samples[0].name} ({self.apart})" if self.apart else self.samples[0].name

    @property
    def one_host_posing(self) -> bool:
        return one_host_posing(self.hosts, self.nodes)


# What a point's figures say, for the report's Agg and explain's Subject alike.
def comm_within_noise(comm: float | None, comm_ci95: float | None) -> bool:
    """The communication time's interval reaches 0: the split says nothing for this point."""
    return comm is not None and comm_ci95 is not None and comm - comm_ci95 <= 0 < comm_ci95


def one_host_posing(hosts: tuple[str, ...], nodes: int | None) -> bool:
    """Asked for several nodes, ran on fewer hosts (several slurmd on one machine, or the local backend)."""
    return bool(hosts) and nodes is not None and len(hosts) < nodes


def mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def point_key(s: Sample) -> tuple[Any, ...]:
    """Samples with equal keys are repeats of one point: every parameter but the repeat (plan/fields.MEASURED), and
    the same env and [slurm] axes, on one cluster. Two points that differ in steps or NCCL_ALGO are never averaged."""
    key = (s.cluster, *(getattr(s, n) for n in MEASURED), s.env, s.slurm, s.world_size)
    # Logs of jobs hpcbench did not launch may come from anywhere: each file is its own point, never a
    # repeat of another file's (a speedup may still compare them, and names the file it compares with).
    return key if s.point_id is not None else (*key, s.source, s.label)


Run = tuple[float, float | None, int | None]  # one run's mean, its own 95% half-width, its timed steps


def _interval(runs: list[Run]) -> tuple[float | None, float | None, str | None, float | None]:
    """(mean, 95% half-width, basis, degrees of freedom) of per-run means, each with its own CI over its steps."""
    values = [v for v, _, _ in runs]
    if not values:
        return None, None, None, None
    if len(values) >= MIN_REPEATS_FOR_RUN_CI:
        m, h = mean_ci95(values)
        return m, h, "runs", len(values) - 1
    m = math.fsum(values) / len(values)
    own = [h for _, h, _ in runs if h is not None]
    if len(own) < len(runs):
        return m, None, None, None
    # the mean of independent run means: the half-widths add in quadrature
    df = sum((n or 2) - 1 for _, _, n in runs)
    return m, math.sqrt(math.fsum(h * h for h in own)) / len(values), "steps", df


def throughput_interval(thr: float | None, step: float | None, h: float | None) -> tuple[float | None, float | None]:
    """Throughput's 95% interval as the inverse of the step time's: never below zero, maybe unbounded above."""
    if thr is None or step is None or h is None or step <= 0:
        return None, None
    k = thr * step  # samples per step
    return k / (step + h), (k / (step - h) if step > h else math.inf)


def _diff_ci(s: Sample) -> float | None:
    """The CI half-width of comm = step - compute, the two means measured independently on the same rank."""
    if s.step_time_ci95_s is None or s.compute_time_ci95_s is None:
        return None
    return math.hypot(s.step_time_ci95_s, s.compute_time_ci95_s)


def _state(samples: list[Sample]) -> str:
    counts = Counter(s.state for s in samples)
    if len(counts) == 1:
        return samples[0].state
    return ", ".join(f"{n} {state}" for state, n in counts.most_common())


def pooled(samples: list[Sample]) -> Agg:
    """The runs of several points taken as repeats of one measurement (the baselines of one unit of work)."""
    return _one(list(samples))


def _one(group: list[Sample]) -> Agg:
    group.sort(key=lambda s: s.repeat)
    ok = [s for s in group if s.ok]
    step, step_h, basis, df = _interval([(s.step_time_s, s.step_time_ci95_s, s.n_steps) for s in ok
                                         if s.step_time_s is not None])
    thr = mean([s.throughput for s in ok if s.throughput is not None])
    lo, hi = throughput_interval(thr, step, step_h)
    foreign = [s.throughput_ci95 for s in ok if s.point_id is None and s.throughput_ci95 is not None]
    if lo is None and thr is not None and len(ok) == 1 and foreign:  # a Horovod log's own spread, in throughput
        lo, hi, basis = max(thr - foreign[0], 0.0), thr + foreign[0], "horovod"
    comm, comm_h, _, _ = _interval([(s.comm_time_s, _diff_ci(s), s.n_steps) for s in ok if s.comm_time_s is not None])
    mins = [s.gpu_util_min for s in ok if s.gpu_util_min is not None]
    return Agg(samples=group, n_ok=len(ok), step_time_s=step, step_time_ci95_s=step_h, throughput=thr,
               throughput_lo=lo, throughput_hi=hi, ci_basis=basis if step_h is not None or lo is not None else None,
               ci_df=df if step_h is not None else None,
               comm_time_s=comm, comm_time_ci95_s=comm_h,
               compute_time_s=mean([s.compute_time_s for s in ok if s.compute_time_s is not None]),
               comm_fraction=mean([s.comm_fraction for s in ok if s.comm_fraction is not None]),
               gpu_util_mean=mean([s.gpu_util_mean for s in ok if s.gpu_util_mean is not None]),
               gpu_util_min=min(mins) if mins else None, state=_state(group),
               reason=next((s.reason for s in group if s.reason), ""),
               hosts=tuple(sorted({h for s in group for h in s.hosts})))


def aggregate(samples: list[Sample]) -> list[Agg]:
    groups: dict[tuple[Any, ...], list[Sample]] = {}
    for s in samples:
        groups.setdefault(point_key(s), []).append(s)
    aggs = [_one(group) for group in groups.values()]
    mark_apart(aggs)
    return aggs


def varying(points: Sequence[Sample | PointView]) -> list[str]:
    """The keys of samples.axis_values whose values differ among ``points``, in declaration order. A parameter a
    point does not know (a foreign log's steps) differs from nothing; an env or [slurm] axis a point does not
    have differs from one it has."""
    values = [axis_values(a) for a in points]
    keys = list(dict.fromkeys(k for v in values for k in v))
    return [k for k in keys if len({repr(v.get(k)) for v in values if _known(k, v.get(k))}) > 1]


def _known(key: str, value: Any) -> bool:
    return key not in OTHERS or (value is not None and value != BY_NAME[key].unknown)


def shown(key: str, value: Any) -> str:
    """steps=10, NCCL_ALGO=Ring: an env axis by its variable's name."""
    return f"{key.removeprefix(ENV_COLUMN)}={value}"


def mark_apart(aggs: list[Agg]) -> None:
    """Fill each point's ``apart``: the values beyond its name that differ among the points of its kind, so that
    no table, legend or baseline names two different points alike."""
    kinds: dict[Any, list[Agg]] = {}
    for a in aggs:
        kinds.setdefault(a.kind, []).append(a)
    for group in kinds.values():
        keys = varying(group)
        if keys:
            for a in group:
                values = axis_values(a)
                a.apart = ", ".join(shown(k, values[k]) for k in keys if values.get(k) is not None)
