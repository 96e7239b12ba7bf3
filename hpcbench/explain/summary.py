"""The run first, then the points: what explains a run as a whole, each cause said once with the points it
touches, and what each point shows beyond that.

- a *cause* of the run is a root finding (not credited to another, causes.py) that is a warning or an error, on
  any of its points, grouped by rule: "3 causes explain this run";
- a *caveat* (what the figures can bear: few repeats, noise, a speedup within noise) is said once with its points;
- a finding that is neither (an info: the network used) but holds for several points is said once with their
  list (*common*);
- each point then shows only what differs: the findings of rules said at run level are left out of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hpcbench.explain import PointWhy, rules
from hpcbench.explain.causes import CAUSING
from hpcbench.findings import Finding, rank
from hpcbench.vocab import ERROR, SEVERITIES


@dataclass
class Said:
    """One rule's finding, said once for the points it holds on."""

    rule: str
    severity: str  # the most severe over its points
    example: Finding  # the point's finding with the largest effect: its claim, evidence and fix stand for all
    example_point: str
    points: list[str] = field(default_factory=list)  # labels, in the run's order
    effects: list[float] = field(default_factory=list)  # each point's estimated effect, where known
    explains: dict[str, int] = field(default_factory=dict)  # symptom rule -> on how many points it was credited

    @property
    def effect(self) -> float | None:
        return max(self.effects) if self.effects else None

    def to_dict(self, short: dict[str, str] | None = None) -> dict[str, object]:
        return {"rule": self.rule, "severity": self.severity, "points": self.points,
                "effect_max": self.effect, "effect_total": sum(self.effects) if self.effects else None,
                "explains": self.explains, "example_point": self.example_point, "example": self.example.to_dict()}


@dataclass
class RunWhy:
    points: list[PointWhy]
    causes: list[Said]  # most important first: errors, then the largest total effect, then the most points
    caveats: list[Said]  # what the figures can bear, on any number of points
    common: list[Said]  # findings that are neither, said of two points or more

    @property
    def said(self) -> set[tuple[str, bool]]:
        """(rule, whether a cause) of what is said at run level: a point's own listing leaves those out."""
        return ({(s.rule, True) for s in self.causes} | {(s.rule, s.severity in CAUSING) for s in self.caveats}
                | {(s.rule, False) for s in self.common})

    def differs(self, w: PointWhy) -> list[Finding]:
        """The findings of ``w`` not said at run level, symptoms left out (they are said under their cause)."""
        said = self.said
        return [f for f in w.findings if f.because is None and (f.rule, f.severity in CAUSING) not in said]

    def leads(self, w: PointWhy) -> list[tuple[Finding, float | None]]:
        """The point's causes in order, with their estimated effect."""
        return [(f, w.effect(f)) for f in w.findings if f.because is None and f.severity in CAUSING
                and f.rule not in rules.caveats()]

    def cautions(self, w: PointWhy) -> list[str]:
        """The caveats that hold for the point (a noise credited to a cause is said under it instead)."""
        return [f.rule for f in w.findings if f.rule in rules.caveats() and f.severity in CAUSING
                and f.because is None]


def _add(groups: dict[str, Said], w: PointWhy, f: Finding, eff: float | None) -> None:
    s = groups.get(f.rule)
    if s is None:
        s = groups[f.rule] = Said(f.rule, f.severity, f, w.label)
    elif rank(f) < rank(s.example) or (rank(f) == rank(s.example) and (eff or 0.0) > (s.effect or 0.0)):
        s.example, s.example_point = f, w.label
    s.severity = SEVERITIES[min(SEVERITIES.index(s.severity), rank(f))]
    if w.label not in s.points:
        s.points.append(w.label)
    if eff is not None:
        s.effects.append(eff)
    for g in w.under(f):
        s.explains[g.rule] = s.explains.get(g.rule, 0) + 1


def summarize(whys: Sequence[PointWhy]) -> RunWhy:
    causes: dict[str, Said] = {}
    caveats: dict[str, Said] = {}
    others: dict[str, Said] = {}
    for w in whys:
        for f in w.findings:
            if f.because is None:
                _add(caveats if f.rule in rules.caveats() else causes if f.severity in CAUSING else others, w, f,
                     w.effect(f))
    ranked = sorted(causes.values(), key=lambda s: (s.severity != ERROR, -sum(s.effects), -len(s.points)))
    common = [s for s in others.values() if len(s.points) > 1]
    return RunWhy(list(whys), ranked, sorted(caveats.values(), key=lambda s: (rank(s.example), -len(s.points))),
                  sorted(common, key=lambda s: (rank(s.example), -len(s.points))))


def short_labels(labels: Sequence[str]) -> dict[str, str]:
    """Each label without the words every label shares (hvd-mpi-mlp-b32-n2x2 -> hvd-mpi-n2x2 when all points
    train mlp at b32); the full labels where that would make two alike or leave one empty."""
    words = [label.split("-") for label in labels]
    shared = set.intersection(*(set(w) for w in words)) if len(words) > 1 else set()
    short = {label: "-".join(x for x in w if x not in shared) for label, w in zip(labels, words, strict=True)}
    if len(set(short.values())) < len(set(labels)) or not all(short.values()):
        return {label: label for label in labels}
    return short
