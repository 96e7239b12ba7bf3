"""The headlines at the top of the report: best backend per scale, efficiency at the largest scale, suspicious
speedups, failed and unmeasured points, transport problems (the explain findings said once each)."""

from __future__ import annotations

from typing import Any, cast

from hpcbench.figures.aggregate import Agg
from hpcbench.report.fmt import clip, interval, pct, pct_interval
from hpcbench.stats import overlap
from hpcbench.report.names import unit
from hpcbench.vocab import ERROR, UNSUPPORTED, WARNING


def best_at_each_scale(aggs: list[Agg]) -> list[str]:
    """The fastest point at each model and total size, called best only where its 95% interval is clear of every
    other point's there: where they overlap, the order is noise, and the line says which points it cannot tell
    apart."""
    scales: dict[tuple[str | None, int], list[Agg]] = {}
    u = unit([a for a in aggs if a.kind == "train" and a.measures])
    for a in aggs:
        if a.kind == "train" and a.ok and a.throughput and a.world_size and a.measures:
            scales.setdefault((a.model, a.world_size), []).append(a)
    out = []
    for (model, world), points in sorted(scales.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        top = max(points, key=lambda a: cast(float, a.throughput))  # only measured ones are kept
        rivals = [b for b in points if b is not top]
        where = f"at {world} {u}, {model}"
        if not rivals:
            out.append(f"{where}: only {_shown(top)} was measured, nothing to compare")
            continue
        near = [b for b in rivals if overlap(top.throughput_lo, top.throughput_hi, b.throughput_lo, b.throughput_hi)]
        backends = len({f"{b.framework}-{b.backend}" for b in points})
        if not near:
            out.append(f"best {where}: {_shown(top)} (of {len(points)} points, {backends} backend(s); its 95% "
                       "interval is clear of every other's)")
        else:
            out.append(f"no best {where}: the fastest, {_shown(top)}, is within the noise of "
                       + ", ".join(_shown(b) for b in sorted(near, key=lambda b: -cast(float, b.throughput)))
                       + " (their 95% intervals overlap; more steps or repeats could tell them apart)")
    return out


def _shown(a: Agg) -> str:
    return f"{a.name} {interval(a.throughput, a.throughput_lo, a.throughput_hi, 0)} samples/s"


def efficiency_at_largest(aggs: list[Agg]) -> list[str]:
    series: dict[tuple[Any, ...], Agg] = {}
    for a in aggs:
        if a.kind == "train" and a.ok and a.efficiency is not None:
            k = (a.framework, a.backend, a.model, a.scaling, a.apart)  # apart: two env values are two series
            if k not in series or (a.world_size, a.throughput) > (series[k].world_size, series[k].throughput):
                series[k] = a
    return [f"efficiency at the largest scale, {a.framework}-{a.backend} {a.model} ({a.scaling} scaling): "
            f"{pct_interval(a.efficiency, a.efficiency_lo, a.efficiency_hi)} at {a.world_size} ranks ({a.name}), "
            f"speedup {interval(a.speedup, a.speedup_lo, a.speedup_hi)} vs {a.baseline}"
            for _, a in sorted(series.items(), key=lambda kv: tuple(str(x) for x in kv[0]))
            if (a.world_size or 0) > (a.base_world_size or 0)]


SUPERLINEAR = 1.1


def superlinear(aggs: list[Agg]) -> list[str]:
    """Efficiency well above 100% usually means the baseline is not comparable (another machine or setup). Only
    points larger than their baseline, and only where the interval's lower end is above the line: a 1-rank point
    against a shared baseline is the baselines' disagreement, said under "baselines"."""
    return [f"{a.name}: efficiency {pct_interval(a.efficiency, a.efficiency_lo, a.efficiency_hi)} against {a.baseline} "
            f"is above {pct(SUPERLINEAR)}: check that the baseline ran the same model on the same kind of GPU and "
            "software, or choose another with --baseline"
            for a in aggs if a.efficiency is not None and (a.world_size or 0) > (a.base_world_size or 0)
            and (a.efficiency_lo if a.efficiency_lo is not None else a.efficiency) > SUPERLINEAR]


def failed_points(aggs: list[Agg]) -> list[str]:
    bad = [a for a in aggs if a.n_ok < len(a.samples) and a.measures and a.state != UNSUPPORTED]
    return [f"{a.label}: {a.state}" + (f": {clip(a.reason, 120)}" if a.reason else "") for a in bad]


def unsupported(aggs: list[Agg]) -> list[str]:
    """Communication points whose library has no such collective: what the ranks recorded, once each."""
    return [f"{a.label}: {a.reason}" for a in aggs if a.state == UNSUPPORTED]


def not_measured(aggs: list[Agg]) -> list[str]:
    """Logs that hold no measurement (NCCL lines only): one line per reason, not a row each in the tables."""
    by_reason: dict[str, list[str]] = {}
    for a in aggs:
        if not a.measures:
            by_reason.setdefault(a.reason or "no measurement", []).append(a.label)
    return [f"{len(labels)} log(s), {why}: {', '.join(labels[:8])}{' …' if len(labels) > 8 else ''}"
            for why, labels in sorted(by_reason.items())]


def transport_problems(findings: list[Any]) -> list[str]:
    seen, out = set(), []
    for f in findings:
        if f.severity not in (ERROR, WARNING) or (f.rule, f.claim) in seen:
            continue
        seen.add((f.rule, f.claim))
        out.append(f"{f.severity}: {f.rule}: {clip(f.claim, 160)}" + (f" [{f.subject}]" if f.subject else "")
                   + (f" (fix: {f.fix})" if f.fix else ""))
    return out
