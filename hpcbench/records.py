"""The one owner of record schemas: names, versions, and the checks that refuse what we do not know.

Every JSON document hpcbench writes carries ``"schema": "<name>/<version>"`` (the pyperf habit),
so a reader can refuse a record from a future version with a clear message instead of guessing.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hpcbench.errors import SchemaError
from hpcbench.vocab import RENAMED

RESULT = "hpcbench.result"
ERROR = "hpcbench.error"
PLAN = "hpcbench.plan"
LEDGER = "hpcbench.ledger"
PROVENANCE = "hpcbench.provenance"

# name -> versions this code can read. result/2 only adds fields (all defaulted), so /1 still reads.
# result/3: a communication record's rows name their collective (all_gather, ...), whose size and busbw follow
# nccl-tests' definitions for it, and `unsupported` says why a point measured nothing. A reader of /2 would take
# all_gather rows for allreduce rows, so /3 is refused there; /1 and /2 read here as all_reduce.
# result/4 and plan/2: the communication benchmark's kind is "collective" (it was "allreduce") and its `model` is
# None (it was the kind). A reader of /3 or plan/1 would take such a point for an unknown kind or model, so it
# refuses them; older versions read here with the kind renamed (vocab.RENAMED).
# provenance/2 adds "transport" (workloads/transport.py: Gloo's interface, Open MPI's BTLs and PML) and keeps
# GLOO_* and every OMPI_MCA_* variable in "env"; /1 reads, its transport said as not recorded.
KNOWN: dict[str, tuple[int, ...]] = {RESULT: (1, 2, 3, 4), ERROR: (1,), PLAN: (1, 2), LEDGER: (1,), PROVENANCE: (1, 2)}
CURRENT: dict[str, int] = {name: max(v) for name, v in KNOWN.items()}


def tag(name: str) -> str:
    return f"{name}/{CURRENT[name]}"


def check(doc: Any, name: str, source: str) -> dict[str, Any]:
    """Return ``doc`` if it is a ``name`` record of a known version, else raise SchemaError."""
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        raise SchemaError(f"{source}: not an hpcbench record (no \"schema\" field)")
    got, _, version = doc["schema"].partition("/")
    if got != name:
        raise SchemaError(f"{source}: expected a {name} record, found {doc['schema']!r}")
    if not version.isdigit() or int(version) not in KNOWN[name]:
        known = ", ".join(f"{name}/{v}" for v in KNOWN[name])
        raise SchemaError(
            f"{source}: record version {doc['schema']!r} is not known to this hpcbench (reads: {known})",
            hint="upgrade hpcbench to read records written by a newer version",
        )
    return doc


def read_json(path: Path, name: str) -> dict[str, Any]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path}: not valid JSON ({e})") from None
    return check(doc, name, str(path))


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _from_dict(cls: type, doc: dict[str, Any]) -> Any:
    names = _field_names(cls)
    return cls(**{k: v for k, v in doc.items() if k in names})


@dataclass(frozen=True)
class RankInfo:
    rank: int
    local_rank: int
    hostname: str
    slurm_node: str | None  # SLURMD_NODENAME; differs from hostname when slurmds share a host
    pid: int
    cpus: list[int]  # CPU affinity in effect
    cpus_per_task: int | None = None  # SLURM_CPUS_PER_TASK as the rank saw it (None: not set)


@dataclass(frozen=True)
class GpuUtil:
    """GPU utilisation sampled during the timed steps, over all GPUs of all ranks."""

    util_mean: float  # percent
    util_min: float
    mem_used_mib_max: float
    samples: int
    source: str  # "nvml" | "nvidia-smi"


@dataclass(frozen=True)
class NodeLoad:
    """One node's load around the timed steps, read by its local rank 0."""

    host: str
    slurm_node: str | None
    cpus: int | None  # logical CPUs the node can use: its cpuset's, else the host's (os.cpu_count)
    before: list[float] | None  # 1/5/15-minute load averages just before the timed steps
    after: list[float] | None  # ... just after them
    cores: int | None = None  # physical cores (distinct core sibling sets in sysfs)
    ranks: int | None = None  # ranks of this point on the node
    cpus_per_task: int | None = None  # theirs, when they agree
    kernel: str | None = None  # boot id: nodes of one kernel (the minicluster's) share its load average
    kernel_cpus: int | None = None  # the kernel's CPUs (os.cpu_count()): what its load average is spread over


@dataclass(frozen=True)
class AllreduceRow:
    """One message size of the communication benchmark, with nccl-tests' definitions of size, algbw and busbw
    for its collective (hpcbench.workloads.collectives)."""

    size_bytes: int
    count: int  # elements
    dtype: str
    time_us: float  # mean over iterations, slowest rank
    algbw_gbps: float  # GB/s = size / time
    busbw_gbps: float  # algbw * nccl-tests' factor for the collective (all_reduce: 2 (n-1) / n)
    wrong: int  # elements that differ from the expected result
    # The same, out of place (Horovod's allreduce; torch.distributed: copy + in-place). The fields above are in place.
    oop_time_us: float | None = None
    oop_algbw_gbps: float | None = None
    oop_busbw_gbps: float | None = None
    oop_wrong: int | None = None
    # --- result/3 ---
    collective: str = "all_reduce"  # nccl-tests' name (vocab.COLLECTIVES)
    redop: str = "sum"  # as nccl-tests prints it: "none" where the collective reduces nothing
    root: int = -1  # broadcast and reduce: the root rank


