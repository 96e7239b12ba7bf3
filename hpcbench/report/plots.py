"""The report plots (matplotlib, Agg, PNG). Each function returns its Figure so callers can read the data back.

What a reader takes from a plot must be true: a curve joins only comparable points (the baseline's
series), failed points are marked with their state where they would have been, intervals never go
below zero (an unbounded upper end is an arrow), a split within noise is drawn as noise, and a
CPU run says "ranks", not "GPUs". matplotlib is imported here only, and only when a plot is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from hpcbench.collectives import TABLE
from hpcbench.figures.aggregate import Agg
from hpcbench.figures.baseline import scaling_label, series_key
from hpcbench.report.fmt import size
from hpcbench.report.names import names_apart, network, unit, what
from hpcbench.report.tables_collectives import Peaks, curves, peak_of, present, without_figures
from hpcbench.report.tables_scaling import train

MANY = 6  # series beyond which the legend gets one "ideal" entry instead of one per series
MAX_BARS = 60  # a stacked bar per point stops being readable beyond this
SMALL = 64 << 10  # the latency plot: messages up to 64 KiB, where time is latency, not bandwidth
FIGSIZE = (8.0, 5.0)
DPI = 100


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def series_name(a: Agg) -> str:
    net = network(a)
    where = a.cluster or ", ".join(a.hosts) or "hosts not shown"
    return f"{what(a)} ({scaling_label(a)}) on {where}" + (f", {net}" if net else "") + (f", {a.apart}" if a.apart
                                                                                          else "")


def _series(aggs: list[Agg]) -> dict[str, list[Agg]]:
    """Comparable training points (one baseline series each), measured or not, by curve name."""
    groups: dict[tuple[Any, ...], list[Agg]] = {}
    for a in train(aggs):
        if a.world_size:
            groups.setdefault(series_key(a), []).append(a)
    names = names_apart([g[0] for g in groups.values()], series_name)
    return {names[id(g[0])]: sorted(g, key=lambda a: (a.world_size, a.nodes or 0)) for g in groups.values()}


def _best_per_size(points: list[Agg]) -> list[Agg]:
    """One measured point per total size: the best layout (the placement table shows the others)."""
    best: dict[int, Agg] = {}
    for a in points:
        size = a.world_size
        if size and a.ok and a.throughput and (size not in best or a.throughput > cast(float, best[size].throughput)):
            best[size] = a
    return [best[k] for k in sorted(best)]


def _sizes(pts: list[Agg]) -> list[int]:
    """The total sizes of points that _best_per_size kept (each has one)."""
    return [cast(int, a.world_size) for a in pts]


def _yerr(pts: list[Agg]) -> tuple[list[list[float]], list[tuple[int, float]]]:
    """Asymmetric error bars from each point's interval (0 where it has none), and where the top is unbounded."""
    thr = [cast(float, a.throughput) for a in pts]  # measured points only (_best_per_size)
    low = [t - a.throughput_lo if a.throughput_lo is not None else 0.0 for a, t in zip(pts, thr)]
    finite = [a.throughput_hi - t if a.throughput_hi is not None and math.isfinite(a.throughput_hi)
              else 0.0 for a, t in zip(pts, thr)]
    unbounded = [(x, t) for a, x, t in zip(pts, _sizes(pts), thr) if a.throughput_hi is not None and
                 math.isinf(a.throughput_hi)]
    return [low, finite], unbounded


def _mark_failed(ax: Any, aggs: list[Agg]) -> None:
    """Each training point without a result: an x on the axis at its size, with its state."""
    failed = [a for a in train(aggs) if not a.ok and a.world_size]
    if not failed:
        return
    where = ax.get_xaxis_transform()  # x in data, y in axes fraction: the bottom edge whatever the scale
    ax.plot([a.world_size for a in failed], [0.02] * len(failed), "x", color="red", markersize=9,
            transform=where, clip_on=False, label=f"no result ({len(failed)} point(s); state below)")
    for a in failed:
        ax.annotate(a.state, (a.world_size, 0.04), xycoords=where, fontsize=6, color="red", rotation=90,
                    ha="center", va="bottom")


