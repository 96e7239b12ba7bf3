"""What a rule is given about one point: its Subject (inputs.py), the evidence of its logs merged, and the
other points of the study (for comparisons), with indexes over them built once for all points."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hpcbench.explain.inputs import Subject
from hpcbench.parse.evidence import Evidence
from hpcbench.records import ResultRecord

T = TypeVar("T")


STRAGGLER = 0.15  # a rank this much above the median compute time of its peers is a straggler (rules/host.py)


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
    gradient exchange (the model's). Where that rank is a straggler (the straggler rule's finding: more than
    STRAGGLER above the others' median) typical_compute's instead."""
    own = _rank_compute(point)
    if len(own) < 2:
        return typical_compute(point)
    worst = max(own)
    others = list(own)
    others.remove(worst)
    return worst if worst < statistics.median(others) * (1 + STRAGGLER) else statistics.median_low(own)


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
