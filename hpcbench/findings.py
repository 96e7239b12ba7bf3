"""The one shape of every conclusion hpcbench draws (doctor, check, the report): a claim, its
evidence, the size of its effect where it can be estimated, and the fix."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

from hpcbench.vocab import ERROR, SEVERITIES


@dataclass(frozen=True)
class Finding:
    severity: str  # one of vocab.SEVERITIES: error | warning | info | ok
    rule: str  # a short name for what was checked: socket-with-ib, slurm, accounting, ...
    claim: str  # what is true, in one sentence
    fix: str | None = None  # what to do about it
    evidence: str | None = None  # where it shows: a file and line, or a record field and its value
    effect: str | None = None  # how much it costs, where that can be estimated
    subject: str | None = None  # what it is about: a log file, a point, an area of the installation
    cost: float | None = None  # the share of the step time it costs, where estimated: findings are ranked by it
    # explain's root cause first: the rule of the finding that produces this one (a comm share credited to the
    # oversubscription that makes it), set when explain credits it; None for a root cause
    because: str | None = None
    own_cause: bool = False  # its rule found it to be a cause by itself, beyond what the others explain: never credited

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r} (one of: {', '.join(SEVERITIES)})")

    @property
    def fails(self) -> bool:
        """An error: the command that found it exits 1."""
        return self.severity == ERROR

    def about(self, subject: str) -> Finding:
        """This finding, about ``subject`` unless it already names one."""
        return self if self.subject else replace(self, subject=subject)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rank(f: Finding) -> int:
    """0 for the most severe: sort findings with this."""
    return SEVERITIES.index(f.severity)


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """The largest estimated cost first, then the most severe; findings without a cost after those with one."""
    return sorted(findings, key=lambda f: (f.cost is None, -(f.cost or 0.0), rank(f)))
