"""Sample: one row per point x repeat, whatever it came from (a run directory or a foreign log).

Everything after the inputs works on Samples only, so a run of hpcbench and a pile of Horovod or
nccl-tests logs give the same tables. A Sample has one field per declared measurement parameter
(plan/fields.py, written into figures/_generated.py's SampleParams), taking the parameter's ``unknown`` value
when the source does not show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench.figures._generated import SampleParams
from hpcbench.plan.fields import BY_NAME, NAMES
from hpcbench.records import AllreduceRow, ResultRecord
from hpcbench.stats import mean_ci95
from hpcbench.vocab import COMPLETED, UNSUPPORTED

if TYPE_CHECKING:  # the parser's modules load when a log is read, not when a run is planned
    from hpcbench.figures._generated import PointView
    from hpcbench.parse.api import Log


@dataclass(kw_only=True)  # built by keyword: its parameters (SampleParams) come first and have defaults
class Sample(SampleParams):
    source: str  # the run directory or log file it came from
    label: str
    state: str  # shown as is; decisions use ok / final only
    ok: bool  # a measurement exists
    final: bool  # nothing more will happen to it without a resubmission
    point_id: str | None = None
    world_size: int | None = None
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
    input_time_s: float | None = None  # mean wait for the batch per step (slowest rank)
    input_fraction: float | None = None  # its share of the step time
    gpu_numa_ok: bool | None = None  # every rank's GPU on its CPUs' NUMA node
    nodes_seen: str | None = None  # Slurm node names the ranks ran on
    hosts: tuple[str, ...] = ()  # distinct host names the ranks ran on (slurmds may share one host)
    n_steps: int | None = None  # timed steps behind step_time_ci95_s
    versions: dict[str, Any] = field(default_factory=dict)  # software the record names (torch, horovod, ...)
    precision: str | None = None  # what a foreign log says of its arithmetic (fp16, fp32); None: not shown
    inferred: str = ""  # what was guessed from a foreign log, said out loud
    allreduce: list[AllreduceRow] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)  # files whose NCCL lines tell the transports
    provenance: list[dict[str, Any]] = field(default_factory=list)
    parsed: list[Log] = field(default_factory=list)  # its logs as hpcbench.parse read them (Agg.logs fills it)
    record: ResultRecord | None = None  # the result record itself, for the evidence the explain rules read
    speedup: float | None = None  # filled by baseline.apply
    efficiency: float | None = None
    env: tuple[tuple[str, str], ...] = ()  # the point's environment variables that are axes ([matrix.env])
    slurm: tuple[tuple[str, Any], ...] = ()  # the point's measured [slurm] settings that are axes (cpus_per_task, ...)

    @property
    def layout(self) -> str:
        nodes, rpn = self.nodes, self.ranks_per_node
        return f"{nodes if nodes is not None else '?'}x{rpn if rpn is not None else '?'}"

    @property
    def name(self) -> str:
        """How the report names the point: what it is for a run's point, the file for a foreign log."""
        return f"{self.framework}-{self.backend} {self.layout}" if self.point_id else self.label

    def params(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in NAMES}

# What a point's usual name says (framework-backend, model, layout, the batch in its scaling label); the other
# parameters, and its env and [slurm] axes, tell points apart where they vary (names.py says them).
NAMED = ("framework", "backend", "model", "nodes", "ranks_per_node", "gpus_per_node", "kind", "scaling",
         "batch_size", "global_batch_size", "repeat")
OTHERS = tuple(n for n in NAMES if n not in NAMED)
ENV_COLUMN = "env."  # records.csv: one column env.NAME per environment variable that is an axis


def axis_values(s: Sample | PointView) -> dict[str, Any]:
    """The values beyond a point's name: the other parameters, env.NAME of its env axes, its [slurm] axes."""
    d = {n: getattr(s, n) for n in OTHERS}
    d.update((f"{ENV_COLUMN}{k}", v) for k, v in s.env)
    d.update(s.slurm)
    return d


def record_params(rec: ResultRecord) -> dict[str, Any]:
    """The parameters a record was measured with: its ``params``, or, in records written before
    those existed, its fields of the same names (lr there is the value after scaling, so it is left out)."""
    if rec.params:
        return {k: v for k, v in rec.params.items() if k in BY_NAME}
    legacy = {n: getattr(rec, n) for n in NAMES if n != "lr" and hasattr(rec, n)}
    return {k: v for k, v in legacy.items() if v is not None}


def from_record(rec: ResultRecord, source: str, **extra: Any) -> Sample:
    """A Sample from a result record; CIs missing from older records are computed from the step times."""
    step_ci, thr_ci = rec.step_time_ci95_s, rec.throughput_ci95
    if step_ci is None and len(rec.step_times_s) > 1:
        _, step_ci = mean_ci95(rec.step_times_s)
        if step_ci is not None and rec.mean_step_time_s > 0:
            # throughput = k / t: first-order propagation of the step time's CI
            thr_ci = thr_ci if thr_ci is not None else rec.throughput * step_ci / rec.mean_step_time_s
    gpu = rec.gpu
    train = rec.kind == "train"
    kw: dict[str, Any] = {
        "model": rec.model if train else None, **record_params(rec), "kind": rec.kind, "nodes": rec.nodes,
        "ranks_per_node": rec.ranks_per_node,
        "source": source, "label": rec.label, "state": COMPLETED, "ok": True, "final": True, "point_id": rec.point_id,
        "world_size": rec.world_size, "job_id": rec.job_id,
        "step_time_s": rec.mean_step_time_s if train else None, "step_time_ci95_s": step_ci,
        "throughput": rec.throughput if train else None, "throughput_ci95": thr_ci,
        "comm_time_s": rec.comm_time_s, "compute_time_s": rec.compute_time_s,
        "compute_time_ci95_s": rec.compute_time_ci95_s, "comm_fraction": rec.comm_fraction,
        "comm_method": rec.comm_method, "gpu_util_mean": gpu.util_mean if gpu else None,
        "gpu_util_min": gpu.util_min if gpu else None, "gpu_samples": gpu.samples if gpu else None,
        "gpu_reason": rec.gpu_reason, "affinity_ok": rec.affinity_ok, "nodes_seen": " ".join(rec.slurm_nodes) or None,
        "hosts": tuple(sorted({r.hostname for r in rec.ranks})), "n_steps": len(rec.step_times_s) or None,
        "versions": dict(rec.versions), "allreduce": list(rec.allreduce), "record": rec,
        "input_time_s": rec.input_time_s, "input_fraction": rec.input_fraction, "gpu_numa_ok": rec.gpu_numa_ok,
        # the variables the ranks saw, where the point varied some (the plan's values, given in extra, win)
        "env": tuple(sorted((rec.params.get("env") or {}).items())),
    }
    if rec.kind != "train":  # records from before collectives (result/1, /2) measured all_reduce
        kw.setdefault("collective", BY_NAME["collective"].default)
    kw.update(extra)
    if rec.unsupported:  # the ranks found no such collective in their library: said, never a failure
        kw.update(state=UNSUPPORTED, ok=False, reason=rec.unsupported)
    return Sample(**kw)
