"""Communication bandwidth: one table per collective, message size x point, busbw and algbw as nccl-tests
defines them for that collective. Collectives are never averaged or drawn together: a busbw means something
else for each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcbench.collectives import TABLE
from hpcbench.figures.aggregate import Agg, mean, point_key
from hpcbench.plan.fields import BY_NAME
from hpcbench.report.fmt import clip, duration_us, num, size
from hpcbench.report.names import names_apart, point_name
from hpcbench.tabular import Table
from hpcbench.vocab import COLLECTIVES, UNSUPPORTED

if TYPE_CHECKING:  # explain is imported when a report is made
    from hpcbench.explain.links import Peak

Curve = dict[int, tuple[float, float, float]]  # size -> (busbw GB/s, algbw GB/s, time us), averaged over repeats
HEADING = "busbw (algbw) GB/s, time per operation"  # each cell: "0.92 (0.91), 1.14 ms"
DEFAULT: str = BY_NAME["collective"].default  # what records and logs that name no collective measured
# a point (the key its repeats share: aggregate.point_key) -> (its slowest link's peak or None, why it is not known)
Peaks = dict[tuple[Any, ...], "tuple[Peak | None, str]"]


def collective_of(a: Any) -> str:
    """The collective a communication point measured (the default one for records and logs that name none)."""
    return a.collective or DEFAULT


def present(aggs: list[Agg]) -> list[str]:
    """The collectives the communication points measured (or tried to), in nccl-tests' order."""
    found = {collective_of(a) for a in aggs if a.kind != "train" and a.measures}
    return [c for c in COLLECTIVES if c in found]


def without_figures(aggs: list[Agg], collective: str) -> list[Agg]:
    """The points of ``collective`` that have no figures (failed, unsupported): said in its table and plot."""
    return [a for a in aggs if a.kind != "train" and a.measures and collective_of(a) == collective and not a.ok]


def curves(aggs: list[Agg], collective: str | None = None) -> list[tuple[str, Agg, Curve]]:
    """(name, point, curve) for every measured communication point (of ``collective``), named by what it is."""
    measured = [a for a in aggs if a.ok and any(s.allreduce for s in a.samples)
                and collective in (None, collective_of(a))]
    # in one collective's table or plot the collective tells nothing apart
    names = names_apart(measured, (lambda a: point_name(a, drop="collective")) if collective else point_name)
    out = []
    for a in sorted(measured, key=lambda a: names[id(a)]):
        by_size: dict[int, list[tuple[float, float, float]]] = {}
        for s in a.samples:
            for r in s.allreduce:
                by_size.setdefault(r.size_bytes, []).append((r.busbw_gbps, r.algbw_gbps, r.time_us))
        curve = {k: tuple(mean([x[i] for x in v]) for i in range(3)) for k, v in sorted(by_size.items())}
        out.append((names[id(a)], a, curve))
    return out  # type: ignore[return-value]


def peak_of(peaks: Peaks | None, a: Agg) -> tuple[Peak | None, str]:
    return (peaks or {}).get(point_key(a.first), (None, ""))


def _of_peak(curve: Curve, peak: Peak | None) -> str:
    """The largest size's busbw against the peak of the slowest link the traffic crosses."""
    from hpcbench.explain.links import of_peak

    return of_peak(curve[max(curve)][0] if curve else None, peak)


def collective_table(aggs: list[Agg], collective: str, peaks: Peaks | None = None) -> Table:
    data = curves(aggs, collective)
    sizes = sorted({k for _, _, c in data for k in c})
    rows = [[size(n), *(f"{num(c[n][0])} ({num(c[n][1])}), {duration_us(c[n][2])}" if n in c else "—"
                        for _, _, c in data)] for n in sizes]
    if rows:  # speed of light: where the link is known, how close the largest message came to it
        rows.append(["largest size vs link peak", *(_of_peak(c, peak_of(peaks, a)[0]) for _, a, c in data)])
    c = TABLE[collective]
    t = Table("allreduce" if collective == "all_reduce" else collective, f"{c.title} bandwidth: {HEADING}",
              ["message size", *(name for name, _, _ in data)], rows, empty=f"no {collective} points")
    wrong = sorted({a.label for _, a, _ in data for s in a.samples for r in s.allreduce
                    if r.wrong > 0 or (r.oop_wrong or 0) > 0})
    if rows:
        t.notes.append(f"algbw = bytes / time; busbw = algbw × {c.formula} (nccl-tests' definitions for "
                       f"{collective}); out-of-place figures for nccl-tests logs"
                       + (f"; size = {c.size}" if c.size else ""))
    if wrong:
        t.notes.append(f"wrong results (elements that differ from the exact result, in or out of place) in: "
                       f"{', '.join(wrong)} (see hpcbench explain)")
    for name, a, _ in data:
        peak, why = peak_of(peaks, a)
        t.notes.append(f"link peak of {name}: " + (f"{peak.gbps:g} GB/s, {peak.link} ({peak.source})" if peak
                                                     else f"unknown: {why}" if why else "not looked up"))
    # a point without figures has no column to be in: it is said here, never dropped
    t.notes += [f"unsupported: {a.name}: {a.reason}" if a.state == UNSUPPORTED else f"no data: {a.name}: {a.state}"
                + (f": {clip(a.reason, 120)}" if a.reason else "") for a in without_figures(aggs, collective)]
    return t


def collective_tables(aggs: list[Agg], peaks: Peaks | None = None) -> list[Table]:
    """One table per collective the run measured; the default one's table alone (empty) when it measured none."""
    return [collective_table(aggs, c, peaks) for c in present(aggs) or [DEFAULT]]
