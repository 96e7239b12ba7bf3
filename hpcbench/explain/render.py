"""Findings for people and programs: the run first (what explains it, each cause once with the points it touches),
then each point (what only it shows; with ``everything``, all its findings, symptoms under their cause), as a
terminal listing, markdown (the report's opening and its "Why" section) or JSON."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any

from hpcbench.explain import PointWhy
from hpcbench.explain.causes import CAUSING
from hpcbench.explain.links import of_peak
from hpcbench.explain.summary import RunWhy, Said, short_labels, summarize
from hpcbench.figures.aggregate import mean
from hpcbench.findings import Finding

COLUMNS = ("point", "severity", "rule", "claim", "effect", "evidence", "fix", "because")  # the keys of rows()
SCHEMA = "hpcbench.explain/2"


def rows(whys: list[PointWhy], everything: bool = True) -> list[dict[str, Any]]:
    """One dict per point x finding (every finding, or each point's causes), and a communication point's link
    peak (COLUMNS): the rows of hpcbench.explain(...).to_frame(); ``because``: the cause a symptom is credited to."""
    out = []
    for w in whys:
        for f in (w.findings if everything else w.top()):
            out.append({"point": w.label, "severity": f.severity, "rule": f.rule, "claim": f.claim,
                        "effect": f.effect, "evidence": f.evidence, "fix": f.fix, "because": f.because})
        if w.peak is not None or w.peak_why:
            out.append({"point": w.label, "severity": "info", "rule": "link-peak",
                        "claim": _peak(w), "effect": None, "evidence": w.peak.source if w.peak else None,
                        "fix": None, "because": None})
    return out


def _top_busbw(w: PointWhy) -> float | None:
    """The largest size's busbw, averaged over the repeats: the figure the report's table compares with the peak."""
    rows = w.point.rows
    if not rows:
        return None
    top = max(r.size_bytes for r in rows)
    return mean([r.busbw_gbps for r in rows if r.size_bytes == top])


def _share(x: float | None) -> str:
    return f"{x:.0%}" if x is not None else ""


def _points(s: Said, short: dict[str, str], total: int, limit: int = 6) -> str:
    if len(s.points) == total and total > 1:
        return f"all {total} points"
    names = [short[p] for p in s.points]
    listed = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    return f"{len(names)} point{'s' if len(names) > 1 else ''}: {listed}"


def _size(s: Said) -> str:
    if s.effect is None:
        return ""
    lo, hi = _share(min(s.effects)), _share(s.effect)
    return f", {hi} of the step" if lo == hi else f", {lo}–{hi} of the step"


def _explains(s: Said) -> str:
    return ", ".join(f"{rule} ({n} point{'s' if n > 1 else ''})" for rule, n in sorted(
        s.explains.items(), key=lambda kv: -kv[1]))


def _wrap(text: str, width: int, indent: str, lines: int | None = 2) -> list[str]:
    if lines is not None:  # room for the words wrapping leaves at each line's end
        text = textwrap.shorten(text, (width - len(indent) - 12) * lines, placeholder=" …")
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False)


def _cause_count(run: RunWhy) -> str:
    n = len(run.causes)
    total = len(run.points)
    head = f"{total} point{'s' if total != 1 else ''}"
    if not n:
        return f"{head}: no cause of a loss found (the points' figures are in the tables; --all for every finding)"
    # the causes are named on the lines below, most important first: this line stays the same shape run to run
    return f"{head}; {n} cause{'s' if n > 1 else ''} explain{'' if n > 1 else 's'} this run:"


def summary_text(run: RunWhy, width: int = 100) -> list[str]:
    """The run's causes and what many of its points share, each said once."""
    short = short_labels([w.label for w in run.points])
    total = len(run.points)
    out = [_cause_count(run)]
    for n, s in enumerate(run.causes, 1):
        out += _wrap(f"{n}. {s.rule} ({s.severity}){_size(s)}: {_points(s, short, total)}", width, "")
        example = s.example.claim if len(s.points) == 1 else f"e.g. {short[s.example_point]}: {s.example.claim}"
        out += _wrap(example, width, "   ")
        if s.example.fix:
            out += _wrap(f"fix: {s.example.fix}", width, "   ")
        if s.explains:
            out += _wrap(f"explains: {_explains(s)}", width, "   ")
    for title, said in (("What the figures can bear", run.caveats), ("Said of several points", run.common)):
        if said:
            out.append(f"{title}:")
        for s in said:
            fix = f" — fix: {s.example.fix}" if s.example.fix else ""
            out += _wrap(f"{s.severity} {s.rule} ({_points(s, short, total, 3)}): {s.example.claim}{fix}", width, "  ")
    return out


def _finding_lines(f: Finding, width: int, indent: str, full: bool) -> list[str]:
    text = f.claim + (f" (effect: {f.effect})" if f.effect and f.effect not in f.claim else "")
    out = _wrap(f"{f.severity:<8} {f.rule}: {text}", width, indent, None if full else 2)
    for label, value in (("evidence", f.evidence), ("fix", f.fix)):
        if value and (full or label == "fix"):
            out += _wrap(f"{label}: {textwrap.shorten(str(value), 240, placeholder=' …')}", width, indent + "   ",
                         None if full else 2)
    return out


def as_table(whys: list[PointWhy], width: int = 100, everything: bool = False) -> str:
    """For the terminal: the run's causes, then one line per point naming its causes in order, with what only it
    shows under it; ``everything``: each point's findings in full, symptoms indented under their cause."""
    run = summarize(whys)
    out = summary_text(run, width)
    short = short_labels([w.label for w in whys])
    name_width = min(max((len(v) for v in short.values()), default=0), 40)
    out.append("Each point: its causes in order (caveats); " + ("every finding, symptoms under their cause"
                                                                  if everything else "under it, what only it shows "
                                                                  "(--all: every finding, with evidence)"))
    for w in whys:
        leads = ", ".join(f"{f.rule}{' ' + _share(e) if e is not None else ''}" for f, e in run.leads(w)) or "-"
        cautions = run.cautions(w)
        leads += f"  ({', '.join(cautions)})" if cautions else ""
        out.append(f"  {short[w.label]:<{name_width}}  {w.point.state:<9}  {leads}")
        if everything:
            for f in w.findings:
                out += _finding_lines(f, width, "      " if f.because else "    ", True)
            if w.peak is not None or w.peak_why:
                out += _wrap(f"info     link-peak: {_peak(w)}", width, "    ", None)
        else:
            for f in run.differs(w):
                out += _finding_lines(f, width, "    ", False)
    return "\n".join(out)


def _peak(w: PointWhy) -> str:
    """The link-peak row: the same figure the report's table gives (the largest size's share of the peak)."""
    if not w.peak:
        return f"peak unknown: {w.peak_why}"
    return f"peak {w.peak.gbps:g} GB/s ({w.peak.link}); largest size: {of_peak(_top_busbw(w), w.peak)}"


def as_json(whys: list[PointWhy]) -> str:
    """The same structure as the listing: the run's causes and common findings, then every point's findings."""
    run = summarize(whys)
    doc = {"schema": SCHEMA,
           "run": {"points": len(whys), "causes": [s.to_dict() for s in run.causes],
                   "caveats": [s.to_dict() for s in run.caveats], "common": [s.to_dict() for s in run.common]},
           "points": [{"point": w.label, "state": w.point.state, "causes": [f.rule for f, _ in run.leads(w)],
                       "caveats": run.cautions(w),
                       "effects": [e for _, e in run.leads(w)], "differs": [f.rule for f in run.differs(w)],
                       "findings": [f.to_dict() for f in w.findings], "peak_gbps": w.peak.gbps if w.peak else None,
                       "peak_link": w.peak.link if w.peak else None, "peak_unknown": w.peak_why or None}
                      for w in whys]}
    return json.dumps(doc, indent=1) + "\n"


def summary_markdown(whys: Sequence[PointWhy]) -> str:
    """The report's opening: the run's causes, each with its points, example, fix and what it explains."""
    run = summarize(whys)
    short = short_labels([w.label for w in whys])
    total = len(whys)
    out = [_cause_count(run).replace("; ", ": ", 1) if not run.causes else
           f"**{len(run.causes)} cause{'s' if len(run.causes) > 1 else ''} explain"
           f"{'' if len(run.causes) > 1 else 's'} this run** ({total} points):", ""]
    for n, s in enumerate(run.causes, 1):
        out.append(f"{n}. **{s.rule}** ({s.severity}{_size(s)}) — {_points(s, short, total, 12)}")
        out.append(f"   - {'' if len(s.points) == 1 else f'e.g. {short[s.example_point]}: '}{s.example.claim}")
        if s.example.fix:
            out.append(f"   - fix: {s.example.fix}")
        if s.explains:
            out.append(f"   - explains: {_explains(s)}")
    for title, said in (("What the figures can bear", run.caveats), ("Said of several points", run.common)):
        if said:
            out += ["", f"{title}:", ""]
        out += [f"- {s.severity} **{s.rule}** ({_points(s, short, total, 12)}): {s.example.claim}"
                + (f" — fix: {s.example.fix}" if s.example.fix else "") for s in said]
    return "\n".join(out)


def as_markdown(whys: list[PointWhy], everything: bool = True) -> str:
    """Each point's causes and caveats with their evidence and fix, the symptoms credited to each nested under it;
    ``everything``: its informational findings too."""
    out = []
    for w in whys:
        shown = [f for f in w.findings if everything or f.severity in CAUSING or f.because]
        if not shown:
            continue
        out.append(f"- **{w.label}**")
        for f in shown:
            pad = "  " if f.because else ""
            effect = f" — {f.effect}" if f.effect and f.effect not in f.claim else ""
            under = f" (because of {f.because})" if f.because else ""
            out.append(f"{pad}  - {f.severity}: {f.rule}: {f.claim}{effect}{under}")
            if f.evidence:
                out.append(f"{pad}    - evidence: `{f.evidence}`")
            if f.fix:
                out.append(f"{pad}    - fix: {f.fix}")
    return "\n".join(out) if out else "- nothing found that explains a loss: see the tables below"
