"""report.md and the terminal rendering of a Report: the same sections, in the same order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcbench.files import utcnow

if TYPE_CHECKING:
    from hpcbench.report.summarize import Report
    from hpcbench.tabular import Table

PLOT_TITLES = {
    "scalability.png": "Scalability curve",
    "speedup_efficiency.png": "Speedup and efficiency",
    "allreduce_busbw.png": "Allreduce bus bandwidth",
    "allreduce_latency.png": "Allreduce latency (small messages)",
    "comm_compute.png": "Communication and compute per point",
}


def plot_title(name: str) -> str:
    """A plot's heading; <collective>_busbw.png for each collective besides all_reduce."""
    from hpcbench.collectives import TABLE

    collective = name.removesuffix("_busbw.png")
    return PLOT_TITLES.get(name) or (f"{TABLE[collective].title} bus bandwidth" if collective in TABLE else name)


def _sources(report: Report) -> list[str]:
    return sorted({s.source for s in report.inputs.samples})


def tables_text(report: Report, fmt: str = "table") -> str:
    if fmt == "latex":
        from hpcbench.report.latex import latex_text

        return latex_text(report)
    parts = []
    if report.partial:
        parts.append(f"*** {report.partial_note()} ***\n")
    parts.append(f"Baseline ({report.baseline.mode}): {report.baseline.description}.\n")
    for t in report.tables:
        parts.append(f"## {t.title}" if fmt in ("markdown", "github") else f"== {t.title}")
        parts.append(t.render(fmt))
        parts += [f"note: {n}" for n in t.notes]
        parts.append("")
    parts.append(_findings_text(report, bullet="- " if fmt in ("markdown", "github") else "  * "))
    return "\n".join(parts).rstrip() + "\n"


def _findings_text(report: Report, bullet: str) -> str:
    lines = ["Findings:"]
    for title, items in report.findings.items():
        if items:
            lines.append(f"{bullet}{title}:")
            lines += [f"    {bullet}{i}" for i in items]
    if len(lines) == 1:
        lines.append(f"{bullet}nothing to report")
    return "\n".join(lines)


def _table_md(t: Table) -> list[str]:
    return [f"## {t.title}", "", t.render("github") if t.rows else f"_{t.empty}_", "", *(f"- {n}" for n in t.notes),
            ""]


def report_md(report: Report) -> str:
    out = ["# hpcbench scaling report", "",
           f"Generated {utcnow()} from: " + ", ".join(f"`{s}`" for s in _sources(report)), ""]
    if report.partial:
        out += [f"> **{report.partial_note()}.**", ""]
    from hpcbench.explain.render import as_markdown, summary_markdown

    # the run first: what explains it, then its main table; the details of each point follow
    out += ["## What explains this run", "", summary_markdown(report.why), ""]
    out += [f"**Baseline ({report.baseline.mode}):** {report.baseline.description}.", ""]
    main = next((t for t in report.tables if t.rows), None)
    if main is not None:
        out += _table_md(main)
    out += ["## Why, point by point", "", ("Each point's causes by estimated effect, with their evidence and fix; a "
            "symptom credited to a cause is nested under it (every finding: `hpcbench explain --all`)."), "",
            as_markdown(report.why, everything=False), ""]
    out += ["## Findings", ""]
    any_finding = False
    for title, items in report.findings.items():
        if items:
            any_finding = True
            out.append(f"- **{title}:**")
            out += [f"  - {i}" for i in items]
    if not any_finding:
        out.append("- nothing to report")
    out.append("")
    for t in report.tables:
        if t is not main:
            out += _table_md(t)
    out += ["## Plots", ""]
    for name, status in report.plots.items():
        title = plot_title(name)
        out += ([f"### {title}", "", f"![{title}]({name})", ""] if status == "written"
                else [f"### {title}", "", f"_{status}_", ""])
    if not report.plots:
        out += ["_plots were not drawn (--no-plots)_", ""]
    out += ["## Data", "", "`records.csv` and `records.json` beside this file hold one row per point × repeat.", ""]
    return "\n".join(out)
