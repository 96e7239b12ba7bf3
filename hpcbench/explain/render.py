"""Findings for people and programs: a table, markdown (the report's "Why" section), JSON."""

from __future__ import annotations

import json
from typing import Any

from hpcbench.explain import PointWhy
from hpcbench.tabular import format_table

COLUMNS = ("point", "severity", "rule", "claim", "effect", "evidence", "fix")
HEADERS = ("point", "severity", "finding", "claim", "effect", "evidence", "fix")


def rows(whys: list[PointWhy], everything: bool = True) -> list[dict[str, Any]]:
    """One dict per point x finding (every finding, or each point's top ones), and a communication point's link
    peak: the rows of the table here and of hpcbench.explain(...).to_frame()."""
    out = []
    for w in whys:
        for f in (w.findings if everything else w.top()):
            out.append({"point": w.label, "severity": f.severity, "rule": f.rule, "claim": f.claim,
                        "effect": f.effect, "evidence": f.evidence, "fix": f.fix})
        if w.peak is not None or w.peak_why:
            out.append({"point": w.label, "severity": "info", "rule": "link-peak",
                        "claim": f"peak {w.peak.gbps:g} GB/s ({w.peak.link})" if w.peak else
                        f"peak unknown: {w.peak_why}", "effect": None, "evidence": w.peak.source if w.peak else None,
                        "fix": None})
    return out


def as_table(whys: list[PointWhy], fmt: str = "table") -> str:
    return format_table(rows(whys), COLUMNS, HEADERS, fmt=fmt)


def as_json(whys: list[PointWhy]) -> str:
    doc = [{"point": w.label, "state": w.point.state, "findings": [f.to_dict() for f in w.findings],
            "peak_gbps": w.peak.gbps if w.peak else None, "peak_link": w.peak.link if w.peak else None,
            "peak_unknown": w.peak_why or None} for w in whys]
    return json.dumps(doc, indent=1) + "\n"


def as_markdown(whys: list[PointWhy], per_point: int = 3) -> str:
    """The "Why" section: for each point, its costliest findings with their evidence and fix."""
    out = []
    for w in whys:
        top = w.top(per_point)
        if not top:
            continue
        out.append(f"- **{w.label}**")
        for f in top:
            effect = f" — {f.effect}" if f.effect else ""
            out.append(f"  - {f.severity}: {f.claim}{effect}")
            if f.evidence:
                out.append(f"    - evidence: `{f.evidence}`")
            if f.fix:
                out.append(f"    - fix: {f.fix}")
    return "\n".join(out) if out else "- nothing found that explains a loss: see the tables below"
