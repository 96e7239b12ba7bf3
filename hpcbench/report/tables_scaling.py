"""Tables built from training points: intra-node, inter-node, placement, comm/compute, GPU utilisation."""

from __future__ import annotations

from typing import Any

from hpcbench.figures.aggregate import CI_BASES, Agg
from hpcbench.figures.baseline import BaselineResult, scaling_label, series_key
from hpcbench.report.fmt import clip, interval, ms, num, pct, pct_interval, pm0
from hpcbench.report.names import settings_column, unit
from hpcbench.tabular import Table

GPU_UTIL_WARN = 80.0  # percent; vendor tuning guides ask for 80-90% and more

SCALING_HEADERS = ["framework", "backend", "model", "scaling", "servers", "{unit}/server", "runs (CI over)",
                   "step ms ± 95% CI", "samples/s (95% CI)", "speedup (95% CI)", "efficiency (95% CI)", "baseline",
                   "state", "reason"]
RATIO_CI = ("speedup and efficiency (95% CI): from the point's and the baseline's throughput intervals (the "
            "half-widths of their logarithms added in quadrature); a point in a pooled baseline is not independent "
            "of it, so its interval is a little wide")


def _q(v: Any) -> Any:
    return "?" if v is None else v


def order(a: Agg) -> tuple[Any, ...]:
    return (str(a.framework), str(a.backend), str(a.model), str(a.scaling), a.batch_size or 0, a.apart,
            a.world_size or 0, a.nodes or 0, a.label)


def train(aggs: list[Agg]) -> list[Agg]:
    """The training points of the study, in table order (a log with no measurement is not one)."""
    return sorted((a for a in aggs if a.kind == "train" and a.measures), key=order)


def servers(a: Agg) -> str:
    """Servers are distinct hosts; a point that asked Slurm for more nodes than it got hosts says so."""
    if a.one_host_posing:
        return f"{len(a.hosts)} host ({a.nodes} Slurm nodes on {', '.join(a.hosts)})"
    return str(_q(a.servers))


def _scaling_row(a: Agg) -> list[Any]:
    basis = {"runs": "runs", "steps": "steps", "horovod": "Horovod ±"}.get(a.ci_basis or "", "—")
    return [a.framework, a.backend, a.model, scaling_label(a), servers(a), _q(a.ranks_per_node),
            f"{a.n_ok}/{len(a.samples)} ({basis})", pm0(ms(a.step_time_s), ms(a.step_time_ci95_s)),
            interval(a.throughput, a.throughput_lo, a.throughput_hi, 1), interval(a.speedup, a.speedup_lo, a.speedup_hi),
            pct_interval(a.efficiency, a.efficiency_lo, a.efficiency_hi),
            a.baseline or "—", a.state, clip(a.reason, 70)]


def _table(name: str, title: str, heads: list[str], points: list[Agg], empty: str) -> Table:
    heads, rows = list(heads), [_scaling_row(a) for a in points]
    settings_column(heads, rows, points, 4)  # after "scaling", when other parameters or axes vary
    return Table(name, title, heads, rows, empty=empty)


def disagreement(group: list[Agg]) -> str:
    """Baselines of one unit of work that differ beyond their noise (figures.baseline.disagreements), said once."""
    shown = "; ".join(f"{a.name} {interval(a.throughput, a.throughput_lo, a.throughput_hi, 0)}" for a in group)
    return (f"warning: 1-rank runs of the same work disagree beyond their noise (their 95% intervals do not overlap): "
            f"{shown} samples/s. They compute the same with no communication, so the gap is the machine or the setup "
            "(binding, threads, other load), not the backend, and any speedup against one of them is off by it; "
            "look at what differs between their runs (hpcbench explain), and repeat them ([sweep] repeats)")


def baseline_notes(base: BaselineResult) -> list[str]:
    """What the scaling tables say of their baseline: which kind, each shared one with its members and value, the
    intervals, and any disagreement."""
    kind = ("baseline: one per unit of work, shared by every framework and backend" if base.mode == "auto" else
            f"baseline ({base.mode}): {base.description}")
    shared = [f"shared baseline of {b.agg.model} {scaling_label(b.agg)}" + (f" ({b.members[0].apart})" if b.members[0].apart else "")
              + f": {b.agg.n_ok} runs at 1 rank of {', '.join(sorted({f'{m.framework}-{m.backend}' for m in b.members}))}"
              f" pooled: {interval(b.agg.throughput, b.agg.throughput_lo, b.agg.throughput_hi, 1)} samples/s"
              for b in base.shared]
    return [kind, *shared, RATIO_CI, *(disagreement(g) for g in base.disagree), *base.missing]


