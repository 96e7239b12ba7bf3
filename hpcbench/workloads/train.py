"""One rank of a training point (DDP, Horovod or no framework): ``python -m hpcbench.workloads.train --help``.

Measurement: each step (next batch, zero_grad, forward, backward with the gradient exchange,
optimizer step) is timed on the host between device synchronisations. Warm-up steps are run but
not kept. After the run the per-step times of all ranks are gathered and, for each step, the
slowest rank's time is kept: a synchronous data-parallel step is as slow as its slowest rank.
Then the same steps run on an unwrapped copy of the model (no gradient exchange) to split each
step into compute and communication; see frameworks.py for what each backend exercises.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.errors import InjectedFault
from hpcbench.records import ResultRecord
from hpcbench.rundir import PointPaths, atomic_write_json, utcnow
from hpcbench.stats import mean_ci95
from hpcbench.vocab import MODELS
from hpcbench.workloads import frameworks, gpumon, provenance
from hpcbench.workloads.common import params_seen, rank_info, rank_main, require, versions
from hpcbench.workloads.config import TrainConfig
from hpcbench.workloads.data import batches
from hpcbench.workloads.distenv import DistEnv
from hpcbench.workloads.gpumon import GpuSampler
from hpcbench.workloads.models import build_model

COMPUTE_STEPS_MAX = 50  # compute-only steps for the comm/compute split: enough for a stable mean

MEASUREMENT = (
    "host wall time per step between device synchronisations (next batch + zero_grad + forward + backward "
    "with the gradient exchange + optimizer step); warm-up steps excluded; per step the slowest rank; "
    "throughput = per-rank batch * world size / mean step time; CI: Student-t 95% half-width of the mean "
    "step time over the timed steps, carried to throughput by the delta method (hw_thr = thr * hw_t / t)"
)


def _timed_steps(n_warmup: int, n: int, step: Any, sync: Any, sampler: Any = None) -> list[float]:
    """Run warm-up then ``n`` timed steps; the sampler (GPU monitor) covers only the timed ones."""
    for _ in range(n_warmup):
        step()
    sync()
    times = []
    with sampler if sampler is not None else contextlib.nullcontext():
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - t0)
    return times


def _slowest(fw: frameworks.Framework, times: list[float]) -> list[float]:
    """Per step, the slowest rank's time: a synchronous step is as slow as its slowest rank."""
    return [max(col) for col in zip(*fw.allgather(times))]


def _with_fault(cfg: TrainConfig, rank: int, step: Any) -> Any:
    """``step``, raising InjectedFault at step ``cfg.fail_step`` (1-based, warm-up included) on ``cfg.fail_rank``."""
    if rank != cfg.fail_rank:
        return step
    count = 0

    def faulty() -> None:
        nonlocal count
        count += 1
        if count == cfg.fail_step:
            raise InjectedFault(f"injected failure of rank {rank} at step {count}")
        step()
    return faulty


def train_step(model: Any, opt: Any, data: Any, info: Any, loss_fn: Any) -> Any:
    """One training step as a closure: the step every point times (benchmarks/harness_overhead.py too)."""
    def step() -> None:
        x, y = next(data)
        opt.zero_grad()  # set_to_none is the default; Horovod's optimizer takes no argument
        out = model(x)
        if info.tokens:  # a prediction per position: (batch*seq, vocab) against (batch*seq,)
            out, y = out.reshape(-1, info.num_classes), y.reshape(-1)
        loss_fn(out, y).backward()
        opt.step()
    return step


@dataclass
class Measured:
    """What one training point measured, gathered on rank 0."""

    per_step: list[float]  # per timed step, the slowest rank's time
    compute: list[float] | None  # the same, without gradient exchange (None: not split)
    gpus: list[Any]
    ranks: list[Any]
    provs: list[dict[str, Any]]
    lr: float  # after lr_scaling
    model: Any = None  # what a checkpoint saves
    opt: Any = None


