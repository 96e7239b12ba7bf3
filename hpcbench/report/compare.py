"""`summarize --compare OLD NEW`: ratios between two runs (or two piles of logs), point by point."""

from __future__ import annotations

from typing import Any

from hpcbench.report.aggregate import Agg
from hpcbench.report.baseline import scaling_label
from hpcbench.report.fmt import num
from hpcbench.report.tables import Table
from hpcbench.report.tables_allreduce import curves


def _key(a: Agg) -> tuple[Any, ...]:
    # the cluster is left out on purpose: comparing one cluster with another is a use of --compare
    return (a.kind, a.framework, a.backend, a.model, a.device, a.scaling, a.batch_size, a.global_batch_size,
            a.nodes, a.ranks_per_node, a.world_size)


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
