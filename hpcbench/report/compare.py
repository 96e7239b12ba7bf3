"""`summarize --compare OLD NEW`: ratios between two runs (or two piles of logs), point by point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcbench.plan.fields import POINT_KEY
from hpcbench.report.aggregate import Agg
from hpcbench.report.baseline import scaling_label
from hpcbench.report.fmt import num
from hpcbench.report.tables_allreduce import curves
from hpcbench.tabular import Table


def _key(a: Agg) -> tuple[Any, ...]:
    # the cluster is left out on purpose: comparing one cluster with another is a use of --compare
    return (*(getattr(a, n) for n in POINT_KEY), a.world_size)


def _ratio(new: float | None, old: float | None) -> str:
    return f"{new / old:.3f}" if new and old else "—"


def _peak(a: Agg) -> float | None:
    bw = [b for c in curves([a]).values() for b, _ in c.values()]
    return max(bw) if bw else None


def compare(old: list[Agg], new: list[Agg]) -> Table:
    olds = {_key(a): a for a in old}
    news = {_key(a): a for a in new}
    rows = []
    for k in sorted(set(olds) | set(news), key=lambda k: tuple(str(x) for x in k)):
        o, n = olds.get(k), news.get(k)
        a = n or o
        where = "both" if (o and n) else ("only in OLD" if o else "only in NEW")
        if a.kind == "train":
            ms = (lambda x: None if x is None or x.step_time_s is None else x.step_time_s * 1e3)
            thr = (lambda x: x.throughput if x else None)
            rows.append([a.framework, a.backend, a.model, scaling_label(a), a.layout, "samples/s", num(thr(o), 1),
                         num(thr(n), 1), _ratio(thr(n), thr(o)), f"{num(ms(o))} → {num(ms(n))}",
                         _ratio(ms(n), ms(o)), where,
                         " / ".join(x.state for x in (o, n) if x is not None)])
        else:
            po, pn = (_peak(o) if o else None), (_peak(n) if n else None)
            rows.append([a.framework, a.backend, a.model, a.kind, a.layout, "peak busbw GB/s", num(po), num(pn),
                         _ratio(pn, po), "—", "—", where, " / ".join(x.state for x in (o, n) if x is not None)])
    return Table("compare", "Comparison NEW vs OLD (ratio = NEW / OLD)",
                 ["framework", "backend", "model", "scaling", "servers×ranks", "metric", "OLD", "NEW",
                  "ratio", "step ms OLD → NEW", "step ratio", "in", "state OLD / NEW"], rows,
                 empty="neither side has points")


def compare_paths(old: str, new: str, fmt: str, cluster: str | None = None, out: Path | None = None) -> str:
    """`summarize --compare OLD NEW`: the table in ``fmt``; with ``out``, compare.md and compare.csv there too."""
    from hpcbench.report.aggregate import aggregate
    from hpcbench.report.inputs import load
    from hpcbench.rundir import atomic_write_text

    table = compare(*(aggregate(load([p], cluster).samples) for p in (old, new)))
    fmt = "github" if fmt == "markdown" else fmt
    text = table.render("csv" if fmt == "json" else fmt)
    if out is not None:
        atomic_write_text(out / "compare.md", f"# {table.title}\n\nOLD: `{old}`  \nNEW: `{new}`\n\n"
                          f"{table.render('github')}\n")
        atomic_write_text(out / "compare.csv", table.render("csv"))
    return f"OLD: {old}\nNEW: {new}\n{text}"
