"""One rank of a training point (DDP, Horovod or no framework): ``python -m hpcbench.workloads.train --help``.

Measurement: each step (next batch, zero_grad, forward, backward with the gradient exchange,
optimizer step) is timed on the host between device synchronisations, and so is its wait for the
batch. Warm-up steps are run but not kept. After the run the per-step times of all ranks are gathered
and the steps of the slowest rank (the longest total) are kept: a synchronous data-parallel step is as slow as
its slowest rank (steps.slowest); each rank's own mean is kept too. Then the same steps run on an unwrapped copy of the
model (no gradient exchange) to split each step into compute and communication; see frameworks.py for
what each backend exercises, steps.py for the step, placement.py for the GPU and the node's load.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.files import atomic_write_json, utcnow
from hpcbench.records import NodeLoad, ResultRecord
from hpcbench.rundir import PointPaths
from hpcbench.stats import mean_ci95
from hpcbench.vocab import MODELS
from hpcbench.workloads import affinity, frameworks, gpumon, placement, provenance, transport
from hpcbench.workloads import summary as summary_line
from hpcbench.workloads.common import params_seen, rank_info, rank_main, require, versions
from hpcbench.workloads.config import TrainConfig
from hpcbench.workloads.data import batches
from hpcbench.workloads.distenv import DistEnv
from hpcbench.workloads.gpumon import GpuSampler
from hpcbench.workloads.models import build_model
from hpcbench.workloads.steps import rank_ci95s, rank_means, slowest, timed_steps, train_step, with_delay, with_fault

COMPUTE_STEPS_MAX = 50  # compute-only steps for the comm/compute split: enough for a stable mean

MEASUREMENT = (
    "host wall time per step between device synchronisations (next batch + zero_grad + forward + backward "
    "with the gradient exchange + optimizer step); warm-up steps excluded; the steps of the slowest rank (the longest total); "
    "throughput = per-rank batch * world size / mean step time; CI: Student-t 95% half-width of the mean "
    "step time over the timed steps, carried to throughput by the delta method (hw_thr = thr * hw_t / t); "
    "input = host time in next(data) per step, of the rank that waited longest; each rank's own means kept by rank"
)


@dataclass
class Measured:
    """What one training point measured, gathered on rank 0."""

    per_step: list[float]  # the slowest rank's timed steps
    compute: list[float] | None  # the same, without gradient exchange (None: not split)
    gpus: list[Any]
    ranks: list[Any]
    provs: list[dict[str, Any]]
    lr: float  # after lr_scaling
    model: Any = None  # what a checkpoint saves
    opt: Any = None
    inputs: list[float] = field(default_factory=list)  # per timed step, the wait of the rank that waited longest
    rank_step: list[float | None] = field(default_factory=list)  # by rank: its own mean step time
    rank_compute: list[float | None] = field(default_factory=list)  # by rank: its own mean compute-only time
    rank_compute_ci95: list[float | None] = field(default_factory=list)  # by rank: its mean's CI half-width
    rank_input: list[float | None] = field(default_factory=list)  # by rank: its own mean wait for the batch
    loads: list[NodeLoad] = field(default_factory=list)  # one per node


def run(cfg: TrainConfig, env: DistEnv) -> ResultRecord | None:
    import torch

    require(cfg.framework, cfg.backend, cfg.device)
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    started = utcnow()
    paths = PointPaths(Path(cfg.out))
    # Written now, so that a rank that crashes still says where it ran; completed at the end.
    prov = provenance.start(paths.provenance(env.rank), env.rank, env.local_rank)
    device, sync, index = placement.use_device(cfg.device, env.local_rank)
    gpu = placement.record_pairing(prov, env.rank, env.local_rank, cfg.device, index)
    transport.record(prov, cfg.framework, cfg.backend, env.local_rank)
    if env.rank == cfg.fail_rank and cfg.fail_step == 0:
        raise SystemExit(0)  # injected fault: this rank is lost before the rendezvous; the others time out
    timeline = str(paths.timeline) if cfg.timeline and cfg.framework == "horovod" else None
    fw = frameworks.make(cfg, env, timeline)
    try:
        measured = _measure(cfg, env, fw, (device, sync, index, (gpu or {}).get("gpu_bus_id")), prov)
        if env.rank == 0 and cfg.checkpoint:
            _save_checkpoint(paths.checkpoint, measured.model, measured.opt, cfg)
    finally:
        fw.close()
    if env.rank != 0:
        return None
    rec = _record(cfg, env, fw, measured, started, paths, timeline)
    atomic_write_json(paths.result, rec.to_dict())
    return rec


@contextlib.contextmanager
def _around(*probes: Any) -> Iterator[None]:
    """Every probe (GPU sampler, node load) around the timed steps."""
    with contextlib.ExitStack() as stack:
        for probe in probes:
            stack.enter_context(probe)
        yield


def _measure(cfg: TrainConfig, env: DistEnv, fw: Any, dev: tuple[Any, Any, int | None, str | None],
             prov: Any) -> Measured:
    """Warm-up and timed steps, then the compute-only steps; every rank's share gathered."""
    import torch

    device, sync, index, bus_id = dev
    torch.manual_seed(0)  # same initial weights everywhere; DDP and Horovod also broadcast rank 0's
    info = MODELS[cfg.model]
    model = build_model(cfg.model).to(device)
    compute_model = frameworks.compute_only_copy(model) if cfg.comm_split and fw.name != "none" else None
    lr = cfg.lr * env.world_size if cfg.lr_scaling else cfg.lr
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    train_model, train_opt = fw.wrap(model, opt)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = batches(cfg.data, cfg.data_dir, info, cfg.batch_size, env.rank, env.world_size, device)
    gpu = GpuSampler(cfg.device == "cuda", index or 0, bus_id)
    load = placement.LoadProbe(env.local_rank == 0)
    waits: list[float] = []
    step = with_fault(cfg, env.rank, with_delay(cfg, env.rank, train_step(train_model, train_opt, data, info,
                                                                            loss_fn, waits)))
    times = timed_steps(cfg.warmup_steps, cfg.steps, step, sync, _around(load, gpu, prov.wire(cfg.steps, "timed steps")),
                        waits)
    timed = fw.allgather((times, waits))
    compute = None
    if compute_model is not None:
        copt = torch.optim.SGD(compute_model.parameters(), lr=lr, momentum=0.9)
        cstep = with_delay(cfg, env.rank, train_step(compute_model, copt, data, info, loss_fn))
        compute = fw.allgather(timed_steps(min(cfg.warmup_steps, 1), min(cfg.steps, COMPUTE_STEPS_MAX), cstep, sync))
    where = fw.allgather((rank_info(env), load.entry))
    ranks = [r for r, _ in where]
    return Measured(slowest([t for t, _ in timed]), slowest(compute) if compute else None,
                    fw.allgather((gpu.samples, gpu.source, gpu.reason)), ranks, fw.allgather(prov.finish()), lr,
                    model, train_opt, inputs=slowest([w for _, w in timed]), rank_step=rank_means([t for t, _ in timed]),
                    rank_compute=rank_means(compute) if compute else [], rank_compute_ci95=rank_ci95s(compute or []),
                    rank_input=rank_means([w for _, w in timed]),
                    loads=placement.node_loads([e for _, e in where], ranks))


