"""`summarize --format latex` and report.tex: the report's tables, notes, findings and plots as LaTeX a student
hands in as it is.

- ``latex_text``: a fragment to \\input into a lab report. It needs graphicx, longtable, array and lscape
  (all in texlive-latex-base), as its first line says.
- ``latex_document``: the fragment in a whole document (A4, 2 cm margins), written as report.tex beside the
  plots, so that ``pdflatex report.tex`` in the report folder compiles it.

Every table fits its page: its columns are ragged-right paragraph columns whose widths share the line in
proportion to their text, never narrower than their longest unbreakable word (labels and paths may break after
'-', '_', '/', '=' and ':'); a table whose words do not fit across a portrait page is set on a landscape page,
and a long one runs over several pages (longtable repeats the header). The few non-ASCII symbols the report uses
are written as LaTeX commands (pdflatex's utf8 input knows neither − nor ∞).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hpcbench.tabular import Table, _cell

if TYPE_CHECKING:
    from hpcbench.report.summarize import Report

PACKAGES = ("graphicx", "longtable", "array", "lscape")
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_SYMBOLS = {"±": r"\ensuremath{\pm}", "×": r"\ensuremath{\times}", "−": "-", "∞": r"\ensuremath{\infty}",
            "—": "---", "–": "--", "…": r"\ldots{}", "→": r"\ensuremath{\rightarrow}", "≤": r"\ensuremath{\leq}",
            "≥": r"\ensuremath{\geq}", "µ": r"\ensuremath{\mu}", "·": r"\ensuremath{\cdot}"}
BREAK_AFTER = "-_/=:–"  # where a long label or path in a table cell may break
_TOKENS = re.compile(rf"[^\s{re.escape(BREAK_AFTER)}]*[{re.escape(BREAK_AFTER)}]?")
# The page the widths are reckoned for: report.tex's A4 with 2 cm margins (483 pt across, 693 pt on its side),
# set in \scriptsize (7 pt), where a lowercase letter or digit is at most about 4 pt wide and a capital 6 pt.
PORTRAIT_PT, LANDSCAPE_PT, PAD_PT = 483.0, 693.0, 4.4
CHAR_PT, UPPER_PT, NARROW_PT = 4.0, 6.0, 2.6
BOLD = 1.2  # a bold character's width against a normal one's, at most
WANT_CHARS = 24  # a column asks for up to this many characters a line before its text wraps


def symbols(text: str) -> str:
    """The report's non-ASCII symbols as LaTeX; anything else outside ASCII becomes '?', never an error."""
    text = "".join(_SYMBOLS.get(ch, ch) for ch in text)
    return text.encode("ascii", "replace").decode("ascii")


def escape(text: str) -> str:
    return symbols("".join(_SPECIAL.get(ch, ch) for ch in str(text)))


def breakable(text: str) -> str:
    """Escaped, with a line break allowed after each of BREAK_AFTER: a path or a label never runs past the margin."""
    return "".join(escape(ch) + (r"\allowbreak{}" if ch in BREAK_AFTER else "") for ch in text)


def _items(items: list[str], indent: str = "") -> list[str]:
    # ragged right: justified lines with long paths in them could not stretch to the margin and ran past it
    return [f"{indent}\\begin{{itemize}}\\raggedright", *(f"{indent}  \\item {breakable(i)}" for i in items),
            f"{indent}\\end{{itemize}}"]


def _width(word: str) -> float:
    """A word's width (pt) in \\scriptsize roman, at most: capitals are wide, punctuation narrow."""
    return sum(UPPER_PT if c.isupper() else NARROW_PT if c in ".,;:()|'!" else CHAR_PT for c in word)


def _least(col: tuple[str, ...]) -> float:
    """The width (pt) of a column's longest unbreakable word; the header's (its first cell) is set in bold."""
    def longest(text: str) -> float:
        return max((_width(w) for w in _TOKENS.findall(text) if w), default=CHAR_PT)

    return max(longest(col[0]) * BOLD, *(longest(t) for t in col[1:]))


def _parts(cells: list[list[str]]) -> list[list[int]]:
    """The columns, split into tables that each fit a landscape page by their longest words; every part after the
    first repeats the first column, which names the row."""
    least = [_least(col) + PAD_PT for col in zip(*cells)]
    parts, part, used = [], [0], least[0]
    for i in range(1, len(least)):
        if used + least[i] > LANDSCAPE_PT and len(part) > 1:
            parts.append(part)
            part, used = [0], least[0]
        part.append(i)
        used += least[i]
    return [*parts, part]


