"""The headlines at the top of the report: best backend per scale, efficiency at the largest scale, suspicious
speedups, failed and unmeasured points, transport problems (the explain findings said once each)."""

from __future__ import annotations

from typing import Any, cast

from hpcbench.figures.aggregate import Agg
from hpcbench.report.fmt import clip, num, pct
from hpcbench.report.names import unit
from hpcbench.vocab import ERROR, UNSUPPORTED, WARNING


def best_at_each_scale(aggs: list[Agg]) -> list[str]:
    best: dict[tuple[str | None, int], Agg] = {}
    u = unit([a for a in aggs if a.kind == "train" and a.measures])
    for a in aggs:
        world = a.world_size
        if a.kind == "train" and a.ok and a.throughput and world and a.measures:
            k = (a.model, world)
            if k not in best or a.throughput > cast(float, best[k].throughput):  # only measured ones are kept
                best[k] = a
    out = []
    for (model, world), a in sorted(best.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        rivals = {f"{b.framework}-{b.backend}" for b in aggs if b.kind == "train" and b.ok and b.model == model
                  and b.world_size == world}
        vs = f" (of {len(rivals)} backends)" if len(rivals) > 1 else ""
        out.append(f"best at {world} {u}, {model}: {a.name} with "
                   f"{num(a.throughput, 1)} samples/s{vs}")
    return out


def efficiency_at_largest(aggs: list[Agg]) -> list[str]:
    series: dict[tuple[Any, ...], Agg] = {}
    for a in aggs:
        if a.kind == "train" and a.ok and a.efficiency is not None:
            k = (a.framework, a.backend, a.model, a.scaling, a.apart)  # apart: two env values are two series
            if k not in series or (a.world_size, a.throughput) > (series[k].world_size, series[k].throughput):
                series[k] = a
    return [f"efficiency at the largest scale, {a.framework}-{a.backend} {a.model} ({a.scaling} scaling): "
            f"{pct(a.efficiency)} at {a.world_size} ranks ({a.name}), speedup {num(a.speedup)} vs {a.baseline}"
            for _, a in sorted(series.items(), key=lambda kv: tuple(str(x) for x in kv[0]))
            if (a.world_size or 0) > (a.base_world_size or 0)]


SUPERLINEAR = 1.1


def superlinear(aggs: list[Agg]) -> list[str]:
    """Efficiency well above 100% usually means the baseline is not comparable (another machine or setup)."""
    return [f"{a.name}: efficiency {pct(a.efficiency)} against {a.baseline} is above {pct(SUPERLINEAR)}: check that the "
            "baseline ran the same model on the same kind of GPU and software, or choose another with --baseline"
            for a in aggs if a.efficiency is not None and a.efficiency > SUPERLINEAR]


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
