"""Speedup and efficiency against an explicit baseline, which the report prints, with their 95% intervals.

speedup = throughput / baseline throughput; efficiency = speedup / (ranks / baseline ranks).
Weak scaling (batch per rank fixed) compares points with the same per-rank batch; strong scaling
(global batch fixed) compares points with the same global batch. The two are never mixed.

By default (auto) a unit of work (model, batch, precision, device, cluster, ...) has ONE baseline, shared by
every framework and backend: the 1-rank runs of all of them do the same work with no communication, so they
are pooled as repeats of one measurement. Each backend measured against its own 1-rank run would read a
different efficiency from a different baseline, which is noise, not scaling (issue 25: 3,720 against 6,821
samples/s for three 1-rank runs of the same work). Wherever baselines of the same work disagree beyond their
noise (their intervals do not overlap), the result carries a warning naming them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from hpcbench.errors import ConfigError
from hpcbench.figures.aggregate import Agg, pooled
from hpcbench.plan.fields import CURVE
from hpcbench.stats import overlap, ratio_interval
from hpcbench.vocab import BASELINES, NO_FRAMEWORK

MODES = BASELINES

DESCRIPTIONS = {
    "auto": "one baseline per unit of work (model, batch, precision, device), shared by every framework and "
            "backend: the 1-rank runs of all of them pooled, as they do the same work with no communication "
            "(where the work has no 1-rank run: each series' smallest measured point, named in the 'baseline' column)",
    "per-backend": "the 1-rank point of the same framework, backend, model and batch (or, where there is none, "
                   "that series' smallest measured point, named in the 'baseline' column)",
    "single-gpu": "the 1-rank (1-GPU) point of the same framework, backend, model and batch",
    "single-node": "the 1-node point with the same ranks per node, framework, backend, model and batch "
                   "(efficiency = speedup / nodes)",
    "no-framework": "the single-process run without any communication library (framework = none) "
                    "of the same model and batch: the ideal, as in the Isabella measurement",
}


@dataclass
class BaselineResult:
    mode: str
    description: str
    missing: list[str] = field(default_factory=list)  # series with no baseline, said in the report
    disagree: list[list[Agg]] = field(default_factory=list)  # 1-rank points of one work that differ beyond noise
    shared: list[Base] = field(default_factory=list)  # the pooled baselines, each said once under the table


@dataclass
class Base:
    """What a group of points is measured against: one point, or several points' runs pooled."""

    agg: Agg  # its figures (pooled: the runs of every member as repeats)
    members: list[Agg]
    name: str


def scaling_label(a: Agg) -> str | None:
    if a.scaling == "strong":
        return f"strong (global batch {a.global_batch_size})" if a.global_batch_size else "strong"
    return f"weak (batch/rank {a.batch_size})" if a.batch_size else a.scaling


