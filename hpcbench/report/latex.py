"""`summarize --format latex`: the report's tables, notes and findings as a LaTeX fragment that compiles
as it is (pdflatex, no package needed), to \\input into a lab report.

Every line is LaTeX: titles are starred subsections, notes and findings are itemize lists, and the
few non-ASCII symbols the report uses are written as LaTeX commands (pdflatex's utf8 input knows
neither − nor ∞).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcbench.tabular import Table

if TYPE_CHECKING:
    from hpcbench.report.summarize import Report

_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_SYMBOLS = {"±": r"\ensuremath{\pm}", "×": r"\ensuremath{\times}", "−": "-", "∞": r"\ensuremath{\infty}",
            "—": "---", "–": "--", "…": r"\ldots{}", "→": r"\ensuremath{\rightarrow}", "≤": r"\ensuremath{\leq}",
            "≥": r"\ensuremath{\geq}", "µ": r"\ensuremath{\mu}", "·": r"\ensuremath{\cdot}"}


def symbols(text: str) -> str:
    """The report's non-ASCII symbols as LaTeX; anything else outside ASCII becomes '?', never an error."""
    text = "".join(_SYMBOLS.get(ch, ch) for ch in text)
    return text.encode("ascii", "replace").decode("ascii")


def escape(text: str) -> str:
    return symbols("".join(_SPECIAL.get(ch, ch) for ch in str(text)))


def _items(items: list[str], indent: str = "") -> list[str]:
    return [f"{indent}\\begin{{itemize}}", *(f"{indent}  \\item {escape(i)}" for i in items), f"{indent}\\end{{itemize}}"]


def _table(t: Table) -> list[str]:
    out = [f"\\subsection*{{{escape(t.title)}}}"]
    # tabulate escapes the cells itself; the symbols are mapped after it.
    out.append(symbols(t.render("latex")) if t.rows else f"\\emph{{{escape(t.empty)}}}")
    if t.notes:
        out += _items(t.notes)
    return out


def latex_text(report: Report) -> str:
    out = ["% hpcbench scaling report: \\input this into any LaTeX document (no package needed)"]
    if report.partial:
        out.append(f"\\textbf{{{escape(report.partial_note())}}}\\par")
    out.append(f"\\noindent Baseline ({escape(report.baseline.mode)}): {escape(report.baseline.description)}.\\par")
    for t in report.tables:
        out += _table(t)
    out.append("\\subsection*{Findings}")
    found = [(title, items) for title, items in report.findings.items() if items]
    if not found:
        out.append("Nothing to report.")
    else:
        out.append("\\begin{itemize}")
        for title, items in found:
            out.append(f"  \\item {escape(title)}:")
            out += _items(items, "    ")
        out.append("\\end{itemize}")
    return "\n".join(out) + "\n"