@dataclass(frozen=True)
class ResultRecord:
    """What one training point measured. Written once by rank 0, atomically."""

    point_id: str
    label: str
    framework: str
    backend: str
    model: str
    device: str
    batch_size: int  # per rank
    nodes: int
    ranks_per_node: int
    world_size: int
    warmup_steps: int
    steps: int
    step_times_s: list[float]  # the slowest rank's timed steps (the longest total; workloads/steps.slowest)
    mean_step_time_s: float
    throughput: float  # samples/s over all ranks = batch_size * world_size / mean step time
    throughput_per_rank: float
    ranks: list[RankInfo]
    started_at: str
    finished_at: str
    job_id: str | None
    measurement: str
    versions: dict[str, str | None] = field(default_factory=dict)
    # --- result/2 ---
    kind: str = "train"  # "train" | "collective" (records before the rename say "allreduce": read as "collective")
    data: str = "synthetic"
    scaling: str = "weak"  # weak: batch_size per rank fixed; strong: global_batch_size fixed
    global_batch_size: int | None = None
    lr: float | None = None  # the learning rate used, after scaling
    lr_scaled: bool | None = None  # whether lr was multiplied by the world size
    step_time_ci95_s: float | None = None  # half-width of the 95% CI of the mean step time
    throughput_ci95: float | None = None  # half-width, samples/s over all ranks
    throughput_per_rank_ci95: float | None = None
    comm_time_s: float | None = None  # mean communication time per step
    compute_time_s: float | None = None  # mean compute time per step
    compute_time_ci95_s: float | None = None  # half-width of the 95% CI of the mean compute time
    comm_fraction: float | None = None  # comm_time_s / mean_step_time_s
    comm_method: str | None = None  # how the split was measured
    gpu: GpuUtil | None = None
    gpu_reason: str | None = None  # why gpu is None
    allreduce: list[AllreduceRow] = field(default_factory=list)  # a communication point's rows, of any collective
    unsupported: str | None = None  # result/3: why a communication point measured nothing (no such collective)
    affinity_ok: bool | None = None  # every rank's affinity matches the requested binding
    affinity_detail: str | None = None
    provenance: list[str] = field(default_factory=list)  # provenance-rank<N>.json names, in the point folder
    timeline: str | None = None  # Horovod timeline file name, in the point folder
    # Evidence for explaining a point (issue 12): input pipeline, per-rank times, node load, GPU placement.
    input_times_s: list[float] = field(default_factory=list)  # per timed step, the batch wait of the rank that waited longest
    input_time_s: float | None = None  # their mean
    input_fraction: float | None = None  # input_time_s / mean_step_time_s
    rank_step_s: list[float | None] = field(default_factory=list)  # by rank: its own mean timed-step time
    rank_compute_s: list[float | None] = field(default_factory=list)  # by rank: its own mean compute-only step time
    rank_compute_ci95_s: list[float | None] = field(default_factory=list)  # by rank: its mean's CI half-width
    rank_input_s: list[float | None] = field(default_factory=list)  # by rank: its own mean wait for the batch
    node_load: list[NodeLoad] = field(default_factory=list)  # one per node
    gpu_numa_ok: bool | None = None  # every rank's GPU is on a NUMA node of the rank's CPUs
    gpu_numa_detail: str | None = None
    # Every measurement parameter the ranks ran with (plan/fields.py), by name; {} in older records.
    params: dict[str, Any] = field(default_factory=dict)
    schema: str = tag(RESULT)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = "<record>") -> ResultRecord:
        check(doc, RESULT, source)
        gpu = doc.get("gpu")
        if doc.get("kind") in RENAMED:
            doc = {**doc, "kind": RENAMED[doc["kind"]]}
        # the nested records are built before the record (dataclasses.replace would build it twice)
        return _from_dict(cls, {**doc, "ranks": [_from_dict(RankInfo, r) for r in doc.get("ranks", [])],
                                "gpu": _from_dict(GpuUtil, gpu) if isinstance(gpu, dict) else None,
                                "allreduce": [_from_dict(AllreduceRow, r) for r in doc.get("allreduce", [])],
                                "node_load": [_from_dict(NodeLoad, n) for n in doc.get("node_load") or []]})

    @property
    def slurm_nodes(self) -> list[str]:
        return sorted({r.slurm_node or r.hostname for r in self.ranks})


@dataclass(frozen=True)
class ErrorRecord:
    """Why one rank failed. Each failing rank writes its own; the earliest is the root cause."""

    point_id: str
    rank: int
    hostname: str
    error_type: str
    message: str
    traceback: str
    time: str
    schema: str = tag(ERROR)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = "<record>") -> ErrorRecord:
        check(doc, ERROR, source)
        return _from_dict(cls, doc)
