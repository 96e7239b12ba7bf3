"""Run directories built from constructed result records, so every figure in a test is known by hand."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcbench.files import atomic_write_json
from hpcbench.plan.expand import Point, point_id
from hpcbench.records import AllreduceRow, ErrorRecord, GpuUtil, RankInfo, ResultRecord
from hpcbench.rundir import RunDir


def point(backend="gloo", model="mlp", nodes=1, rpn=1, framework="ddp", kind="train", batch=32, repeat=0,
          device="cpu", global_batch=None) -> Point:
    params = {"backend": backend, "model": model, "batch_size": batch, "nodes": nodes, "ranks_per_node": rpn,
              "gpus_per_node": rpn if device == "cuda" else 0, "framework": framework, "kind": kind,
              "device": device, "data": "synthetic", "steps": 4, "warmup_steps": 1, "lr": 0.01, "repeat": repeat}
    if global_batch:  # strong scaling: the global batch split over the ranks
        params.update(scaling="strong", global_batch_size=global_batch)
    label = f"{framework}-{backend}-{model}-n{nodes}x{rpn}-r{repeat}"
    return Point(id=point_id(params), label=label, **params)


def record(p: Point, throughput: float, **kw: Any) -> ResultRecord:
    """A record whose mean step time gives exactly ``throughput`` (batch x ranks / step)."""
    step = p.batch_size * p.world_size / throughput
    # one host per node, as on a real cluster (the minicluster's two nodes on one host is a test of its own)
    ranks = [RankInfo(rank=r, local_rank=r % p.ranks_per_node, hostname=f"h{r // p.ranks_per_node + 1}",
                      slurm_node=f"node{r // p.ranks_per_node + 1}", pid=100 + r, cpus=[0]) for r in range(p.world_size)]
    rec = ResultRecord(point_id=p.id, label=p.label, framework=p.framework, backend=p.backend, model=p.model,
                       device=p.device, batch_size=p.batch_size, nodes=p.nodes, ranks_per_node=p.ranks_per_node,
                       world_size=p.world_size, warmup_steps=1, steps=4, step_times_s=[step] * 4,
                       mean_step_time_s=step, throughput=throughput, throughput_per_rank=throughput / p.world_size,
                       ranks=ranks, started_at="t0", finished_at="t1", job_id="1", measurement="constructed",
                       kind=p.kind)
    return replace(rec, **kw)


def make_run(root: Path, results: list[tuple[Point, Any]]) -> RunDir:
    """``results``: (point, ResultRecord | ErrorRecord-message str | None for a job that left nothing)."""
    rd = RunDir.create(root, "", "constructed", [p for p, _ in results])
    for n, (p, what) in enumerate(results):
        rd.record("submitted", p.id, job_id=str(1000 + n), backend="local")
        # as the local backend writes it: the point ran before submit returned (no exit status file here)
        rd.record("finished", p.id, job_id=str(1000 + n), backend="local", exit_code="?")
        if isinstance(what, ResultRecord):
            atomic_write_json(rd.point(p).result, what.to_dict())
        elif isinstance(what, str):
            atomic_write_json(rd.point(p).error(0), ErrorRecord(
                point_id=p.id, rank=0, hostname="node1", error_type="RuntimeError", message=what, traceback="",
                time="2026-01-01T00:00:00+00:00").to_dict())
    return rd


def provenance(rank: int, node: str, driver: str | None, **kw: Any) -> dict[str, Any]:
    doc = {"schema": "hpcbench.provenance/1", "rank": rank, "local_rank": 0, "hostname": "host", "slurm_node": node,
           "gpus": [{"name": "NVIDIA A100-SXM4-80GB", "bus_id": "0", "memory_mib": 81920}] * 2, "driver": driver,
           "cuda": "12.4", "nccl": "2.21.5",
           "software": {"torch": "2.14.1", "torchvision": "0.29.1", "horovod": None, "mpi": "Open MPI 4.1.6",
                        "python": "3.11.2", "os": "Debian 12", "kernel": "6.1"},
           "nics": [{"name": "ib0", "kind": "infiniband", "model": "mlx5_core", "speed": 400000}] * 4
                    + [{"name": "lo", "kind": "loopback", "model": None, "speed": None}],
           "infiniband": {"devices": [{"name": f"mlx5_{i}", "hca_type": "MT4129"} for i in range(4)]},
           "topology": "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n", "env": {"SLURM_CLUSTER_NAME": "alps"},
           "unavailable": {"horovod": "not installed"}}
    doc.update(kw)
    return doc


GPU = GpuUtil(util_mean=95.0, util_min=90.0, mem_used_mib_max=1000.0, samples=10, source="nvml")
STARVED = GpuUtil(util_mean=55.0, util_min=20.0, mem_used_mib_max=1000.0, samples=10, source="nvml")


def allreduce_rows(peak: float) -> list[AllreduceRow]:
    return [AllreduceRow(size_bytes=1 << k, count=(1 << k) // 4, dtype="float", time_us=10.0,
                         algbw_gbps=peak * k / 30 / 1.5, busbw_gbps=peak * k / 30, wrong=0) for k in (10, 20, 30)]