def scalability(aggs: list[Agg], baseline: str) -> Any:
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    series = _series(aggs)
    for n, (name, group) in enumerate(series.items()):
        pts = _best_per_size(group)
        if not pts:
            continue
        yerr, unbounded = _yerr(pts)
        xs = _sizes(pts)
        line = ax.errorbar(xs, [a.throughput for a in pts], yerr=yerr, marker="o",
                           capsize=3, label=name, linestyle="-" if len(pts) > 1 else "none")
        if unbounded:  # the interval has no upper end: an arrow up, never a bar to an invented top
            ax.plot(*zip(*unbounded), marker="^", linestyle="none", color=line[0].get_color(), markersize=9)
        base = next((a for a in pts if a.base_throughput), None)
        if base is not None and base.base_throughput and base.base_world_size and len(pts) > 1:  # set together
            label = f"ideal ({name})" if len(series) <= MANY else ("ideal (dashed, same colour)" if n == 0 else "_")
            ax.plot(xs, [base.base_throughput * x / base.base_world_size for x in xs], linestyle="--",
                    color=line[0].get_color(), alpha=0.6, label=label)
    _mark_failed(ax, aggs)
    _count_ticks(ax, aggs)
    ax.set_ylim(bottom=0)
    u = unit(train(aggs))
    ax.set(title=f"Scalability: throughput vs total {u}; 95% CI bars; baseline: {baseline}",
           xlabel=f"total {u}", ylabel="throughput (samples/s)")
    ax.title.set_fontsize(10)
    _finish(ax)
    return fig


def speedup_efficiency(aggs: list[Agg], baseline: str) -> Any:
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.0, 4.5))
    top = 1
    for name, group in _series(aggs).items():
        pts = [a for a in _best_per_size(group) if a.speedup is not None]
        if len(pts) < 2:  # a speedup needs a curve
            continue
        xs = _sizes(pts)
        top = max(top, *xs)
        ax1.plot(xs, [a.speedup for a in pts], marker="o", label=name)
        ax2.plot(xs, [cast(float, a.efficiency) * 100 for a in pts], marker="o", label=name)  # set with speedup
    u = unit(train(aggs))
    ax1.plot([1, top], [1, top], linestyle="--", color="grey", label=f"ideal (speedup = {u.split()[0]})")
    ax2.axhline(100, linestyle="--", color="grey", label="ideal (100%)")
    for ax in (ax1, ax2):
        _count_ticks(ax, aggs)
        _mark_failed(ax, aggs)
    ax1.set(title="Speedup", xlabel=f"total {u}", ylabel="speedup (×, vs baseline)")
    ax2.set(title="Efficiency", xlabel=f"total {u}", ylabel="efficiency (%)")
    fig.suptitle(f"Speedup and efficiency; baseline: {baseline}", fontsize=10)
    _finish(ax1)
    _finish(ax2)
    return fig


def _binary_sizes(ax: Any) -> None:
    """Message sizes on a log2 axis, ticked in B / KiB / MiB / GiB."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=40))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size(round(v)) if v >= 1 else ""))
    labels = ax.xaxis.get_majorticklabels()
    for label in labels:
        label.set_rotation(45)
        label.set_fontsize(7)


def collective_bw(aggs: list[Agg], peaks: Peaks | None = None,
                  collective: str = "all_reduce") -> Any:
    """busbw per size of one collective; where the slowest link's peak is known, a dashed line at it in the
    series' colour and the largest size's share of it, so a curve is read against what the hardware can do."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    drawn: set[float] = set()
    for name, a, curve in curves(aggs, collective):
        pts = [(n, v[0]) for n, v in sorted(curve.items()) if v[0] > 0]  # busbw is 0 at one rank: off a log axis
        if not pts:
            continue
        line = ax.plot(*zip(*pts), marker=".", label=name)[0]
        peak = peak_of(peaks, a)[0]
        if peak is None:
            continue
        if peak.gbps not in drawn:  # one line per distinct peak, however many series share it
            drawn.add(peak.gbps)
            ax.axhline(peak.gbps, color=line.get_color(), linestyle="--", linewidth=1,
                       label=f"peak {peak.gbps:g} GB/s: {peak.link}")
        x, y = pts[-1]
        ax.annotate(f"{y / peak.gbps:.0%} of peak", (x, y), textcoords="offset points", xytext=(-4, 6),
                    ha="right", fontsize=7, color=line.get_color())
    for a in without_figures(aggs, collective):  # in the legend, never dropped: failed, or a library without it
        ax.plot([], [], "x", color="red", label=f"no figures: {a.name}: {a.state}")
    _binary_sizes(ax)
    ax.set_yscale("log")
    c = TABLE[collective]
    ax.set(title=f"{c.title} bus bandwidth vs message size (log-log; busbw = algbw × {c.formula})",
           xlabel="message size" + (" (whole buffer)" if c.size else ""),
           ylabel="busbw (GB/s, log scale)")
    ax.title.set_fontsize(10)
    _finish(ax)
    fig.tight_layout()
    return fig


def allreduce_bw(aggs: list[Agg], peaks: Peaks | None = None) -> Any:
    return collective_bw(aggs, peaks, "all_reduce")


def bw_file(collective: str) -> str:
    return "allreduce_busbw.png" if collective == "all_reduce" else f"{collective}_busbw.png"


