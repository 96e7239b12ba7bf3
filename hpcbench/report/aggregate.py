"""Repeats of one point -> one row: mean and 95% CI over repeats, the states and reasons kept."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hpcbench.plan.fields import NAMES, POINT_KEY
from hpcbench.report.samples import Sample
from hpcbench.stats import mean_ci95


@dataclass
class Agg:
    """One point, all its repeats. Point fields are read from ``first``."""

    samples: list[Sample]
    n_ok: int
    step_time_s: float | None
    step_time_ci95_s: float | None
    throughput: float | None
    throughput_ci95: float | None
    comm_time_s: float | None
    comm_time_ci95_s: float | None  # comm = step - compute: both CIs combined, or across repeats
    compute_time_s: float | None
    comm_fraction: float | None
    gpu_util_mean: float | None
    gpu_util_min: float | None
    state: str
    reason: str
    speedup: float | None = None
    efficiency: float | None = None
    baseline: str = ""  # which point the speedup is relative to
    base_throughput: float | None = None
    base_world_size: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def first(self) -> Sample:
        return self.samples[0]

    @property
    def ok(self) -> bool:
        return self.n_ok > 0

    @property
    def final(self) -> bool:
        return all(s.final for s in self.samples)



# Point fields (the declared parameters, where it came from) are the same in every repeat: read them from the first.
POINT_FIELDS = (*NAMES, "source", "label", "point_id", "world_size", "cluster", "comm_method", "layout", "name")
for _name in POINT_FIELDS:
    setattr(Agg, _name, property(lambda self, _n=_name: getattr(self.samples[0], _n)))


def mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def point_key(s: Sample) -> tuple[Any, ...]:
    """Samples with equal keys are repeats of one point: the same parameters (plan/fields.POINT_KEY) on one cluster."""
    key = (s.cluster, *(getattr(s, n) for n in POINT_KEY), s.world_size)
    # Logs of jobs hpcbench did not launch may come from anywhere: each file is its own point, never a
    # repeat of another file's (a speedup may still compare them, and names the file it compares with).
    return key if s.point_id is not None else (*key, s.source, s.label)


def _ci(values: list[float], own_ci: float | None) -> tuple[float | None, float | None]:
    """Across repeats when there are several; a single repeat keeps its own CI (over its timed steps)."""
    if len(values) == 1:
        return values[0], own_ci
    return mean_ci95(values)


def _diff_ci(s: Sample | None) -> float | None:
    """The CI half-width of comm = step - compute, the two means measured independently on the same rank."""
    if s is None or s.step_time_ci95_s is None or s.compute_time_ci95_s is None:
        return None
    return math.hypot(s.step_time_ci95_s, s.compute_time_ci95_s)


def _state(samples: list[Sample]) -> str:
    counts = Counter(s.state for s in samples)
    if len(counts) == 1:
        return samples[0].state
    return ", ".join(f"{n} {state}" for state, n in counts.most_common())


def aggregate(samples: list[Sample]) -> list[Agg]:
    groups: dict[tuple[Any, ...], list[Sample]] = {}
    for s in samples:
        groups.setdefault(point_key(s), []).append(s)
    out = []
    for group in groups.values():
        group.sort(key=lambda s: s.repeat)
        ok = [s for s in group if s.ok]
        one = ok[0] if len(ok) == 1 else None

        def vals(name: str, ok: list[Sample] = ok) -> list[float]:
            return [v for s in ok if (v := getattr(s, name)) is not None]

        step, step_ci = _ci(vals("step_time_s"), one.step_time_ci95_s if one else None) if vals("step_time_s") else (None, None)
        thr, thr_ci = _ci(vals("throughput"), one.throughput_ci95 if one else None) if vals("throughput") else (None, None)
        mins = vals("gpu_util_min")
        comm, comm_ci = _ci(vals("comm_time_s"), _diff_ci(one)) if vals("comm_time_s") else (None, None)
        out.append(Agg(
            samples=group, n_ok=len(ok), step_time_s=step, step_time_ci95_s=step_ci, throughput=thr,
            throughput_ci95=thr_ci, comm_time_s=comm, comm_time_ci95_s=comm_ci,
            compute_time_s=mean(vals("compute_time_s")),
            comm_fraction=mean(vals("comm_fraction")), gpu_util_mean=mean(vals("gpu_util_mean")),
            gpu_util_min=min(mins) if mins else None, state=_state(group),
            reason=next((s.reason for s in group if s.reason), "")))
    return out
