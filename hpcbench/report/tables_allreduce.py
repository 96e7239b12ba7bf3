"""Allreduce bandwidth: message size x point, busbw and algbw as nccl-tests defines them."""

from __future__ import annotations

from typing import Any

from hpcbench.report.aggregate import Agg, mean
from hpcbench.report.fmt import clip, num, size
from hpcbench.report.names import names_apart
from hpcbench.tabular import Table

Curve = dict[int, tuple[float, float, float]]  # size -> (busbw GB/s, algbw GB/s, time us), averaged over repeats


def curves(aggs: list[Agg]) -> list[tuple[str, Agg, Curve]]:
    """(name, point, curve) for every measured communication point, named by what it is."""
    measured = [a for a in aggs if a.ok and any(s.allreduce for s in a.samples)]
    names = names_apart(measured)
    out = []
    for a in sorted(measured, key=lambda a: names[id(a)]):
        by_size: dict[int, list[tuple[float, float, float]]] = {}
        for s in a.samples:
            for r in s.allreduce:
                by_size.setdefault(r.size_bytes, []).append((r.busbw_gbps, r.algbw_gbps, r.time_us))
        curve = {k: tuple(mean([x[i] for x in v]) for i in range(3)) for k, v in sorted(by_size.items())}
        out.append((names[id(a)], a, curve))
    return out  # type: ignore[return-value]


def _of_peak(curve: Curve, peak: Any) -> str:
    """The largest size's busbw against the peak of the slowest link the traffic crosses."""
    top = curve[max(curve)][0] if curve else None
    if peak is None or top is None:
        return "peak unknown"
    return f"{top / peak.gbps:.0%} of {peak.gbps:g} GB/s"


def allreduce(aggs: list[Agg], peaks: dict[int, tuple[Any, str]] | None = None) -> Table:
    data = curves(aggs)
    peaks = peaks or {}
    sizes = sorted({k for _, _, c in data for k in c})
    rows = [[size(n), *(f"{num(c[n][0])} ({num(c[n][1])})" if n in c else "—" for _, _, c in data)]
            for n in sizes]
    if rows:  # speed of light: where the link is known, how close the largest message came to it
        rows.append(["largest size vs link peak", *(_of_peak(c, peaks.get(id(a), (None, ""))[0]) for _, a, c in data)])
    t = Table("allreduce", "Allreduce bandwidth: busbw (algbw), GB/s",
              ["message size", *(name for name, _, _ in data)], rows, empty="no allreduce points")
    wrong = sorted({a.label for a in aggs for s in a.samples for r in s.allreduce if r.wrong > 0})
    if rows:
        t.notes.append("algbw = bytes / time; busbw = algbw × 2(n−1)/n (nccl-tests' definitions); "
                       "out-of-place figures for nccl-tests logs")
    if wrong:
        t.notes.append(f"wrong results (elements that differ from the expected sum) in: {', '.join(wrong)}")
    for name, a, _ in data:
        peak, why = peaks.get(id(a), (None, ""))
        t.notes.append(f"link peak of {name}: " + (f"{peak.gbps:g} GB/s, {peak.link} ({peak.source})" if peak
                                                     else f"unknown: {why}" if why else "not looked up"))
    # a failed allreduce point has no column to be in: it is said here, never dropped
    t.notes += [f"no data: {a.name}: {a.state}" + (f": {clip(a.reason, 120)}" if a.reason else "")
                for a in aggs if a.kind != "train" and not a.ok and a.measures]
    return t
