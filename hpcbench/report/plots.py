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

LEGEND_CHARS = 120  # a legend row holds about this many characters: as many columns as its longest label allows
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


# Each node count its own marker and line style, the same on every series: 1x2 and 2x1 are both drawn, told
# apart by their marker, and a line joins the points with the same number of nodes (scaling within them).
NODE_STYLES = (("o", "-"), ("s", "-."), ("^", ":"), ("D", (0, (5, 1))), ("v", (0, (3, 1, 1, 1))), ("P", "-"))
COMM, COMPUTE = "tab:orange", "tab:blue"  # comm_compute's two parts: never one colour


def _layouts(points: list[Agg]) -> dict[int, list[Agg]]:
    """A series' measured points by node count, each by size: every layout, none kept out for a faster one."""
    out: dict[int, list[Agg]] = {}
    for a in points:
        if a.world_size and a.ok and a.throughput:
            out.setdefault(a.nodes or 0, []).append(a)
    return {n: sorted(v, key=lambda a: cast(int, a.world_size)) for n, v in sorted(out.items())}


def _node_styles(aggs: list[Agg]) -> dict[int, tuple[str, Any]]:
    counts = sorted({a.nodes or 0 for a in train(aggs) if a.world_size and a.ok})
    return {n: NODE_STYLES[i % len(NODE_STYLES)] for i, n in enumerate(counts)}


def _node_label(n: int, aggs: list[Agg]) -> str:
    posing = any(a.one_host_posing for a in train(aggs) if a.nodes == n)
    what = f"{n} node{'s' if n != 1 else ''}" if n else "nodes not shown"
    return what + (" (Slurm nodes on one host)" if posing else "") + " (marker)"


def _dodge(slots: dict[int, list[Any]]) -> Callable[[int, Any], float]:
    """The x offset of a slot (a series' layout) at a size: where several sit at one size they stand side by side,
    each error bar visible; a point alone at its size stays on its tick."""
    sizes = sorted(slots)
    gap = min((b - a for a, b in zip(sizes, sizes[1:])), default=1)
    step = 0.3 * gap / max(len(v) for v in slots.values()) if slots else 0.0
    return lambda size, slot: (slots[size].index(slot) - (len(slots[size]) - 1) / 2) * step


def _errors(values: list[float], los: list[float | None], his: list[float | None]
            ) -> tuple[list[list[float]], list[int]]:
    """Asymmetric error bars from each value's interval (0 where it has none), and the indices whose top is
    unbounded (drawn as an arrow up, never a bar to an invented top)."""
    low = [v - lo if lo is not None else 0.0 for v, lo in zip(values, los)]
    high = [hi - v if hi is not None and math.isfinite(hi) else 0.0 for v, hi in zip(values, his)]
    return [low, high], [i for i, hi in enumerate(his) if hi is not None and math.isinf(hi)]


def _draw(ax: Any, xs: list[float], ys: list[float], los: list[float | None], his: list[float | None],
          color: str, style: tuple[str, Any], label: str) -> None:
    """One layout of one series; ``label`` names the series for a reader of the figure (the legend is built apart)."""
    yerr, unbounded = _errors(ys, los, his)
    ax.errorbar(xs, ys, yerr=yerr, marker=style[0], linestyle=style[1] if len(xs) > 1 else "none", color=color,
                capsize=3, markersize=6, label=label)
    for i in unbounded:  # no upper end: a dotted arrow to the top of the axes, never a bar to an invented top
        ax.annotate("", xy=(xs[i], 1.0), xycoords=("data", "axes fraction"), xytext=(xs[i], ys[i]), textcoords="data",
                    arrowprops={"arrowstyle": "->", "color": color, "linestyle": ":", "shrinkA": 4, "shrinkB": 0})


def _curves(ax_values: list[tuple[Any, Callable[[Agg], tuple[float | None, float | None, float | None]]]],
            aggs: list[Agg], need_speedup: bool = False) -> list[Any]:
    """Draw every series' every layout on each (axes, value of a point) pair; the legend's handles: one per series
    (its colour), one per node count (its marker and line)."""
    from matplotlib.lines import Line2D

    series = {name: {n: [a for a in pts if not need_speedup or a.speedup is not None]
                     for n, pts in _layouts(group).items()} for name, group in _series(aggs).items()}
    styles = _node_styles(aggs)
    slots: dict[int, list[Any]] = {}
    for name, layouts in series.items():
        for n, pts in layouts.items():
            for a in pts:
                slots.setdefault(cast(int, a.world_size), []).append((name, n))
    dodge = _dodge(slots)
    handles = []
    for k, (name, layouts) in enumerate(series.items()):
        color = f"C{k % 10}"
        drawn = False
        for n, pts in layouts.items():
            if not pts:
                continue
            drawn = True
            xs = [cast(int, a.world_size) + dodge(cast(int, a.world_size), (name, n)) for a in pts]
            for ax, value in ax_values:
                vals = [value(a) for a in pts]
                _draw(ax, xs, [cast(float, v[0]) for v in vals], [v[1] for v in vals], [v[2] for v in vals],
                      color, styles[n], name)
        if drawn:
            handles.append(Line2D([], [], color=color, linewidth=6, label=name))
    handles += [Line2D([], [], color="dimgrey", marker=m, linestyle=ls, label=_node_label(n, aggs))
                for n, (m, ls) in styles.items()]
    if any(getattr(t, "arrow_patch", None) is not None for ax, _ in ax_values for t in ax.texts):
        handles.append(Line2D([], [], color="dimgrey", linestyle=":", marker=r"$\uparrow$",
                              label="95% CI with no upper end (arrow to the top)"))
    return handles