def _wide(cells: list[list[str]]) -> bool:
    """Its words do not fit across a portrait page: the table is set on its side."""
    return sum(_least(c) + PAD_PT for c in zip(*cells)) > PORTRAIT_PT


def _longtable(cells: list[list[str]]) -> list[str]:
    """One longtable of ``cells`` (the header first): each column gets its longest word's width, and the rest of
    the line goes to the columns whose text would wrap, in proportion to how much more they ask for."""
    cols = list(zip(*cells))
    least = [_least(c) for c in cols]
    want = [max(lo, min(WANT_CHARS, max(len(t) for t in c)) * CHAR_PT) for lo, c in zip(least, cols)]
    n = len(cols)
    page = LANDSCAPE_PT if _wide(cells) else PORTRAIT_PT
    avail = page - n * PAD_PT
    extra = max(0.0, avail - sum(least))
    more = sum(w - lo for w, lo in zip(want, least))
    widths = [lo + (extra * (w - lo) / more if more else extra / n) for lo, w in zip(least, want)]
    room = rf"(\linewidth-{2 * n}\tabcolsep-{n + 1}\arrayrulewidth)"
    spec = "|".join(rf">{{\raggedright\arraybackslash}}p{{\dimexpr{room}*{int(w * 1000 / avail)}/1000\relax}}"
                    for w in widths)
    head = " & ".join(rf"\textbf{{{breakable(h)}}}" for h in cells[0]) + r" \\ \hline"
    body = [" & ".join(breakable(c) for c in row) + r" \\ \hline" for row in cells[1:]]
    table = [r"{\scriptsize\setlength{\tabcolsep}{2pt}", rf"\begin{{longtable}}{{|{spec}|}}", r"\hline", head,
             r"\endhead", *body, r"\end{longtable}}"]
    return table


def _table(t: Table) -> list[str]:
    """A section: title, table (in parts when too wide for one page; on its side when too wide for a portrait one)
    and notes."""
    out = [f"\\subsection*{{{escape(t.title)}}}"]
    if not t.rows:
        out.append(f"\\emph{{{escape(t.empty)}}}")
    cells = [[str(h) for h in t.headers]] + [[str(_cell(v)).replace("\n", " ") for v in r] for r in t.rows]
    parts = [[[row[i] for i in part] for row in cells] for part in _parts(cells)] if t.rows else []
    for n, part in enumerate(parts):
        if len(parts) > 1:
            out.append(f"\\noindent\\emph{{part {n + 1} of {len(parts)} (too wide for one page)}}\\par")
        out += _longtable(part)
    if t.notes:
        out += _items(t.notes)
    return [r"\begin{landscape}", *out, r"\end{landscape}"] if any(_wide(p) for p in parts) else out


def _figures(report: Report, folder: str) -> list[str]:
    """Each plot written, as a figure; ``folder`` is where the PNGs are, as the document will see it."""
    from hpcbench.report.markdown import plot_title

    written = [name for name, status in report.plots.items() if status == "written"]
    if not written:
        return []
    out = ["\\clearpage", "\\subsection*{Plots}"]  # the heading on the page of its figures, not alone below
    for name in written:
        out += [r"\begin{figure}[htbp]", r"\centering",
                rf"\includegraphics[width=\linewidth,height=0.42\textheight,keepaspectratio]{{{folder}{name}}}",
                rf"\caption{{{escape(plot_title(name))}}}", r"\end{figure}"]
    return out


def latex_text(report: Report, folder: str | None = None) -> str:
    """The report as a LaTeX fragment; ``folder`` (with its trailing '/') is where the document finds the plots:
    by default the report folder the plots were written into, as an absolute path."""
    if folder is None:
        folder = f"{report.out.resolve()}/" if report.out is not None else ""
    out = [f"% hpcbench scaling report: \\input this into a LaTeX document with \\usepackage{{{','.join(PACKAGES)}}}"]
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
        out.append("\\begin{itemize}\\raggedright")
        for title, items in found:
            out.append(f"  \\item {escape(title)}:")
            out += _items(items, "    ")
        out.append("\\end{itemize}")
    out += _figures(report, folder)
    return "\n".join(out) + "\n"


def latex_document(report: Report) -> str:
    """report.tex: the fragment in a whole document, its plots beside it."""
    head = [r"\documentclass[10pt]{article}", r"\usepackage[a4paper,margin=2cm]{geometry}",
            rf"\usepackage{{{','.join(PACKAGES)}}}", r"\begin{document}", r"\section*{hpcbench scaling report}"]
    return "\n".join(head) + "\n" + latex_text(report, folder="") + "\\end{document}\n"
