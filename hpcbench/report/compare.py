"""`summarize --compare OLD NEW`: two runs (or two piles of logs) point by point, with a verdict that
says whether a difference is more than noise, and what else differed between them.

The verdict is Welch's t test on the mean step time (each side's standard error from its own 95%
interval and degrees of freedom, as the report computed them): faster or slower at p < 0.05, else
within noise. Points are matched on what they measure (plan/fields.POINT_KEY) and on every other parameter
or env/[slurm] axis that varies within a side (steps as an axis: each steps value is its own point);
every other declared parameter (steps, warm-up, ...), environment variable or setting that differs between
the sides, and every software version the records name, is listed under the table, so a ratio is never
read without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from hpcbench.figures.aggregate import Agg, shown, varying
from hpcbench.figures.baseline import scaling_label
from hpcbench.figures.samples import axis_values
from hpcbench.plan.fields import BY_NAME, POINT_KEY
from hpcbench.report.fmt import num
from hpcbench.report.tables_collectives import curves
from hpcbench.stats import t975, welch
from hpcbench.tabular import Table

ALPHA = 0.05
HEADERS = ["framework", "backend", "model", "scaling", "servers×ranks", "metric", "OLD", "NEW", "ratio",
           "step ms OLD → NEW", "verdict (Welch, step time)", "in", "state OLD / NEW"]


def _key(a: Agg, keys: list[str]) -> tuple[Any, ...]:
    # the cluster is left out on purpose: comparing one cluster with another is a use of --compare
    values = axis_values(a)
    return (*(getattr(a, n) for n in POINT_KEY), a.world_size, *(values.get(k) for k in keys))


def _ratio(new: float | None, old: float | None) -> str:
    return f"{new / old:.3f}" if new and old else "—"


def _peak(a: Agg) -> float | None:
    bw = [v[0] for _, _, c in curves([a]) for v in c.values()]
    return max(bw) if bw else None


def _se(a: Agg) -> tuple[float, float] | None:
    """(standard error, degrees of freedom) of a point's mean step time, from its 95% interval."""
    if a.step_time_ci95_s is None or not a.ci_df or a.ci_df < 1:
        return None
    return a.step_time_ci95_s / t975(int(a.ci_df)), a.ci_df


def verdict(o: Agg, n: Agg) -> str:
    """faster / slower / within noise, with p; or why no test can be made."""
    so, sn = _se(o), _se(n)
    if o.step_time_s is None or n.step_time_s is None:
        return "—"
    if so is None or sn is None:
        return "no test: a side has no spread (one step, or a log's own ±)"
    _, _df, p = welch(n.step_time_s, sn[0], sn[1], o.step_time_s, so[0], so[1])
    if p >= ALPHA:
        return f"within noise (p = {p:.2g})"
    return f"{'faster' if n.step_time_s < o.step_time_s else 'slower'} (p = {p:.2g})"


def _row(o: Agg | None, n: Agg | None) -> list[Any]:
    a = cast(Agg, n or o)  # a row has one of the two
    where = "both" if (o and n) else ("only in OLD" if o else "only in NEW")
    states = " / ".join(x.state for x in (o, n) if x is not None)
    if a.kind != "train":
        po, pn = (_peak(o) if o else None), (_peak(n) if n else None)
        return [a.framework, a.backend, a.collective or a.model, a.kind, a.layout, "peak busbw GB/s", num(po), num(pn), _ratio(pn, po),
                "—", "no test: no spread measured", where, states]
    ms = (lambda x: None if x is None or x.step_time_s is None else x.step_time_s * 1e3)
    thr = (lambda x: x.throughput if x else None)
    return [a.framework, a.backend, a.model, scaling_label(a), a.layout, "samples/s", num(thr(o), 1), num(thr(n), 1),
            _ratio(thr(n), thr(o)), f"{num(ms(o))} → {num(ms(n))}", verdict(o, n) if o and n else "—", where, states]


def differences(pairs: list[tuple[Agg, Agg]], matched: tuple[str, ...] = ()) -> list[str]:
    """Every parameter, env/[slurm] axis and software version that differs between matched points, once each
    (``matched``: the keys points were matched on, which cannot differ)."""
    found: dict[str, set[str]] = {}
    for o, n in pairs:
        vo, vn = axis_values(o), axis_values(n)
        for name in dict.fromkeys((*vo, *vn)):
            if name not in matched and vo.get(name) != vn.get(name):
                what = f"parameter {name}" if name in BY_NAME else f"setting {name}"
                found.setdefault(what, set()).add(f"{vo.get(name)} → {vn.get(name)}")
        vo, vn = o.first.versions, n.first.versions
        for name in sorted(set(vo) | set(vn)):
            if vo.get(name) != vn.get(name):
                found.setdefault(f"{name} version", set()).add(f"{vo.get(name) or '?'} → {vn.get(name) or '?'}")
    return [f"differs: {what}: {', '.join(sorted(values))}" for what, values in sorted(found.items())]


def compare(old: list[Agg], new: list[Agg]) -> Table:
    old, new = [a for a in old if a.measures], [a for a in new if a.measures]
    # a parameter or axis that varies within a side tells its points apart: points are matched on it too
    axes = list(dict.fromkeys((*varying(old), *varying(new))))
    olds, news = {_key(a, axes): a for a in old}, {_key(a, axes): a for a in new}
    keys = sorted(set(olds) | set(news), key=lambda k: tuple(str(x) for x in k))
    heads, rows = list(HEADERS), [_row(olds.get(k), news.get(k)) for k in keys]
    if axes:
        heads.insert(4, "settings")
        for row, k in zip(rows, keys):
            row.insert(4, ", ".join(shown(a, v) for a, v in zip(axes, k[-len(axes):]) if v is not None) or "—")
    t = Table("compare", "Comparison NEW vs OLD (ratio = NEW / OLD)", heads, rows, empty="neither side has points")
    t.notes += differences([(olds[k], news[k]) for k in keys if k in olds and k in news], tuple(axes))
    t.notes.append(f"verdict: Welch's t test on the mean step time at p < {ALPHA}, each side's standard error "
                   "from its own 95% interval (over repeats, or over the timed steps when fewer than 3)")
    return t


def compare_paths(old: str, new: str, fmt: str, cluster: str | None = None, out: Path | None = None) -> str:
    """`summarize --compare OLD NEW`: the table in ``fmt``; with ``out``, compare.md and compare.csv there too."""
    from hpcbench.figures.aggregate import aggregate
    from hpcbench.files import atomic_write_text
    from hpcbench.figures.inputs import load

    table = compare(*(aggregate(load([p], cluster).samples) for p in (old, new)))
    fmt = "github" if fmt == "markdown" else fmt
    text = table.render("csv" if fmt == "json" else fmt)
    notes = "".join(f"note: {n}\n" for n in table.notes)
    if out is not None:
        md_notes = "".join(f"- {n}\n" for n in table.notes)
        atomic_write_text(out / "compare.md", f"# {table.title}\n\nOLD: `{old}`  \nNEW: `{new}`\n\n"
                          f"{table.render('github')}\n\n{md_notes}")
        atomic_write_text(out / "compare.csv", table.render("csv"))
    return f"OLD: {old}\nNEW: {new}\n{text}\n{notes}".rstrip()