def allreduce_latency(aggs: list[Agg]) -> Any:
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for name, _, curve in curves(aggs, "all_reduce"):
        pts = [(n, v[2]) for n, v in sorted(curve.items()) if n <= SMALL and v[2] > 0]
        if pts:
            ax.plot(*zip(*pts), marker=".", label=name)
    _binary_sizes(ax)
    ax.set_yscale("log")
    ax.set(title=f"Allreduce time for small messages (up to {size(SMALL)}): the latency",
           xlabel="message size", ylabel="time per operation (µs, log scale)")
    _finish(ax)
    fig.tight_layout()
    return fig


def comm_compute(aggs: list[Agg]) -> Any:
    plt = _plt()
    pts = [a for a in train(aggs) if a.ok and a.step_time_s]
    shown = pts if len(pts) <= MAX_BARS else sorted(pts, key=lambda a: -(a.world_size or 0))[:MAX_BARS]
    shown.sort(key=lambda a: (a.framework, a.backend, a.model, a.world_size or 0, a.nodes or 0))
    fig, ax = plt.subplots(figsize=(max(8.0, 0.35 * len(shown)), 5.5))
    xs = list(range(len(shown)))
    ms = (lambda v: (v or 0.0) * 1e3)
    kind = ["noise" if a.comm_within_noise else "split" if a.comm_time_s is not None and a.compute_time_s
            is not None else "step" for a in shown]
    compute = [ms(a.compute_time_s) if k != "step" else 0.0 for a, k in zip(shown, kind)]
    for k, label, style in (("split", "communication", {}),
                            ("noise", "communication within noise (its 95% CI reaches 0)",
                             {"color": "lightgrey", "hatch": "..", "edgecolor": "grey"})):
        if k in kind:
            ax.bar(xs, [ms(a.comm_time_s) if kk == k else 0.0 for a, kk in zip(shown, kind)], bottom=compute,
                   label=label, **style)
    if any(k != "step" for k in kind):
        ax.bar(xs, compute, label="compute", color="tab:blue")
    if "step" in kind:
        ax.bar(xs, [ms(a.step_time_s) if k == "step" else 0.0 for a, k in zip(shown, kind)], color="white",
               hatch="//", edgecolor="grey", label="step (not split)")
    names = names_apart(shown)
    ax.set_xticks(xs, [names[id(a)].replace(", ", "\n", 1) for a in shown], rotation=60, fontsize=6, ha="right")
    more = f" (the {MAX_BARS} largest of {len(pts)} points)" if len(pts) > len(shown) else ""
    ax.set(title=f"Communication and compute time per step{more}", ylabel="time per step (ms)")
    _finish(ax)
    fig.tight_layout()
    return fig


def _count_ticks(ax: Any, aggs: list[Agg]) -> None:
    sizes = sorted({a.world_size for a in train(aggs) if a.world_size})
    if 0 < len(sizes) <= 16:  # rank counts are whole numbers: tick exactly the measured ones
        ax.set_xticks(sizes)


def _finish(ax: Any) -> None:
    ax.grid(True, alpha=0.3)
    handles = ax.get_legend_handles_labels()[0]
    if handles:
        ax.legend(fontsize=6 if len(handles) > MANY else 7, ncol=2 if len(handles) > 2 * MANY else 1)


PLOTS: dict[str, tuple[str, Callable[..., Any], str]] = {
    # file name -> (what it shows, function, what it takes besides the points: "baseline", "peaks" or "")
    "scalability.png": ("throughput vs ranks", scalability, "baseline"),
    "speedup_efficiency.png": ("speedup and efficiency vs ranks", speedup_efficiency, "baseline"),
    "allreduce_busbw.png": ("allreduce busbw vs message size", allreduce_bw, "peaks"),
    "allreduce_latency.png": ("allreduce time for small messages", allreduce_latency, ""),
    "comm_compute.png": ("communication and compute per point", comm_compute, ""),
}


def has_data(name: str, aggs: list[Agg]) -> bool:
    if name.startswith("allreduce_"):
        return bool(curves(aggs, "all_reduce"))
    return any(a.ok and a.throughput for a in train(aggs))


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=DPI)
    _plt().close(fig)


def write_all(aggs: list[Agg], out: Path, baseline_mode: str,
              peaks: Peaks | None = None) -> dict[str, str]:
    """Draw every plot that has data into ``out``; return file name -> a note (written, or why not).
    Besides the allreduce plots, each other collective the run measured gets its own busbw plot."""
    done: dict[str, str] = {}
    extra = {"baseline": baseline_mode, "peaks": peaks}
    for name, (shows, fn, takes) in PLOTS.items():
        if not has_data(name, aggs):
            done[name] = f"not drawn: no data for {shows}"
            continue
        _save(fn(aggs, extra[takes]) if takes else fn(aggs), out / name)
        done[name] = "written"
    for collective in (c for c in present(aggs) if c != "all_reduce"):
        name = bw_file(collective)
        if not curves(aggs, collective):
            done[name] = f"not drawn: no {collective} point has figures"
            continue
        _save(collective_bw(aggs, peaks, collective), out / name)
        done[name] = "written"
    return done
