"""Findings for people and programs: a table, markdown (the report's "Why" section), JSON."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from hpcbench.explain import PointWhy
from hpcbench.explain.links import of_peak
from hpcbench.figures.aggregate import mean

COLUMNS = ("point", "severity", "rule", "claim", "effect", "evidence", "fix")  # the keys of rows()


def rows(whys: list[PointWhy], everything: bool = True) -> list[dict[str, Any]]:
    """One dict per point x finding (every finding, or each point's top ones), and a communication point's link
    peak (COLUMNS): the rows of the listing here and of hpcbench.explain(...).to_frame()."""
    out = []
    for w in whys:
        for f in (w.findings if everything else w.top()):
            out.append({"point": w.label, "severity": f.severity, "rule": f.rule, "claim": f.claim,
                        "effect": f.effect, "evidence": f.evidence, "fix": f.fix})
        if w.peak is not None or w.peak_why:
            out.append({"point": w.label, "severity": "info", "rule": "link-peak",
                        "claim": f"peak {w.peak.gbps:g} GB/s ({w.peak.link}); largest size: "
                        f"{of_peak(_top_busbw(w), w.peak)}" if w.peak else f"peak unknown: {w.peak_why}", "effect": None, "evidence": w.peak.source if w.peak else None,
                        "fix": None})
    return out


def _top_busbw(w: PointWhy) -> float | None:
    """The largest size's busbw, averaged over the repeats: the figure the report's table compares with the peak."""
    rows = w.point.rows
    if not rows:
        return None
    top = max(r.size_bytes for r in rows)
    return mean([r.busbw_gbps for r in rows if r.size_bytes == top])


def as_table(whys: list[PointWhy], width: int = 100) -> str:
    """For the terminal: each point, then its findings, most costly first, the claim wrapped and the
    evidence and fix indented under it (a table of seven columns would be 400 characters wide)."""
    out = []
    for w in whys:
        out.append(f"{w.label}  [{w.point.state}]")
        for r in rows([w]):
            head = f"  {r['severity']:<8} {r['rule']}: "
            text = r["claim"] + (f" (effect: {r['effect']})" if r["effect"] and r["effect"] not in r["claim"] else "")
            out.append(textwrap.fill(text, width, initial_indent=head, subsequent_indent=" " * 11))
            for key in ("evidence", "fix"):
                if r[key]:
                    out.append(textwrap.fill(textwrap.shorten(str(r[key]), 240, placeholder=" …"), width, initial_indent=f"{'':11}{key}: ",
                                             subsequent_indent=" " * 13))
        out.append("")
    return "\n".join(out).rstrip("\n")


def as_json(whys: list[PointWhy]) -> str:
    doc = [{"point": w.label, "state": w.point.state, "findings": [f.to_dict() for f in w.findings],
            "peak_gbps": w.peak.gbps if w.peak else None, "peak_link": w.peak.link if w.peak else None,
            "peak_unknown": w.peak_why or None} for w in whys]
    return json.dumps(doc, indent=1) + "\n"


def as_markdown(whys: list[PointWhy], per_point: int = 5) -> str:
    """The "Why" section: for each point, its costliest findings with their evidence and fix."""
    out = []
    for w in whys:
        top = w.top(per_point)
        if not top:
            continue
        out.append(f"- **{w.label}**")
        for f in top:
            effect = f" — {f.effect}" if f.effect and f.effect not in f.claim else ""
            out.append(f"  - {f.severity}: {f.claim}{effect}")
            if f.evidence:
                out.append(f"    - evidence: `{f.evidence}`")
            if f.fix:
                out.append(f"    - fix: {f.fix}")
    return "\n".join(out) if out else "- nothing found that explains a loss: see the tables below"
