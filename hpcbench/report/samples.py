"""Sample: one row per point x repeat, whatever it came from (a run directory or a foreign log).

Everything after the inputs works on Samples only, so a run of hpcbench and a pile of Horovod or
nccl-tests logs give the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from hpcbench.schema import AllreduceRow, ResultRecord
from hpcbench.state import COMPLETED
from hpcbench.workloads.stats import mean_ci95


@dataclass
class Sample:
    source: str  # the run directory or log file it came from
    label: str
    state: str  # shown as is; decisions use ok / final only
    ok: bool  # a measurement exists
    final: bool  # nothing more will happen to it without a resubmission
    point_id: str | None = None
    framework: str = "?"
    backend: str = "?"
    model: str = "?"
    kind: str = "train"
    device: str = "?"
    scaling: str = "weak"
    batch_size: int | None = None  # per rank
    global_batch_size: int | None = None
    nodes: int | None = None
    ranks_per_node: int | None = None
    world_size: int | None = None
    repeat: int = 0
    cluster: str | None = None
    job_id: str | None = None
    reason: str = ""
    step_time_s: float | None = None
    step_time_ci95_s: float | None = None
    throughput: float | None = None  # samples/s over all ranks
    throughput_ci95: float | None = None
    comm_time_s: float | None = None
    compute_time_s: float | None = None
    compute_time_ci95_s: float | None = None
    comm_fraction: float | None = None
    comm_method: str | None = None
    gpu_util_mean: float | None = None
    gpu_util_min: float | None = None
    gpu_samples: int | None = None
    gpu_reason: str | None = None
    affinity_ok: bool | None = None
    nodes_seen: str | None = None
    inferred: str = ""  # what was guessed from a foreign log, said out loud
    allreduce: list[AllreduceRow] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)  # files whose NCCL lines tell the transports
    provenance: list[dict[str, Any]] = field(default_factory=list)
    parsed: list[dict[str, Any]] = field(default_factory=list)  # hpcbench.logs.parse_file output, filled lazily
    speedup: float | None = None  # filled by baseline.apply
    efficiency: float | None = None

    @property
    def layout(self) -> str:
        return f"{self.nodes if self.nodes is not None else '?'}x{self.ranks_per_node if self.ranks_per_node is not None else '?'}"

    @property
    def name(self) -> str:
        """How the report names the point: what it is for a run's point, the file for a foreign log."""
        return f"{self.framework}-{self.backend} {self.layout}" if self.point_id else self.label


# The tidy CSV / JSON: one row per point x repeat. The first columns are the old summary.csv's, in order.
TIDY_COLUMNS = (
    "point_id", "label", "backend", "model", "batch_size", "nodes", "ranks_per_node", "world_size", "repeat",
    "state", "ok", "job_id", "step_time_ms", "throughput", "throughput_per_rank", "speedup", "efficiency",
    "nodes_seen", "reason",
    # result/2 and summarize's additions
    "framework", "kind", "device", "scaling", "global_batch_size", "cluster", "step_time_ci95_ms",
    "throughput_ci95", "comm_time_ms", "compute_time_ms", "compute_time_ci95_ms", "comm_fraction", "gpu_util_mean", "gpu_util_min",
    "affinity_ok", "source", "inferred",
)


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1e3


_DIRECT = tuple(f.name for f in fields(Sample) if f.name in TIDY_COLUMNS)


def tidy_row(s: Sample) -> dict[str, Any]:
    d = {name: getattr(s, name) for name in _DIRECT}
    d.update(step_time_ms=_ms(s.step_time_s), step_time_ci95_ms=_ms(s.step_time_ci95_s),
             comm_time_ms=_ms(s.comm_time_s), compute_time_ms=_ms(s.compute_time_s),
             compute_time_ci95_ms=_ms(s.compute_time_ci95_s),
             throughput_per_rank=(s.throughput / s.world_size if s.throughput and s.world_size else None))
    return {c: d.get(c) for c in TIDY_COLUMNS}


def from_record(rec: ResultRecord, source: str, **extra: Any) -> Sample:
    """A Sample from a result record; CIs missing from older records are computed from the step times."""
    step_ci, thr_ci = rec.step_time_ci95_s, rec.throughput_ci95
    if step_ci is None and len(rec.step_times_s) > 1:
        _, step_ci = mean_ci95(rec.step_times_s)
        if step_ci is not None and rec.mean_step_time_s > 0:
            # throughput = k / t: first-order propagation of the step time's CI
            thr_ci = thr_ci if thr_ci is not None else rec.throughput * step_ci / rec.mean_step_time_s
    gpu = rec.gpu
    kw: dict[str, Any] = {
        "source": source, "label": rec.label, "state": COMPLETED, "ok": True, "final": True, "point_id": rec.point_id,
        "framework": rec.framework, "backend": rec.backend, "model": rec.model, "kind": rec.kind, "device": rec.device,
        "scaling": rec.scaling, "batch_size": rec.batch_size, "global_batch_size": rec.global_batch_size,
        "nodes": rec.nodes, "ranks_per_node": rec.ranks_per_node, "world_size": rec.world_size, "job_id": rec.job_id,
        "step_time_s": rec.mean_step_time_s if rec.kind == "train" else None, "step_time_ci95_s": step_ci,
        "throughput": rec.throughput if rec.kind == "train" else None, "throughput_ci95": thr_ci,
        "comm_time_s": rec.comm_time_s, "compute_time_s": rec.compute_time_s,
        "compute_time_ci95_s": rec.compute_time_ci95_s, "comm_fraction": rec.comm_fraction,
        "comm_method": rec.comm_method, "gpu_util_mean": gpu.util_mean if gpu else None,
        "gpu_util_min": gpu.util_min if gpu else None, "gpu_samples": gpu.samples if gpu else None,
        "gpu_reason": rec.gpu_reason, "affinity_ok": rec.affinity_ok, "nodes_seen": " ".join(rec.slurm_nodes) or None,
        "allreduce": list(rec.allreduce),
    }
    kw.update(extra)
    return Sample(**kw)