def series_key(a: Agg, leave: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """What a scaling curve is of on one cluster: every parameter but the layout and the repeat (plan/fields.CURVE),
    and the point's env and [slurm] axes, so that points that differ in steps or NCCL_ALGO are two curves. The batch
    that is held fixed is the per-rank one in weak scaling and the global one in strong scaling; the other varies
    along the curve."""
    varies = "batch_size" if a.scaling == "strong" else "global_batch_size"
    key = (a.cluster, a.precision, *(getattr(a, n) for n in CURVE if n != varies and n not in leave), a.env, a.slurm)
    # A log of someone else's job whose cluster is unknown (no host names, no --cluster) is a curve of its own.
    return key if a.point_id is not None or a.cluster is not None else (*key, a.source)


def work_key(a: Agg) -> tuple[Any, ...]:
    """A unit of work: a series but for its framework and backend (what does the computing, not who talks)."""
    return series_key(a, leave=("framework", "backend"))


def _pick(mode: str) -> tuple[Callable[[Agg], tuple[Any, ...]], Callable[[Agg], bool]]:
    """(key of the group the baseline is chosen in, whether a candidate may serve as baseline for a point)."""
    if mode == "auto":
        return work_key, lambda base: base.world_size == 1
    if mode in ("per-backend", "single-gpu"):
        return series_key, lambda base: base.world_size == 1
    if mode == "single-node":
        return (lambda a: (*series_key(a), a.ranks_per_node)), lambda base: base.nodes == 1
    return work_key, lambda base: base.framework == NO_FRAMEWORK and base.world_size == 1


def apply(aggs: list[Agg], mode: str = "auto") -> BaselineResult:
    """Fill speedup, efficiency, their intervals and the baseline of every training row that has a baseline."""
    if mode not in MODES:
        raise ConfigError(f"unknown baseline {mode!r} (choose from: {', '.join(MODES)})")
    key, eligible = _pick(mode)
    train = [a for a in aggs if a.kind == "train" and a.world_size and a.measures]
    groups: dict[tuple[Any, ...], list[Agg]] = {}
    for a in train:
        groups.setdefault(key(a), []).append(a)
    result = BaselineResult(mode, DESCRIPTIONS[mode])
    for group in groups.values():
        measured = [a for a in group if a.ok and a.throughput]
        bases = [a for a in measured if eligible(a)]
        if len(bases) > 1 and mode == "auto":
            base = Base(pooled([s for b in bases for s in b.samples if s.ok]), bases, _pooled_name(bases))
            result.shared.append(base)
            _assign(group, base)
        elif bases:
            _assign(group, Base(bases[0], bases[:1], bases[0].name))
        elif mode in ("auto", "per-backend"):  # no 1-rank run of this work: each series' smallest point
            for series in _split(group, series_key):
                _fallback(series, mode, result)
        elif len(group) == 1 and group[0].point_id is None:
            _alone(group[0])
        elif mode != "no-framework" or any(a.framework != NO_FRAMEWORK for a in group):
            result.missing.append(f"{_describe(group[0], mode)}: no measured baseline point; speedup left blank")
    result.disagree = disagreements(train)
    return result


def _split(points: list[Agg], key: Callable[[Agg], tuple[Any, ...]]) -> list[list[Agg]]:
    groups: dict[tuple[Any, ...], list[Agg]] = {}
    for a in points:
        groups.setdefault(key(a), []).append(a)
    return list(groups.values())


def _fallback(group: list[Agg], mode: str, result: BaselineResult) -> None:
    measured = [a for a in group if a.ok and a.throughput]
    if len(measured) > 1:
        base = min(measured, key=lambda a: cast(int, a.world_size))  # train has one
        _assign(group, Base(base, [base], base.name + " (smallest measured)"))
    elif len(group) == 1 and group[0].point_id is None:
        _alone(group[0])
    else:
        result.missing.append(f"{_describe(group[0], mode)}: no measured baseline point; speedup left blank")


def _pooled_name(bases: list[Agg]) -> str:
    """What the table's baseline column says of a pooled baseline; the members are said once, under the table."""
    return f"shared ({sum(b.n_ok for b in bases)} runs at 1 rank)"


def _assign(group: list[Agg], base: Base) -> None:
    b = base.agg
    base_thr = cast(float, b.throughput)  # a base is measured
    for a in group:
        a.base_throughput, a.base_lo, a.base_hi, a.base_world_size = b.throughput, b.throughput_lo, \
            b.throughput_hi, b.world_size
        a.baseline = base.name
        scale = cast(int, a.world_size) / cast(int, b.world_size)  # every train point has a size
        if a.ok and a.throughput:
            a.speedup = a.throughput / base_thr
            a.efficiency = a.speedup / scale
            if a is b:  # measured against itself: exactly 1, whatever the noise
                a.speedup_lo = a.speedup_hi = 1.0
            else:
                a.speedup_lo, a.speedup_hi = ratio_interval(a.throughput, a.throughput_lo, a.throughput_hi,
                                                            base_thr, b.throughput_lo, b.throughput_hi)
            if a.speedup_lo is not None and a.speedup_hi is not None:
                a.efficiency_lo, a.efficiency_hi = a.speedup_lo / scale, a.speedup_hi / scale
        for s in a.samples:
            if s.throughput:
                s.speedup = s.throughput / base_thr
                s.efficiency = s.speedup / scale


def disagreements(train: list[Agg]) -> list[list[Agg]]:
    """The units of work whose 1-rank points (of different frameworks or backends) disagree beyond their noise:
    two of them have 95% intervals that do not overlap. Against any one of them, a speedup is off by the gap."""
    out = []
    for group in _split([a for a in train if a.world_size == 1 and a.ok and a.throughput], work_key):
        if any(not overlap(a.throughput_lo, a.throughput_hi, b.throughput_lo, b.throughput_hi)
               for i, a in enumerate(group) for b in group[i + 1:]):
            out.append(sorted(group, key=lambda a: cast(float, a.throughput)))
    return out


def _alone(a: Agg) -> None:
    """A log that nothing comparable joins: said on its row, instead of a speedup against itself."""
    why = ("its log shows no host names, so no other log can be put on its curve (give --cluster NAME when "
           "the logs come from one cluster)" if a.cluster is None else
           "no other log of the same framework, model, batch, precision and cluster")
    a.baseline = f"— ({why})"


def _describe(a: Agg, mode: str) -> str:
    what = {"no-framework": "no framework=none 1-rank run", "single-node": f"no 1-node x{a.ranks_per_node} run"}
    return f"{a.framework}-{a.backend} {a.model} {scaling_label(a)} ({what.get(mode, 'no 1-rank run')})"
