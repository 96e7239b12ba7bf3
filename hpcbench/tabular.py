"""Text tables (tabulate) and CSV: the plan, parse, status and the report all print through here."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# --format name -> tabulate's table format
TABULATE_FORMATS = {"table": "simple", "markdown": "pipe", "github": "github", "latex": "latex"}  # plain \hline rules: compiles with texlive-latex-base alone


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 1000 else f"{v:.0f}"
    return v


def to_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(["" if v is None else v for v in r] for r in rows)
    return buf.getvalue()


def aligned(headers: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table") -> str:
    """tabulate's "simple" and "pipe"/"github" layouts for cells taken as text; several times faster than
    tabulate on report-sized tables (thousands of rows), which it is called for twice per summarize."""
    if fmt not in ("table", "markdown", "github"):
        from tabulate import tabulate

        return tabulate([[_cell(v) for v in r] for r in rows], headers=list(headers),
                        tablefmt=TABULATE_FORMATS.get(fmt, fmt), disable_numparse=True)
    pipe = fmt != "table"
    text = [[str(_cell(v)).replace("\n", " ") for v in r] for r in rows]
    heads = [str(h) for h in headers]
    if pipe:
        text = [[c.replace("|", "\\|") for c in r] for r in text]
        heads = [h.replace("|", "\\|") for h in heads]
    widths = [max([len(h), *(len(r[i]) for r in text)]) for i, h in enumerate(heads)]
    if pipe:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
        rule = "|" + "|".join(":" + "-" * (w + 1) for w in widths) + "|"
    else:
        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
        rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(heads), rule, *(line(r) for r in text)])


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], headers: Sequence[str] | None = None,
                 fmt: str = "table") -> str:
    if fmt == "csv":
        return to_csv(columns, [[r.get(c) for c in columns] for r in rows])
    return aligned(list(headers or columns), [[r.get(c) for c in columns] for r in rows], fmt)


@dataclass
class Table:
    """One section of the report: a titled table of strings, with notes said under it."""

    key: str
    title: str
    headers: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    empty: str = "nothing to show"  # what the section says when it has no rows

    def render(self, fmt: str = "table") -> str:
        if fmt == "csv":
            return to_csv(self.headers, self.rows)
        if not self.rows:
            return f"({self.empty})"
        return aligned(self.headers, self.rows, fmt)
