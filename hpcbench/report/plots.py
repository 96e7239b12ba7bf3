"""The four report plots (matplotlib, Agg, PNG). Each function returns its Figure so callers can read the data back.

matplotlib is imported here only, and only when a plot is drawn: planning and plain summaries never load it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcbench.report.aggregate import Agg
from hpcbench.report.tables_allreduce import curves

MANY = 6  # series beyond which the legend gets one "ideal" entry instead of one per series
MAX_BARS = 60  # a stacked bar per point stops being readable beyond this
FIGSIZE = (8.0, 5.0)
DPI = 100


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(aggs: list[Agg]) -> dict[str, list[Agg]]:
    out: dict[str, list[Agg]] = {}
    for a in aggs:
        if a.kind == "train" and a.ok and a.throughput and a.world_size:
            name = f"{a.framework}-{a.backend} {a.model} ({a.scaling})"
            out.setdefault(name, []).append(a)
    return {k: sorted(v, key=lambda a: (a.world_size, a.nodes or 0)) for k, v in sorted(out.items())}


def _best_per_size(points: list[Agg]) -> list[Agg]:
    """One point per total size: the best layout (the placement table shows the others)."""
    best: dict[int, Agg] = {}
    for a in points:
        if a.world_size not in best or a.throughput > best[a.world_size].throughput:
            best[a.world_size] = a
    return [best[k] for k in sorted(best)]


def scalability(aggs: list[Agg], baseline: str) -> Any:
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    series = _series(aggs)
    for n, (name, pts) in enumerate(series.items()):
        pts = _best_per_size(pts)
        line = ax.errorbar([a.world_size for a in pts], [a.throughput for a in pts],
                           yerr=[a.throughput_ci95 or 0.0 for a in pts], marker="o", capsize=3, label=name)
        base = next((a for a in pts if a.base_throughput), None)
        if base is not None:
            # ideal: the baseline's throughput times the number of ranks relative to the baseline's
            xs = [a.world_size for a in pts]
            # with many series, one legend entry says what dashed lines are
            label = f"ideal ({name})" if len(series) <= MANY else ("ideal (dashed, same colour)" if n == 0 else "_")
            ax.plot(xs, [base.base_throughput * x / base.base_world_size for x in xs], linestyle="--",
                    color=line[0].get_color(), alpha=0.6, label=label)
    _gpu_ticks(ax, aggs)
    ax.set(title=f"Scalability: throughput vs total GPUs (ranks); baseline: {baseline}",
           xlabel="total GPUs (ranks)", ylabel="throughput (samples/s)")
    ax.title.set_fontsize(10)
    _finish(ax)
    return fig


def speedup_efficiency(aggs: list[Agg], baseline: str) -> Any:
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.0, 4.5))
    top = 1
    for name, pts in _series(aggs).items():
        pts = [a for a in _best_per_size(pts) if a.speedup is not None]
        if not pts:
            continue
        xs = [a.world_size for a in pts]
        top = max(top, *xs)
        ax1.plot(xs, [a.speedup for a in pts], marker="o", label=name)
        ax2.plot(xs, [a.efficiency * 100 for a in pts], marker="o", label=name)
    ax1.plot([1, top], [1, top], linestyle="--", color="grey", label="ideal (speedup = GPUs)")
    ax2.axhline(100, linestyle="--", color="grey", label="ideal (100%)")
    _gpu_ticks(ax1, aggs)
    _gpu_ticks(ax2, aggs)
    ax1.set(title="Speedup", xlabel="total GPUs (ranks)", ylabel="speedup (×, vs baseline)")
    ax2.set(title="Efficiency", xlabel="total GPUs (ranks)", ylabel="efficiency (%)")
    fig.suptitle(f"Speedup and efficiency; baseline: {baseline}", fontsize=10)
    _finish(ax1)
    _finish(ax2)
    return fig


def allreduce_bw(aggs: list[Agg]) -> Any:
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for name, curve in curves(aggs).items():
        sizes = sorted(curve)
        ax.plot(sizes, [curve[n][0] for n in sizes], marker=".", label=name)
    ax.set_xscale("log", base=2)
    ax.set(title="Allreduce bus bandwidth vs message size", xlabel="message size (bytes, log scale)",
           ylabel="busbw (GB/s)")
    _finish(ax)
    return fig


def comm_compute(aggs: list[Agg]) -> Any:
    plt = _plt()
    pts = [a for a in aggs if a.kind == "train" and a.ok and a.step_time_s]
    shown = pts if len(pts) <= MAX_BARS else sorted(pts, key=lambda a: -(a.world_size or 0))[:MAX_BARS]
    shown.sort(key=lambda a: (a.framework, a.backend, a.model, a.world_size or 0, a.nodes or 0))
    fig, ax = plt.subplots(figsize=(max(8.0, 0.35 * len(shown)), 5.0))
    xs = list(range(len(shown)))
    ms = (lambda v: (v or 0.0) * 1e3)
    split = [a.comm_time_s is not None and a.compute_time_s is not None for a in shown]
    compute = [ms(a.compute_time_s) if ok else 0.0 for a, ok in zip(shown, split)]
    comm = [ms(a.comm_time_s) if ok else 0.0 for a, ok in zip(shown, split)]
    unsplit = [0.0 if ok else ms(a.step_time_s) for a, ok in zip(shown, split)]
    if any(split):
        ax.bar(xs, compute, label="compute")
        ax.bar(xs, comm, bottom=compute, label="communication")
    if any(unsplit):
        ax.bar(xs, unsplit, color="lightgrey", hatch="//", label="step (not split)")
    ax.set_xticks(xs, [f"{a.framework}-{a.backend}\n{a.model} {a.layout}" for a in shown], rotation=60,
                  fontsize=7, ha="right")
    more = f" (the {MAX_BARS} largest of {len(pts)} points)" if len(pts) > len(shown) else ""
    ax.set(title=f"Communication and compute time per step{more}", xlabel="point (framework-backend, model, servers×ranks)",
           ylabel="time per step (ms)")
    _finish(ax)
    fig.tight_layout()
    return fig


def _gpu_ticks(ax: Any, aggs: list[Agg]) -> None:
    sizes = sorted({a.world_size for pts in _series(aggs).values() for a in pts})
    if 0 < len(sizes) <= 16:  # GPU counts are whole numbers: tick exactly the measured ones
        ax.set_xticks(sizes)


def _finish(ax: Any) -> None:
    ax.grid(True, alpha=0.3)
    handles = ax.get_legend_handles_labels()[0]
    if handles:
        ax.legend(fontsize=6 if len(handles) > MANY else 7, ncol=2 if len(handles) > 2 * MANY else 1)


PLOTS: dict[str, tuple[str, Callable[..., Any], bool]] = {
    # file name -> (what it shows, function, whether it takes the baseline description)
    "scalability.png": ("throughput vs GPUs", scalability, True),
    "speedup_efficiency.png": ("speedup and efficiency vs GPUs", speedup_efficiency, True),
    "allreduce_busbw.png": ("allreduce busbw vs message size", allreduce_bw, False),
    "comm_compute.png": ("communication and compute per point", comm_compute, False),
}


def has_data(name: str, aggs: list[Agg]) -> bool:
    if name == "allreduce_busbw.png":
        return bool(curves(aggs))
    return any(a.kind == "train" and a.ok and a.throughput for a in aggs)


def write_all(aggs: list[Agg], out: Path, baseline_mode: str) -> dict[str, str]:
    """Draw every plot that has data into ``out``; return file name -> a note (written, or why not)."""
    plt = None
    done: dict[str, str] = {}
    for name, (what, fn, takes_baseline) in PLOTS.items():
        if not has_data(name, aggs):
            done[name] = f"not drawn: no data for {what}"
            continue
        fig = fn(aggs, baseline_mode) if takes_baseline else fn(aggs)
        fig.savefig(out / name, dpi=DPI)
        plt = plt or _plt()
        plt.close(fig)
        done[name] = "written"
    return done
