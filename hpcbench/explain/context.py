"""What a rule is given about one point: its Subject (inputs.py), the evidence of its logs merged, and the
other points of the study (for comparisons), with indexes over them built once for all points."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hpcbench.explain.inputs import Subject
from hpcbench.parse.evidence import Evidence
from hpcbench.records import ResultRecord

T = TypeVar("T")


STRAGGLER = 0.15  # a rank this much above the median compute time of its peers is a straggler (rules/host.py)


@dataclass(frozen=True)
class Lag:
    """The slowest rank against the median of the others (with two ranks, a median over both would halve the gap),
    by their compute-only times where the point has them (at the allreduce every rank waits for the slowest, so
    their step times come out equal), else their step times."""

    rank: int
    time: float  # its own mean
    others: float  # the other ranks' median
    noise: float | None  # half-width of the 95% CI of the gap (None: no interval recorded)
    what: str  # "compute" | "step"

    @property
    def over(self) -> float:
        return self.time - self.others

    @property
    def exceeds(self) -> bool:
        """More than STRAGGLER above the others."""
        return self.others > 0 and self.over / self.others >= STRAGGLER

    @property
    def straggles(self) -> bool:
        """exceeds, and beyond the noise of the means: a gap inside the interval of 8 steps on a host whose speed
        drifts is no finding."""
        return self.exceeds and not self.within_noise

    @property
    def within_noise(self) -> bool:
        return self.noise is not None and self.over <= self.noise


def lag(record: ResultRecord | None) -> Lag | None:
    """The point's slowest rank, or None where fewer than two ranks have a time."""
    if record is None:
        return None
    own = record.rank_compute_s
    times = own or record.rank_step_s
    ts = [t for t in times if t is not None]
    if len(ts) < 2 or len(ts) < len(times):
        return None
    worst = max(range(len(ts)), key=lambda r: ts[r])
    others = [t for r, t in enumerate(ts) if r != worst]
    # each rank's own interval where recorded, else the point's (the slowest rank's) for every rank
    hws = record.rank_compute_ci95_s if own else []
    hw_point = record.compute_time_ci95_s if own else record.step_time_ci95_s
    if len(hws) == len(ts) and all(h is not None for h in hws):
        mine = hws[worst] or 0.0
        theirs = statistics.median(h or 0.0 for r, h in enumerate(hws) if r != worst)
        noise: float | None = math.hypot(mine, theirs)
    else:
        noise = None if hw_point is None else math.hypot(hw_point, hw_point)
    return Lag(worst, ts[worst], statistics.median(others), noise, "compute" if own else "step")


def _rank_compute(point: Subject) -> list[float]:
    return [t for t in (point.record.rank_compute_s if point.record else None) or [] if t is not None]


def typical_compute(point: Subject) -> float | None:
    """The median rank's compute-only step, the lower one of an even count (a straggler's own time is the
    straggler rule's, and with two ranks a plain median would be half of it), else the point's: what the ranks of a
    node compute (compute-growth compares it across points)."""
    own = _rank_compute(point)
    return statistics.median_low(own) if own else point.compute_time_s


def synchronous_compute(point: Subject) -> float | None:
    """The compute-only step a synchronous step waits for: the slowest rank's, since every rank waits for it at the
    gradient exchange (the model's). Where that rank straggles (Lag.straggles: the straggler rule's finding)
    typical_compute's instead."""
    slow = lag(point.record)
    if slow is None or slow.what != "compute":
        return typical_compute(point)
    return typical_compute(point) if slow.straggles else slow.time


def _evidence(point: Subject) -> Evidence:
    """The evidence of every log of the point, the first line of a shape in the first log that shows it."""
    out = Evidence()
    for log in point.logs:
        out.add(log.evidence)
    return out


@dataclass
class Context:
    point: Subject
    others: Sequence[Subject]  # every point of the study, this one included
    evidence: Evidence = field(default_factory=Evidence)
    shared: dict[str, Any] = field(default_factory=dict)  # indexes over ``others``, built once for all points

    @classmethod
    def of(cls, point: Subject, others: Sequence[Subject], shared: dict[str, Any] | None = None) -> Context:
        return cls(point, others, _evidence(point), {} if shared is None else shared)

    def index(self, name: str, build: Callable[[Sequence[Subject]], T]) -> T:
        """An index over every point, built by ``build(others)`` on first use and shared by all the contexts."""
        if name not in self.shared:
            self.shared[name] = build(self.others)
        found: T = self.shared[name]
        return found

    @property
    def parsed(self) -> list[dict[str, Any]]:
        """The facts parse read from each log (its JSON objects)."""
        return [log.facts for log in self.point.logs]

    @property
    def provenance(self) -> list[dict[str, Any]]:
        return list(self.point.provenance)

    @property
    def record(self) -> ResultRecord | None:
        """The measured repeat's result record (None for a log without one)."""
        return self.point.record

    @property
    def nccl(self) -> list[dict[str, Any]]:
        return [p["nccl"] for p in self.parsed if p.get("nccl")]

    def key(self, name: str, var: str | None = None) -> str:
        """The sweep or profile key ``name`` (``env`` with ``var``: that variable) as a fix names it (keys.py)."""
        from hpcbench.explain.keys import key

        return key(name, self.point.profile, var)

    @property
    def name(self) -> str:
        return self.point.label

    def transports(self, scope: str | None = None) -> set[str]:
        """NCCL transports the logs show (``scope``: 'intra' or 'inter' node edges only)."""
        if scope is None:
            return {t for n in self.nccl for t in n.get("transports") or []}
        return {e["transport"] for n in self.nccl for e in n.get("edges") or []
                if e.get("scope") == scope and e.get("transport")}

    def network(self) -> str | None:
        return next((n["network"] for n in self.nccl if n.get("network")), None)

    def hosts(self) -> list[str]:
        found = set(self.point.hosts) | {h for n in self.nccl for h in n.get("hosts") or []}
        return sorted(found)

    def env(self, name: str) -> tuple[str | None, str]:
        """An NCCL variable's value and where it shows: the log's 'set by environment' line, else provenance."""
        if name in self.evidence.env:
            value, line = self.evidence.env[name]
            return value, str(line)
        for d in self.point.provenance:
            if name in (d.get("env") or {}):
                return str(d["env"][name]), f"provenance-rank{d.get('rank', 0)}.json env.{name}"
        return None, ""

    def gpu_models(self) -> set[str]:
        from_prov = {str(g.get("name")) for d in self.point.provenance for g in d.get("gpus") or [] if g.get("name")}
        return from_prov | self.evidence.gpus
