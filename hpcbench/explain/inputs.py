"""What explain reads about a point, typed and owned here: who the point is (its parameters), what was measured
(the figures aggregated over its repeats, with their intervals and baseline), the record and provenance of
the repeat that tells how it ran, and what parse found in its logs (facts, and the lines that show them).

``subjects(points)`` builds them from the study's aggregated points (hpcbench.figures); the rules read a
Subject only, never a log (parse read those) nor the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcbench.explain.keys import Profile
from hpcbench.figures.aggregate import Agg, comm_within_noise, one_host_posing
from hpcbench.figures.inputs import HuntSeen, hunts_near, profile_of
from hpcbench.records import AllreduceRow, ResultRecord

if TYPE_CHECKING:  # the parser loads when a log is read
    from hpcbench.parse.api import Log


@dataclass(frozen=True, eq=False)  # a subject is itself (the rules' indexes look points up by identity)
class Subject:
    # who it is
    label: str
    point_id: str | None  # None: a log of a job hpcbench did not launch
    source: str  # its run directory or log file
    state: str
    reason: str
    ok: bool  # a repeat was measured
    measures: bool  # False: a log with no measurement, only transport evidence
    kind: str
    framework: str
    backend: str
    model: str | None  # a communication point may name none (its collective says what it moves)
    collective: str | None
    device: str
    batch_size: int | None
    nodes: int | None
    ranks_per_node: int | None
    world_size: int | None
    hosts: tuple[str, ...]  # where its ranks ran, over all repeats
    # what was measured, over its repeats
    repeats: int
    step_time_s: float | None
    compute_time_s: float | None
    comm_time_s: float | None
    comm_time_ci95_s: float | None
    comm_fraction: float | None
    throughput: float | None
    throughput_lo: float | None  # its 95% interval
    throughput_hi: float | None
    speedup: float | None
    speedup_lo: float | None  # its 95% interval (figures.baseline)
    speedup_hi: float | None
    efficiency: float | None
    baseline: str  # what the speedup is against
    base_throughput: float | None  # its baseline's
    base_world_size: int | None
    rows: tuple[AllreduceRow, ...]  # a communication point's rows, every repeat's
    # how it ran: the measured repeat's record and the ranks' provenance, and its logs as parse read them
    record: ResultRecord | None
    provenance: tuple[dict[str, Any], ...]  # JSON documents, as the ranks wrote them
    logs: tuple[Log, ...]
    # the cluster profile the run used, where it set a key its sweep did not: a fix names the profile's key
    profile: Profile | None = None
    hunts: tuple[HuntSeen, ...] = ()  # the hunts beside its run, newest first (figures.inputs.hunts_near)

    @property
    def one_host_posing(self) -> bool:
        return one_host_posing(self.hosts, self.nodes)

    @property
    def comm_within_noise(self) -> bool:
        return comm_within_noise(self.comm_time_s, self.comm_time_ci95_s)


def subject(a: Agg) -> Subject:
    """A point of the study as explain reads it; its logs are parsed here if nothing parsed them before."""
    s = a.first_measured
    p = a.first  # the parameters are the same in every repeat
    return Subject(
        label=p.label, point_id=p.point_id, source=p.source, state=a.state, reason=a.reason, ok=a.ok,
        measures=a.measures, kind=p.kind, framework=p.framework, backend=p.backend, model=p.model,
        collective=p.collective, device=p.device, batch_size=p.batch_size, nodes=p.nodes,
        ranks_per_node=p.ranks_per_node, world_size=p.world_size, hosts=a.hosts, repeats=len(a.samples),
        step_time_s=a.step_time_s, compute_time_s=a.compute_time_s, comm_time_s=a.comm_time_s,
        comm_time_ci95_s=a.comm_time_ci95_s, comm_fraction=a.comm_fraction, throughput=a.throughput,
        throughput_lo=a.throughput_lo, throughput_hi=a.throughput_hi, speedup=a.speedup, speedup_lo=a.speedup_lo,
        speedup_hi=a.speedup_hi, efficiency=a.efficiency, baseline=a.baseline,
        base_throughput=a.base_throughput, base_world_size=a.base_world_size,
        rows=tuple(r for x in a.samples for r in x.allreduce), record=s.record, provenance=tuple(s.provenance),
        logs=tuple(a.logs()), profile=profile_of(p.source),
        hunts=hunts_near(p.source))


def subjects(points: Sequence[Agg]) -> list[Subject]:
    return [subject(a) for a in points]
