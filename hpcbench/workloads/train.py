"""One rank of a DDP training point on synthetic data: ``python -m hpcbench.workloads.train --help``.

Measurement: each step (zero_grad, forward, backward with DDP's allreduce, optimizer step) is timed
on the host between device synchronisations. Warm-up steps are run but not kept. After the run the
per-step times of all ranks are gathered and, for each step, the slowest rank's time is kept: a
synchronous data-parallel step is as slow as its slowest rank. Throughput = batch_size x world_size
/ mean step time.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

from hpcbench import __version__
from hpcbench.rundir import PointPaths, atomic_write_json, utcnow
from hpcbench.schema import ErrorRecord, RankInfo, ResultRecord
from hpcbench.workloads.config import TrainConfig
from hpcbench.workloads.distenv import DistEnv, from_environ
from hpcbench.workloads.models import MODELS, build_model

MEASUREMENT = (
    "host wall time per step between device synchronisations (zero_grad+forward+backward/allreduce+step); "
    "warm-up steps excluded; per step the slowest rank; throughput = batch_size*world_size/mean step time"
)


class BackendUnavailable(RuntimeError):
    pass


class InjectedFault(RuntimeError):
    """Raised on purpose (TrainConfig.fail_rank / fail_step) to test how failures are reported."""


def _check_backend(backend: str, device: str) -> None:
    import torch
    import torch.distributed as dist

    if backend == "nccl" and (device != "cuda" or not torch.cuda.is_available()):
        raise BackendUnavailable("backend 'nccl' needs CUDA GPUs, and none is visible to this rank")
    if backend == "mpi" and not dist.is_mpi_available():
        raise BackendUnavailable("backend 'mpi': this torch was built without MPI support (use gloo, or Horovod)")
    if backend == "gloo" and not dist.is_gloo_available():
        raise BackendUnavailable("backend 'gloo': this torch was built without Gloo")
    if backend == "oneccl":
        try:
            import oneccl_bindings_for_pytorch  # noqa: F401
        except ImportError:
            raise BackendUnavailable("backend 'oneccl' needs oneccl_bindings_for_pytorch, which is not installed") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailable("device 'cuda' requested, but torch sees no GPU on this node")


def _versions() -> dict[str, str | None]:
    import torch

    out: dict[str, str | None] = {"hpcbench": __version__, "python": platform.python_version(),
                                  "torch": torch.__version__}
    try:
        import torchvision

        out["torchvision"] = torchvision.__version__
    except ImportError:
        out["torchvision"] = None
    nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else (str(nccl) if nccl else None)
    return out


def run(cfg: TrainConfig, env: DistEnv) -> ResultRecord | None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    _check_backend(cfg.backend, cfg.device)
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    started = utcnow()
    cuda = cfg.device == "cuda"
    if cuda:
        torch.cuda.set_device(env.local_rank)
    device = torch.device("cuda", env.local_rank) if cuda else torch.device("cpu")

    def sync() -> None:  # CPU ops are already synchronous
        if cuda:
            torch.cuda.synchronize()

    if env.rank == cfg.fail_rank and cfg.fail_step == 0:
        raise SystemExit(0)  # injected fault: this rank is lost before the rendezvous; the others time out
    dist.init_process_group(
        backend="ccl" if cfg.backend == "oneccl" else cfg.backend,
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank, world_size=env.world_size, timeout=timedelta(seconds=cfg.timeout_s),
    )
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
        for step in range(1, cfg.warmup_steps + cfg.steps + 1):
            if env.rank == cfg.fail_rank and step == cfg.fail_step:
                raise InjectedFault(f"injected failure of rank {env.rank} at step {step}")
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

        me = RankInfo(rank=env.rank, local_rank=env.local_rank, hostname=socket.gethostname(),
                      slurm_node=os.environ.get("SLURMD_NODENAME"), pid=os.getpid(),
                      cpus=sorted(os.sched_getaffinity(0)))
        ranks: list[Any] = [None] * env.world_size
        dist.all_gather_object(ranks, me)
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
        job_id=env.job_id, measurement=MEASUREMENT, versions=_versions(),
    )
    atomic_write_json(PointPaths(Path(cfg.out)).result, rec.to_dict())
    return rec


def main(argv: list[str] | None = None) -> int:
    cfg = TrainConfig.from_argv(argv)
    rank = -1
    try:
        env = from_environ()
        rank = env.rank
        if env.world_size != cfg.nodes * cfg.ranks_per_node:
            raise RuntimeError(
                f"the launcher started {env.world_size} ranks, but the point asks for "
                f"{cfg.nodes} x {cfg.ranks_per_node}; check --nodes/--ntasks-per-node"
            )
        rec = run(cfg, env)
        if rec is not None:
            print(f"hpcbench: {cfg.label}: {rec.throughput:.1f} samples/s, "
                  f"{rec.mean_step_time_s * 1e3:.2f} ms/step over {rec.world_size} ranks", flush=True)
        return 0
    except Exception as e:  # every failure leaves a record with its reason, never just a dead job
        traceback.print_exc()
        lines = str(e).strip().splitlines()
        # Microseconds: the earliest failure across ranks is the root cause, the rest are its echoes.
        err = ErrorRecord(point_id=cfg.point_id, rank=max(rank, 0), hostname=socket.gethostname(),
                          error_type=type(e).__name__, message=lines[0] if lines else type(e).__name__,
                          traceback=traceback.format_exc(), time=utcnow("microseconds"))
        atomic_write_json(PointPaths(Path(cfg.out)).error(max(rank, 0)), err.to_dict())
        return 2 if isinstance(e, BackendUnavailable) else 1


if __name__ == "__main__":
    sys.exit(main())
