"""Tables built from training points: intra-node, inter-node, placement, comm/compute, GPU utilisation."""

from __future__ import annotations

from typing import Any

from hpcbench.report.aggregate import Agg
from hpcbench.report.baseline import scaling_label, series_key
from hpcbench.report.fmt import clip, num, pct, pm
from hpcbench.tabular import Table

GPU_UTIL_WARN = 80.0  # percent; vendor tuning guides ask for 80-90% and more

SCALING_HEADERS = ["framework", "backend", "model", "scaling", "servers", "GPUs (ranks)/server", "repeats",
                   "step ms ± 95% CI", "samples/s ± 95% CI", "speedup", "efficiency", "baseline", "state", "reason"]


def _q(v: Any) -> Any:
    return "?" if v is None else v


def order(a: Agg) -> tuple[Any, ...]:
    return (str(a.framework), str(a.backend), str(a.model), str(a.scaling), a.batch_size or 0,
            a.world_size or 0, a.nodes or 0, a.label)


def train(aggs: list[Agg]) -> list[Agg]:
    return sorted((a for a in aggs if a.kind == "train"), key=order)


def _scaling_row(a: Agg) -> list[Any]:
    ms = (lambda v: None if v is None else v * 1e3)
    return [a.framework, a.backend, a.model, scaling_label(a), _q(a.nodes), _q(a.ranks_per_node),
            f"{a.n_ok}/{len(a.samples)}", pm(ms(a.step_time_s), ms(a.step_time_ci95_s)),
            pm(a.throughput, a.throughput_ci95, 1), num(a.speedup), pct(a.efficiency), a.baseline or "—",
            a.state, clip(a.reason, 70)]


def intra_inter(aggs: list[Agg]) -> tuple[Table, Table]:
    rows = train(aggs)
    intra = Table("intra", "Intra-node scaling (one server)", SCALING_HEADERS,
                  [_scaling_row(a) for a in rows if a.nodes in (1, None)],
                  empty="no single-server training points")
    inter = Table("inter", "Inter-node scaling (several servers)", SCALING_HEADERS,
                  [_scaling_row(a) for a in rows if a.nodes is not None and a.nodes > 1],
                  empty="no multi-server training points")
    if any(a.nodes is None for a in rows):
        intra.notes.append("servers '?': the log does not show its hosts; such points are listed here")
    return intra, inter


def placement(aggs: list[Agg]) -> Table:
    """The same total ranks spread over servers in different ways (1x4, 2x2, 4x1)."""
    groups: dict[tuple[Any, ...], list[Agg]] = {}
    for a in train(aggs):
        if a.world_size:
            groups.setdefault((*series_key(a), a.world_size), []).append(a)
    rows = []
    for group in groups.values():
        if len({a.layout for a in group}) < 2:
            continue
        best = max((a.throughput for a in group if a.throughput), default=None)
        for a in sorted(group, key=lambda a: a.nodes or 0):
            rel = a.throughput / best if (best and a.throughput) else None
            rows.append([a.framework, a.backend, a.model, a.world_size, f"{_q(a.nodes)}×{_q(a.ranks_per_node)}",
                         pm(a.throughput, a.throughput_ci95, 1),
                         pm(None if a.step_time_s is None else a.step_time_s * 1e3,
                            None if a.step_time_ci95_s is None else a.step_time_ci95_s * 1e3),
                         pct(rel), a.state])
    return Table("placement", "Placement: the same total ranks spread differently (servers × ranks per server)",
                 ["framework", "backend", "model", "total ranks", "servers × ranks", "samples/s ± 95% CI",
                  "step ms ± 95% CI", "vs best layout", "state"], rows,
                 empty="no total rank count was measured in more than one layout")


def comm_compute(aggs: list[Agg]) -> Table:
    rows = []
    methods = set()
    noisy = False
    for a in train(aggs):
        if not a.ok:
            continue
        if a.comm_method:
            methods.add(a.comm_method)
        ms = (lambda v: None if v is None else num(v * 1e3))
        comm = "not measured"
        if a.comm_time_s is not None:
            comm = pm(a.comm_time_s * 1e3, None if a.comm_time_ci95_s is None else a.comm_time_ci95_s * 1e3)
            if a.comm_time_ci95_s is not None and a.comm_time_s - a.comm_time_ci95_s <= 0 < a.comm_time_ci95_s:
                comm += " (within noise)"
                noisy = True
        rows.append([a.label, a.framework, ms(a.step_time_s), ms(a.compute_time_s) or "not measured",
                     comm, pct(a.comm_fraction)])
    t = Table("comm", "Communication / compute breakdown per point",
              ["point", "framework", "step ms", "compute ms", "communication ms ± 95% CI", "communication share"],
              rows, empty="no measured training points")
    t.notes += [f"measured by: {m}" for m in sorted(methods)]
    if noisy:
        t.notes.append("within noise: the communication time's 95% CI (the step's and the compute-only steps' "
                       "CIs combined, or across repeats) reaches 0, so this point's split says nothing; "
                       "run more steps or repeats")
    return t


def gpu_util(aggs: list[Agg]) -> tuple[Table, list[str]]:
    rows, warnings = [], []
    for a in sorted(aggs, key=order):
        if a.gpu_util_mean is None:
            continue
        low = a.gpu_util_mean < GPU_UTIL_WARN
        verdict = f"warning: below {GPU_UTIL_WARN:.0f}%" if low else "ok"
        if low:
            warnings.append(f"{a.label}: GPU utilisation {a.gpu_util_mean:.0f}% (min {num(a.gpu_util_min, 0)}%) is "
                            f"below {GPU_UTIL_WARN:.0f}%: the input pipeline or communication is starving the GPU")
        rows.append([a.framework, a.backend, a.model, a.layout, num(a.gpu_util_mean, 1), num(a.gpu_util_min, 1),
                     sum(s.gpu_samples or 0 for s in a.samples), verdict])
    reasons = sorted({s.gpu_reason for a in aggs for s in a.samples if s.gpu_reason})
    t = Table("gpu", "GPU utilisation per point (sampled during the timed steps)",
              ["framework", "backend", "model", "servers×ranks", "mean %", "min %", "samples", "check"], rows,
              empty="not sampled" + (f": {'; '.join(reasons[:3])}" if reasons else " (no GPU points)"))
    return t, warnings
