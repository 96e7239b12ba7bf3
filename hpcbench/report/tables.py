"""Text tables (tabulate) and CSV, for the plan and the summary alike."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 1000 else f"{v:.0f}"
    return v


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], headers: Sequence[str] | None = None,
                 fmt: str = "table") -> str:
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in columns])
        return buf.getvalue()
    from tabulate import tabulate

    return tabulate([[_cell(r.get(c)) for c in columns] for r in rows], headers=list(headers or columns),
                    tablefmt="simple", disable_numparse=True)
