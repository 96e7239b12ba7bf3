"""Allreduce bandwidth: message size x backend, busbw and algbw as nccl-tests defines them."""

from __future__ import annotations

from hpcbench.report.aggregate import Agg, mean
from hpcbench.report.fmt import clip, num, size
from hpcbench.tabular import Table


def series_label(a: Agg) -> str:
    if a.framework == "nccl-tests":
        return f"{a.label} ({a.model})"
    return f"{a.framework}-{a.backend} {a.layout}"


def curves(aggs: list[Agg]) -> dict[str, dict[int, tuple[float, float]]]:
    """series -> size -> (busbw, algbw) in GB/s, averaged over repeats."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for a in sorted((a for a in aggs if a.ok and any(s.allreduce for s in a.samples)), key=series_label):
        by_size: dict[int, list[tuple[float, float]]] = {}
        for s in a.samples:
            for r in s.allreduce:
                by_size.setdefault(r.size_bytes, []).append((r.busbw_gbps, r.algbw_gbps))
        out[series_label(a)] = {k: (mean([b for b, _ in v]), mean([g for _, g in v])) for k, v in sorted(by_size.items())}
    return out


def allreduce(aggs: list[Agg]) -> Table:
    data = curves(aggs)
    sizes = sorted({k for c in data.values() for k in c})
    rows = [[size(n), *(f"{num(c[n][0])} ({num(c[n][1])})" if n in c else "—" for c in data.values())]
            for n in sizes]
    t = Table("allreduce", "Allreduce bandwidth: busbw (algbw), GB/s",
              ["message size", *data.keys()], rows, empty="no allreduce points")
    wrong = sorted({a.label for a in aggs for s in a.samples for r in s.allreduce if r.wrong > 0})
    if rows:
        t.notes.append("algbw = bytes / time; busbw = algbw × 2(n−1)/n (nccl-tests' definitions); "
                       "out-of-place figures for nccl-tests logs")
    if wrong:
        t.notes.append(f"wrong results (elements that differ from the expected sum) in: {', '.join(wrong)}")
    # a failed allreduce point has no column to be in: it is said here, never dropped
    t.notes += [f"no data: {a.name}: {a.state}" + (f": {clip(a.reason, 120)}" if a.reason else "")
                for a in aggs if a.kind != "train" and not a.ok]
    return t
