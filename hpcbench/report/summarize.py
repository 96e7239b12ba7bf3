"""Summary of a run: one row per point (failed and missing ones included), speedup and efficiency."""

from __future__ import annotations

import math
from typing import Any

from hpcbench.report.tables import format_table
from hpcbench.rundir import RunDir, atomic_write_text
from hpcbench.state import PointState, collect, live_states

CSV_COLUMNS = (
    "point_id", "label", "backend", "framework", "model", "batch_size", "nodes", "ranks_per_node", "world_size", "repeat",
    "state", "ok", "job_id", "step_time_ms", "throughput", "throughput_per_rank", "speedup", "efficiency",
    "nodes_seen", "reason",
)
TABLE_COLUMNS = ("framework", "backend", "model", "nodes", "ranks_per_node", "world_size", "state", "step_time_ms",
                 "throughput", "speedup", "efficiency", "reason")
TABLE_HEADERS = ("framework", "backend", "model", "nodes", "ranks/node", "ranks", "state", "step ms", "samples/s",
                 "speedup", "efficiency", "reason")


def _row(s: PointState) -> dict[str, Any]:
    p, r = s.point, s.result
    return {
        "point_id": p.id, "label": p.label, "framework": p.framework, "backend": p.backend, "model": p.model, "batch_size": p.batch_size,
        "nodes": p.nodes, "ranks_per_node": p.ranks_per_node, "world_size": p.world_size, "repeat": p.repeat,
        "state": s.state, "ok": s.ok, "job_id": s.job_id,
        "step_time_ms": r.mean_step_time_s * 1e3 if r else None,
        "throughput": r.throughput if r else None,
        "throughput_per_rank": r.throughput_per_rank if r else None,
        "nodes_seen": " ".join(r.slurm_nodes) if r else None,
        "reason": s.reason or None,
    }


def summary_rows(states: list[PointState]) -> list[dict[str, Any]]:
    """Rows with speedup = throughput / throughput of the 1-rank point of the same framework, backend, model and batch."""
    import pandas as pd

    rows = [_row(s) for s in states]
    if not rows:
        return []
    df = pd.DataFrame(rows)
    key = ["framework", "backend", "model", "batch_size"]
    ok = df[df.ok & (df.world_size == 1)]
    base = ok.groupby(key)["throughput"].mean().rename("baseline")
    df = df.merge(base, left_on=key, right_index=True, how="left")
    df["speedup"] = df["throughput"] / df["baseline"]
    df["efficiency"] = df["speedup"] / df["world_size"]
    records = df.drop(columns="baseline").to_dict("records")
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in records]


def summarize(rd: RunDir, fmt: str = "table") -> tuple[str, list[dict[str, Any]]]:
    """Return the rendered summary and its rows; write summary.csv into the run directory."""
    rows = summary_rows(collect(rd, live_states(rd)))
    atomic_write_text(rd.summary_csv, format_table(rows, CSV_COLUMNS, fmt="csv"))
    if fmt == "csv":
        return format_table(rows, CSV_COLUMNS, fmt="csv"), rows
    shown = [dict(r, reason=_clip(r.get("reason"))) for r in rows]
    return format_table(shown, TABLE_COLUMNS, TABLE_HEADERS), rows


def _clip(text: str | None, width: int = 70) -> str | None:
    if text and len(text) > width:
        return text[: width - 1] + "…"
    return text
