"""records.csv and records.json: one tidy row per point x repeat, every declared parameter a column, then one
per env or [slurm] axis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from hpcbench.figures.samples import ENV_COLUMN, Sample
from hpcbench.plan.fields import NAMES
from hpcbench.report.fmt import ms

# The tidy CSV / JSON: one row per point x repeat. The first columns are the old summary.csv's, in order;
# every declared parameter is a column.
TIDY_COLUMNS = tuple(dict.fromkeys((
    "point_id", "label", "backend", "model", "batch_size", "nodes", "ranks_per_node", "world_size", "repeat",
    "state", "ok", "job_id", "step_time_ms", "throughput", "throughput_per_rank", "speedup", "efficiency",
    "nodes_seen", "reason",
    # result/2 and summarize's additions
    "framework", "kind", "device", "scaling", "global_batch_size", "cluster", "step_time_ci95_ms",
    "throughput_ci95", "comm_time_ms", "compute_time_ms", "compute_time_ci95_ms", "comm_fraction", "gpu_util_mean",
    "gpu_util_min", "affinity_ok", "source", "inferred", "hosts",
    # the explain engine's evidence (issue 12)
    "input_time_ms", "input_fraction", "gpu_numa_ok",
    *NAMES,
)))


def tidy_columns(samples: Sequence[Sample]) -> tuple[str, ...]:
    """records.csv's columns: TIDY_COLUMNS, then one per env or [slurm] axis that any sample has."""
    extra = {f"{ENV_COLUMN}{k}" for s in samples for k, _ in s.env} | {k for s in samples for k, _ in s.slurm}
    return (*TIDY_COLUMNS, *sorted(extra - set(TIDY_COLUMNS)))


_DIRECT = tuple(f.name for f in fields(Sample) if f.name in TIDY_COLUMNS)


def tidy_row(s: Sample) -> dict[str, Any]:
    d = {name: getattr(s, name) for name in _DIRECT}
    d["hosts"] = " ".join(s.hosts) or None
    d.update(step_time_ms=ms(s.step_time_s), step_time_ci95_ms=ms(s.step_time_ci95_s),
             comm_time_ms=ms(s.comm_time_s), compute_time_ms=ms(s.compute_time_s),
             compute_time_ci95_ms=ms(s.compute_time_ci95_s), input_time_ms=ms(s.input_time_s),
             throughput_per_rank=(s.throughput / s.world_size if s.throughput and s.world_size else None))
    row = {c: d.get(c) for c in TIDY_COLUMNS}
    row.update((f"{ENV_COLUMN}{k}", v) for k, v in s.env)
    row.update(s.slurm)
    return row