def _device(cfg: TrainConfig, env: DistEnv) -> tuple[Any, Any]:
    """(the rank's torch device, a function that waits for it)."""
    import torch

    if cfg.device != "cuda":
        return torch.device("cpu"), lambda: None  # CPU ops are already synchronous
    torch.cuda.set_device(env.local_rank)
    return torch.device("cuda", env.local_rank), torch.cuda.synchronize


def run(cfg: TrainConfig, env: DistEnv) -> ResultRecord | None:
    import torch

    require(cfg.framework, cfg.backend, cfg.device)
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    started = utcnow()
    paths = PointPaths(Path(cfg.out))
    # Written now, so that a rank that crashes still says where it ran; completed at the end.
    prov = provenance.start(paths.provenance(env.rank), env.rank, env.local_rank)
    device, sync = _device(cfg, env)
    if env.rank == cfg.fail_rank and cfg.fail_step == 0:
        raise SystemExit(0)  # injected fault: this rank is lost before the rendezvous; the others time out
    timeline = str(paths.timeline) if cfg.timeline and cfg.framework == "horovod" else None
    fw = frameworks.make(cfg, env, timeline)
    try:
        measured = _measure(cfg, env, fw, device, sync, prov)
        if env.rank == 0 and cfg.checkpoint:
            _save_checkpoint(paths.checkpoint, measured.model, measured.opt, cfg)
    finally:
        fw.close()
    if env.rank != 0:
        return None
    rec = _record(cfg, env, fw, measured, started, paths, timeline)
    atomic_write_json(paths.result, rec.to_dict())
    return rec


def _measure(cfg: TrainConfig, env: DistEnv, fw: Any, device: Any, sync: Any, prov: Any) -> Measured:
    """Warm-up and timed steps, then the compute-only steps; every rank's share gathered."""
    import torch

    torch.manual_seed(0)  # same initial weights everywhere; DDP and Horovod also broadcast rank 0's
    info = MODELS[cfg.model]
    model = build_model(cfg.model).to(device)
    compute_model = frameworks.compute_only_copy(model) if cfg.comm_split and fw.name != "none" else None
    lr = cfg.lr * env.world_size if cfg.lr_scaling else cfg.lr
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    train_model, train_opt = fw.wrap(model, opt)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = batches(cfg.data, cfg.data_dir, info, cfg.batch_size, env.rank, env.world_size, device)
    gpu = GpuSampler(cfg.device == "cuda", env.local_rank)
    step = _with_fault(cfg, env.rank, train_step(train_model, train_opt, data, info, loss_fn))
    per_step = _slowest(fw, _timed_steps(cfg.warmup_steps, cfg.steps, step, sync, gpu))
    compute = None
    if compute_model is not None:
        copt = torch.optim.SGD(compute_model.parameters(), lr=lr, momentum=0.9)
        n = min(cfg.steps, COMPUTE_STEPS_MAX)
        compute = _slowest(fw, _timed_steps(min(cfg.warmup_steps, 1), n,
                                            train_step(compute_model, copt, data, info, loss_fn), sync))
    return Measured(per_step, compute, fw.allgather((gpu.samples, gpu.source, gpu.reason)),
                    fw.allgather(rank_info(env)), fw.allgather(prov.finish()), lr, model, train_opt)


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
    affinity_ok, affinity_detail = provenance.affinity_summary(m.provs)
    samples = cfg.batch_size * env.world_size
    comm_time, compute_time, compute_hw = _split(fw, mean, m.compute)
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
        params=params_seen(cfg),
    )


def _save_checkpoint(path: Path, model: Any, opt: Any, cfg: TrainConfig) -> None:
    import torch

    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "model_name": cfg.model,
                "steps": cfg.warmup_steps + cfg.steps}, tmp)
    os.replace(tmp, path)  # atomic, like every other file of the point


def main(argv: list[str] | None = None) -> int:
    return rank_main(TrainConfig.from_argv(argv), run, lambda rec: (
        f"{rec.throughput:.1f} samples/s, {rec.mean_step_time_s * 1e3:.2f} ms/step over {rec.world_size} ranks"))


if __name__ == "__main__":
    sys.exit(main())
