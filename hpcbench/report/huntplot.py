"""The hunt's pair matrix: each measured pair's median bandwidth, node by node, with the suspects marked."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any


def pair_matrix(doc: dict[str, Any], path: Path) -> Path:
    """hunt-pairs.png beside hunt.json: a heatmap in MB/s (blank: a pair not measured)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    nodes = list(doc["nodes"])
    at = {n: i for i, n in enumerate(nodes)}
    grid = np.full((len(nodes), len(nodes)), np.nan)
    for p in doc["pairs"]:
        if p["a"] in at and p["b"] in at and p["bandwidth_Bps"]:
            v = statistics.median(p["bandwidth_Bps"]) / 1e6
            grid[at[p["a"]], at[p["b"]]] = grid[at[p["b"]], at[p["a"]]] = v
    size = min(12.0, 2.5 + 0.45 * len(nodes))
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0)
    fig.colorbar(im, ax=ax, label="pair bandwidth, median (MB/s)")
    if len(nodes) <= 16:
        top = np.nanmax(grid) if np.isfinite(grid).any() else 0.0
        for i in range(len(nodes)):
            for j in range(len(nodes)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=8,
                            color="white" if grid[i, j] < 0.6 * top else "black")
    suspects = {s["node"]: s["kind"] for s in doc.get("suspects", [])}
    labels = [f"{n} ({suspects[n]})" if n in suspects else n for n in nodes]
    ax.set_xticks(range(len(nodes)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(nodes)), labels)
    for tick in (*ax.get_xticklabels(), *ax.get_yticklabels()):
        if tick.get_text().endswith(")"):
            tick.set_color("tab:red")
    used = doc.get("rounds_used")
    ax.set_title(f"hunt of {len(nodes)} nodes, job {doc.get('job_id')}: {used} round{'' if used == 1 else 's'}, "
                 f"{'no suspect' if doc.get('healthy') else 'suspects in red'}")
    fig.tight_layout()
    out = path.parent / "hunt-pairs.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