def intra_inter(aggs: list[Agg]) -> tuple[Table, Table]:
    rows = train(aggs)
    heads = [h.format(unit=unit(rows)) for h in SCALING_HEADERS]
    one = [a for a in rows if a.servers in (1, None)]
    many = [a for a in rows if a.servers not in (1, None)]
    intra = _table("intra", "Intra-node scaling (one server)", heads, one, "no single-server training points")
    inter = _table("inter", "Inter-node scaling (several servers)", heads, many, "no multi-server training points")
    if any(a.servers is None for a in rows):
        intra.notes.append("servers '?': the log does not show its hosts; such points are listed here")
    posing = [a.label for a in one if a.one_host_posing]
    if posing:
        intra.notes.append(f"{len(posing)} point(s) asked Slurm for several nodes but ran on one host, so they are "
                           f"not inter-node measurements and are listed here: {', '.join(posing[:6])}")
    for t, points in ((intra, one), (inter, many)):
        t.notes += [f"CI over {k}: {CI_BASES[k]}" for k in CI_BASES if any(a.ci_basis == k for a in points)]
    return intra, inter


def placement(aggs: list[Agg]) -> Table:
    """The same total ranks spread over servers in different ways (1x4, 2x2, 4x1)."""
    groups: dict[tuple[Any, ...], list[Agg]] = {}
    for a in train(aggs):
        if a.world_size:
            groups.setdefault((*series_key(a), a.world_size), []).append(a)
    rows, shown = [], []
    for group in groups.values():
        if len({a.layout for a in group}) < 2:
            continue
        best = max((a.throughput for a in group if a.throughput), default=None)
        for a in sorted(group, key=lambda a: a.nodes or 0):
            rel = a.throughput / best if (best and a.throughput) else None
            shown.append(a)
            rows.append([a.framework, a.backend, a.model, a.world_size, f"{servers(a)}×{_q(a.ranks_per_node)}",
                         interval(a.throughput, a.throughput_lo, a.throughput_hi, 1),
                         pm0(ms(a.step_time_s), ms(a.step_time_ci95_s)),
                         pct(rel), a.state])
    heads = ["framework", "backend", "model", "total ranks", "servers × ranks", "samples/s (95% CI)",
             "step ms ± 95% CI", "vs best layout", "state"]
    settings_column(heads, rows, shown, 3)
    return Table("placement", "Placement: the same total ranks spread differently (servers × ranks per server)",
                 heads, rows, empty="no total rank count was measured in more than one layout")


def comm_compute(aggs: list[Agg]) -> Table:
    rows = []
    methods = {a.comm_method for a in train(aggs) if a.ok and a.comm_method}
    for a in train(aggs):
        if not a.ok:
            continue
        comm = "not measured"
        if a.comm_time_s is not None:
            comm = pm0(ms(a.comm_time_s), ms(a.comm_time_ci95_s)) + (" (within noise)" if a.comm_within_noise else "")
        rows.append([a.label, a.framework, num(ms(a.step_time_s)), num(ms(a.compute_time_s)) if a.compute_time_s
                     is not None else "not measured", comm, pct(a.comm_fraction)])
    t = Table("comm", "Communication / compute breakdown per point",
              ["point", "framework", "step ms", "compute ms", "communication ms ± 95% CI", "communication share"],
              rows, empty="no measured training points")
    t.notes += [f"measured by: {m}" for m in sorted(methods)]
    if any(a.comm_within_noise for a in train(aggs)):
        t.notes.append("within noise: the communication time's 95% CI (the step's and the compute-only steps' "
                       "CIs combined, or across repeats) reaches 0, so this point's split says nothing; "
                       "run more steps or repeats")
    return t


def gpu_util(aggs: list[Agg]) -> tuple[Table, list[str]]:
    rows, warnings, shown = [], [], []
    for a in sorted(aggs, key=order):
        if a.gpu_util_mean is None:
            continue
        shown.append(a)
        low = a.gpu_util_mean < GPU_UTIL_WARN
        verdict = f"warning: below {GPU_UTIL_WARN:.0f}%" if low else "ok"
        if low:
            warnings.append(f"{a.label}: GPU utilisation {a.gpu_util_mean:.0f}% (min {num(a.gpu_util_min, 0)}%) is "
                            f"below {GPU_UTIL_WARN:.0f}%: the input pipeline or communication is starving the GPU")
        rows.append([a.framework, a.backend, a.model, a.layout, num(a.gpu_util_mean, 1), num(a.gpu_util_min, 1),
                     sum(s.gpu_samples or 0 for s in a.samples), verdict])
    reasons = sorted({s.gpu_reason for a in aggs for s in a.samples if s.gpu_reason})
    heads = ["framework", "backend", "model", "servers×ranks", "mean %", "min %", "samples", "check"]
    settings_column(heads, rows, shown, 3)
    t = Table("gpu", "GPU utilisation per point (sampled during the timed steps)", heads, rows,
              empty="not sampled" + (f": {'; '.join(reasons[:3])}" if reasons else " (no GPU points)"))
    return t, warnings