def _mark_failed(ax: Any, aggs: list[Agg]) -> list[Any]:
    """Each training point without a result: an x on the axis at its size, with its state; its legend handle."""
    failed = [a for a in train(aggs) if not a.ok and a.world_size]
    if not failed:
        return []
    where = ax.get_xaxis_transform()  # x in data, y in axes fraction: the bottom edge whatever the scale
    line = ax.plot([a.world_size for a in failed], [0.02] * len(failed), "x", color="red", markersize=9,
                   transform=where, clip_on=False, label=f"no result ({len(failed)} point(s); state on the axis)")[0]
    for a in failed:
        ax.annotate(a.state, (a.world_size, 0.04), xycoords=where, fontsize=6, color="red", rotation=90,
                    ha="center", va="bottom")
    return [line]


def scalability(aggs: list[Agg], baseline: str) -> Any:
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    handles = _curves([(ax, lambda a: (a.throughput, a.throughput_lo, a.throughput_hi))], aggs)
    bases = {(a.base_throughput, a.base_world_size) for a in train(aggs) if a.base_throughput and a.base_world_size}
    ideal = []
    for n, (thr, world) in enumerate(sorted(cast(set[tuple[float, int]], bases))):
        xs = sorted({world, *(a.world_size for a in train(aggs) if a.world_size and a.base_throughput == thr)})
        if len(xs) > 1:
            line = ax.plot(xs, [thr * x / world for x in xs], linestyle="--", color="grey", linewidth=1)[0]
            if n == 0:
                line.set_label("ideal: baseline throughput × ranks / its ranks")
                ideal.append(line)
    handles += ideal + _mark_failed(ax, aggs)
    _count_ticks(ax, aggs)
    ax.set_ylim(bottom=0)
    u = unit(train(aggs))
    ax.set(title=f"Scalability: throughput vs total {u}; 95% CI bars; baseline: {baseline}",
           xlabel=f"total {u}", ylabel="throughput (samples/s)")
    ax.title.set_fontsize(10)
    ax.grid(True, alpha=0.3)
    _legend_below(fig, handles)
    return fig


def speedup_efficiency(aggs: list[Agg], baseline: str) -> Any:
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.0, 4.5))
    handles = _curves([(ax1, lambda a: (a.speedup, a.speedup_lo, a.speedup_hi)),
                       (ax2, lambda a: (pct100(a.efficiency), pct100(a.efficiency_lo), pct100(a.efficiency_hi)))],
                      aggs, need_speedup=True)
    sizes = [a.world_size for a in train(aggs) if a.world_size]
    top = max([1, *sizes])
    u = unit(train(aggs))
    handles.append(ax1.plot([1, top], [1, top], linestyle="--", color="grey", linewidth=1,
                            label=f"ideal (speedup = {u.split()[0]}; efficiency 100%)")[0])
    ax2.axhline(100, linestyle="--", color="grey", linewidth=1)
    failed: list[Any] = []
    for ax in (ax1, ax2):
        _count_ticks(ax, aggs)
        failed = _mark_failed(ax, aggs)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    ax1.set(title="Speedup (95% CI bars)", xlabel=f"total {u}", ylabel="speedup (×, vs baseline)")
    ax2.set(title="Efficiency (95% CI bars)", xlabel=f"total {u}", ylabel="efficiency (%)")
    fig.suptitle(f"Speedup and efficiency; baseline: {baseline}", fontsize=10)
    _legend_below(fig, handles + failed)
    return fig


def pct100(v: float | None) -> float | None:
    return None if v is None else v * 100


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
    series' colour and, in the series' legend entry, the largest size's share of it, so a curve is read against
    what the hardware can do."""
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
        x, y = pts[-1]  # in the legend, not beside the point: series that end close together overlapped there
        line.set_label(f"{name}: {y / peak.gbps:.0%} of peak at {size(round(x))}")
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
                   label=label, **({"color": COMM} | style))
    if any(k != "step" for k in kind):
        ax.bar(xs, compute, label="compute", color=COMPUTE)
    if "step" in kind:
        ax.bar(xs, [ms(a.step_time_s) if k == "step" else 0.0 for a, k in zip(shown, kind)], color="white",
               hatch="//", edgecolor="grey", label="step (not split)")
    names = names_apart(shown)
    ax.set_xticks(xs, [names[id(a)].replace(", ", "\n", 1) for a in shown], rotation=60, fontsize=6, ha="right")
    more = f" (the {MAX_BARS} largest of {len(pts)} points)" if len(pts) > len(shown) else ""
    ax.set(title=f"Communication and compute time per step{more}", ylabel="time per step (ms)")
    _finish(ax)
    return fig


def _count_ticks(ax: Any, aggs: list[Agg]) -> None:
    sizes = sorted({a.world_size for a in train(aggs) if a.world_size})
    if 0 < len(sizes) <= 16:  # rank counts are whole numbers: tick exactly the measured ones
        ax.set_xticks(sizes)


def _finish(ax: Any) -> None:
    ax.grid(True, alpha=0.3)
    _legend_below(ax.figure, ax.get_legend_handles_labels()[0])


def _legend_below(fig: Any, handles: list[Any]) -> None:
    """The legend under the axes, outside them, so that it never covers a point (savefig's tight box takes it in)."""
    fig.tight_layout()
    if not handles:
        return
    longest = max(len(str(h.get_label())) for h in handles)
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=7, frameon=False,
               ncol=max(1, min(3, LEGEND_CHARS // max(longest, 1))))


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
    fig.savefig(path, dpi=DPI, bbox_inches="tight", pad_inches=0.15)  # tight: the legend below the axes too
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
