"""One rank of a DDP training point on synthetic data: ``python -m hpcbench.workloads.train --help``.

Measurement: each step (zero_grad, forward, backward with DDP's allreduce, optimizer step) is timed
on the host between device synchronisations. Warm-up steps are run but not kept. After the run the
per-step times of all ranks are gathered and, for each step, the slowest rank's time is kept: a
synchronous data-parallel step is as slow as its slowest rank. Throughput = batch_size x world_size
/ mean step time.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from hpcbench.rundir import PointPaths, atomic_write_json, utcnow
from hpcbench.schema import ResultRecord
from hpcbench.workloads.common import check_world, guarded_main, init_process_group, rank_info, require, versions
from hpcbench.workloads.config import TrainConfig
from hpcbench.workloads.distenv import DistEnv
from hpcbench.workloads.models import MODELS, build_model

MEASUREMENT = (
    "host wall time per step between device synchronisations (zero_grad+forward+backward/allreduce+step); "
    "warm-up steps excluded; per step the slowest rank; throughput = batch_size*world_size/mean step time"
)


def run(cfg: TrainConfig, env: DistEnv) -> ResultRecord | None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    require(cfg.framework, cfg.backend, cfg.device)
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    started = utcnow()
    cuda = cfg.device == "cuda"
    if cuda:
        torch.cuda.set_device(env.local_rank)
    device = torch.device("cuda", env.local_rank) if cuda else torch.device("cpu")

    def sync() -> None:  # CPU ops are already synchronous
        if cuda:
            torch.cuda.synchronize()

    init_process_group(cfg.backend, env, cfg.timeout_s)
    try:
        torch.manual_seed(0)  # same initial weights everywhere; DDP also broadcasts rank 0's
        info = MODELS[cfg.model]
        model = build_model(cfg.model).to(device)
        ddp = DDP(model, device_ids=[env.local_rank] if cuda else None)
        opt = torch.optim.SGD(ddp.parameters(), lr=cfg.lr, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        gen = torch.Generator().manual_seed(1000 + env.rank)
        x = torch.randn((cfg.batch_size, *info.input_shape), generator=gen).to(device)
        y = torch.randint(0, info.num_classes, (cfg.batch_size,), generator=gen).to(device)

        times = []
        for _ in range(cfg.warmup_steps + cfg.steps):
            sync()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss_fn(ddp(x), y).backward()
            opt.step()
            sync()
            times.append(time.perf_counter() - t0)
        timed = torch.tensor(times[cfg.warmup_steps:], dtype=torch.float64, device=device)
        gathered = [torch.zeros_like(timed) for _ in range(env.world_size)]
        dist.all_gather(gathered, timed)
        per_step = torch.stack(gathered).max(dim=0).values.cpu().tolist()

        ranks: list[Any] = [None] * env.world_size
        dist.all_gather_object(ranks, rank_info(env))
    finally:
        dist.destroy_process_group()

    if env.rank != 0:
        return None
    mean = sum(per_step) / len(per_step)
    rec = ResultRecord(
        point_id=cfg.point_id, label=cfg.label, framework=cfg.framework, backend=cfg.backend, model=cfg.model,
        device=cfg.device, batch_size=cfg.batch_size, nodes=env.nnodes,
        ranks_per_node=env.world_size // max(env.nnodes, 1), world_size=env.world_size,
        warmup_steps=cfg.warmup_steps, steps=cfg.steps, step_times_s=per_step, mean_step_time_s=mean,
        throughput=cfg.batch_size * env.world_size / mean, throughput_per_rank=cfg.batch_size / mean,
        ranks=sorted(ranks, key=lambda r: r.rank), started_at=started, finished_at=utcnow(),
        job_id=env.job_id, measurement=MEASUREMENT, versions=versions(),
    )
    atomic_write_json(PointPaths(Path(cfg.out)).result, rec.to_dict())
    return rec


def main(argv: list[str] | None = None) -> int:
    cfg = TrainConfig.from_argv(argv)

    def body(env: DistEnv) -> int:
        check_world(env, cfg.nodes, cfg.ranks_per_node)
        rec = run(cfg, env)
        if rec is not None:
            print(f"hpcbench: {cfg.label}: {rec.throughput:.1f} samples/s, "
                  f"{rec.mean_step_time_s * 1e3:.2f} ms/step over {rec.world_size} ranks", flush=True)
        return 0

    return guarded_main(cfg.out, cfg.point_id, body)


if __name__ == "__main__":
    sys.exit(main())
