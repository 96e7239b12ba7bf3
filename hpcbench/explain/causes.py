"""Root cause first: a point's findings ranked by their estimated effect, each symptom credited to the cause that
produces it and shown under it.

The causal table (each rule module's ``EXPLAINS``, merged by rules.explains()) says which rule can produce which:
oversubscribed cores make a rank lag and the communication share grow. Where a cause and its symptom are both
found on a point, the symptom gets ``because = <cause rule>`` and moves under the cause, and the cause's effect
is the largest of its own and of what it explains (a comm share of 90% that oversubscription produces is 90% of
the step lost to the oversubscription). A symptom whose rule found it to be its own cause (``own_cause``: an
injected straggler lags far beyond what shared cores explain) is never credited.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from hpcbench.findings import Finding, rank
from hpcbench.vocab import ERROR, WARNING

CAUSING = (ERROR, WARNING)  # an informational finding explains nothing: it is not sure enough to credit


def _root(i: int, parent: dict[int, int]) -> int:
    seen = {i}
    while i in parent and parent[i] not in seen:  # the table is acyclic (a test says so); guard all the same
        i = parent[i]
        seen.add(i)
    return i


def effect(f: Finding, findings: Sequence[Finding]) -> float | None:
    """The estimated share of the step a root finding costs: its own, or the largest of what it explains."""
    costs = [g.cost for g in findings if g.cost is not None and (g is f or (f.because is None and
                                                                         g.because == f.rule))]
    return max(costs) if costs else None


def credit(findings: Sequence[Finding], table: Mapping[str, frozenset[str]],
           caveats: frozenset[str] = frozenset()) -> list[Finding]:
    """The findings of one point (in rule-group order), causes ranked by estimated effect (errors first, the
    ``caveats`` about the figures after the causes), each followed by the symptoms credited to it (``because`` set
    to its rule)."""
    parent: dict[int, int] = {}
    for i, s in enumerate(findings):
        if s.own_cause:
            continue
        causes = [j for j, c in enumerate(findings) if j != i and c.rule != s.rule and c.severity in CAUSING
                  and s.rule in table.get(c.rule, ())]
        if causes:  # the likeliest cause: the costliest, then the most severe, then the first found
            parent[i] = min(causes, key=lambda j: (-(findings[j].cost or 0.0), rank(findings[j]), j))
    roots = {i: _root(i, parent) for i in range(len(findings))}
    out = [replace(f, because=findings[roots[i]].rule) if roots[i] != i else f for i, f in enumerate(findings)]
    heads = [i for i in range(len(out)) if roots[i] == i]

    def weight(i: int) -> float | None:
        costs = [out[j].cost for j in range(len(out)) if roots[j] == i and out[j].cost is not None]
        return max(costs) if costs else None  # type: ignore[type-var]

    def key(i: int) -> tuple[bool, bool, bool, float, int, int]:
        w = weight(i)
        return out[i].severity != ERROR, out[i].rule in caveats, w is None, -(w or 0.0), rank(out[i]), i

    ranked: list[Finding] = []
    for h in sorted(heads, key=key):
        ranked.append(out[h])
        ranked += sorted((out[j] for j in range(len(out)) if j != h and roots[j] == h),
                         key=lambda f: (f.cost is None, -(f.cost or 0.0), rank(f)))
    return ranked