def _split(fw: Any, mean: float, compute: list[float] | None) -> tuple[float | None, float | None, float | None]:
    """(comm, compute, compute's CI half-width) per step; comm = step - compute."""
    if fw.name == "none":
        return 0.0, mean, None
    if not compute:
        return None, None, None
    compute_time, compute_hw = mean_ci95(compute)
    return max(mean - compute_time, 0.0), compute_time, compute_hw


def _record(cfg: TrainConfig, env: DistEnv, fw: Any, m: Measured, started: str, paths: PointPaths,
            timeline: str | None) -> ResultRecord:
    mean, hw = mean_ci95(m.per_step)
    gpu_util, gpu_reason = gpumon.summarize(m.gpus)
    affinity_ok, affinity_detail = affinity.affinity_summary(m.provs)
    samples = cfg.batch_size * env.world_size
    comm_time, compute_time, compute_hw = _split(fw, mean, m.compute)
    input_time = sum(m.inputs) / len(m.inputs) if m.inputs else None
    gpu_numa_ok, gpu_numa_detail = placement.pairing_summary([d.get("gpu_binding") for d in m.provs])
    return ResultRecord(
        point_id=cfg.point_id, label=cfg.label, framework=cfg.framework, backend=cfg.backend, model=cfg.model,
        device=cfg.device, batch_size=cfg.batch_size, nodes=env.nnodes,
        ranks_per_node=env.world_size // max(env.nnodes, 1), world_size=env.world_size,
        warmup_steps=cfg.warmup_steps, steps=cfg.steps, step_times_s=m.per_step, mean_step_time_s=mean,
        throughput=samples / mean, throughput_per_rank=cfg.batch_size / mean,
        ranks=sorted(m.ranks, key=lambda r: r.rank), started_at=started, finished_at=utcnow(),
        job_id=env.job_id, measurement=MEASUREMENT, versions=versions(),
        kind="train", data=cfg.data, scaling=cfg.scaling, global_batch_size=cfg.global_batch_size,
        lr=m.lr, lr_scaled=cfg.lr_scaling, step_time_ci95_s=hw,
        throughput_ci95=None if hw is None else samples / mean * hw / mean,
        throughput_per_rank_ci95=None if hw is None else cfg.batch_size / mean * hw / mean,
        comm_time_s=comm_time, compute_time_s=compute_time, compute_time_ci95_s=compute_hw,
        comm_fraction=None if comm_time is None else comm_time / mean,
        comm_method=fw.comm_method if comm_time is not None else None,
        gpu=gpu_util, gpu_reason=gpu_reason,
        timeline=paths.timeline.name if timeline and paths.timeline.exists() else None,
        affinity_ok=affinity_ok, affinity_detail=affinity_detail,
        provenance=[paths.provenance(d["rank"]).name for d in sorted(m.provs, key=lambda d: d["rank"])],
        params=params_seen(cfg), input_times_s=m.inputs, input_time_s=input_time,
        input_fraction=None if input_time is None else input_time / mean, rank_step_s=m.rank_step,
        rank_compute_s=m.rank_compute, rank_compute_ci95_s=m.rank_compute_ci95,
        rank_input_s=m.rank_input, node_load=m.loads, gpu_numa_ok=gpu_numa_ok,
        gpu_numa_detail=gpu_numa_detail,
    )


def _save_checkpoint(path: Path, model: Any, opt: Any, cfg: TrainConfig) -> None:
    import torch

    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "model_name": cfg.model,
                "steps": cfg.warmup_steps + cfg.steps}, tmp)
    os.replace(tmp, path)  # atomic, like every other file of the point


def main(argv: list[str] | None = None) -> int:
    return rank_main(TrainConfig.from_argv(argv), run,
                     lambda rec: summary_line.train(rec.throughput, rec.mean_step_time_s, rec.world_size))


if __name__ == "__main__":
    sys.exit(main())
