"""Speedup and efficiency against an explicit baseline, which the report prints.

speedup = throughput / baseline throughput; efficiency = speedup / (ranks / baseline ranks).
Weak scaling (batch per rank fixed) compares points with the same per-rank batch; strong scaling
(global batch fixed) compares points with the same global batch. The two are never mixed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from hpcbench.errors import ConfigError
from hpcbench.figures.aggregate import Agg
from hpcbench.plan.fields import CURVE
from hpcbench.vocab import NO_FRAMEWORK

MODES = ("auto", "single-gpu", "single-node", "no-framework")

DESCRIPTIONS = {
    "auto": "the 1-rank point of the same framework, backend, model and batch "
            "(or, where there is none, that series' smallest measured point, named in the 'baseline' column)",
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


def _pick(mode: str) -> tuple[Callable[[Agg], tuple[Any, ...]], Callable[[Agg], bool]]:
    """(key of the group the baseline is chosen in, whether a candidate may serve as baseline for a point)."""
    if mode in ("auto", "single-gpu"):
        return series_key, lambda base: base.world_size == 1
    if mode == "single-node":
        return (lambda a: (*series_key(a), a.ranks_per_node)), lambda base: base.nodes == 1
    return (lambda a: series_key(a, leave=("framework", "backend"))), \
        lambda base: base.framework == NO_FRAMEWORK and base.world_size == 1


def apply(aggs: list[Agg], mode: str = "auto") -> BaselineResult:
    """Fill speedup, efficiency and baseline of every training row that has a baseline."""
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
        fallback = False
        if not bases and mode == "auto" and len(measured) > 1:
            bases, fallback = [min(measured, key=lambda a: cast(int, a.world_size))], True  # train has one
        if not bases and len(group) == 1 and group[0].point_id is None:
            _alone(group[0])
            continue
        if not bases:
            if mode != "no-framework" or any(a.framework != NO_FRAMEWORK for a in group):
                result.missing.append(f"{_describe(group[0], mode)}: no measured baseline point; speedup left blank")
            continue
        base = bases[0]
        base_thr = cast(float, base.throughput)  # a base is measured
        for a in group:
            a.base_throughput, a.base_world_size = base.throughput, base.world_size
            a.baseline = base.name + (" (smallest measured)" if fallback else "")
            scale = cast(int, a.world_size) / cast(int, base.world_size)  # every train point has a size
            if a.ok and a.throughput:
                a.speedup = a.throughput / base_thr
                a.efficiency = a.speedup / scale
            for s in a.samples:
                if s.throughput:
                    s.speedup = s.throughput / base_thr
                    s.efficiency = s.speedup / scale
    return result


def _alone(a: Agg) -> None:
    """A log that nothing comparable joins: said on its row, instead of a speedup against itself."""
    why = ("its log shows no host names, so no other log can be put on its curve (give --cluster NAME when "
           "the logs come from one cluster)" if a.cluster is None else
           "no other log of the same framework, model, batch, precision and cluster")
    a.baseline = f"— ({why})"


def _describe(a: Agg, mode: str) -> str:
    what = {"no-framework": "no framework=none 1-rank run", "single-node": f"no 1-node x{a.ranks_per_node} run"}
    return f"{a.framework}-{a.backend} {a.model} {scaling_label(a)} ({what.get(mode, 'no 1-rank run')})"
