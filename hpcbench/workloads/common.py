"""Glue every workload shares: backend checks, process-group start-up, rank identity, error records.

One place, so that the training and allreduce workloads fail, time out and report the same way.
"""

from __future__ import annotations

import os
import platform
import socket
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from hpcbench import __version__
from hpcbench.errors import BackendUnavailable
from hpcbench.files import atomic_write_json, utcnow
from hpcbench.records import ErrorRecord, RankInfo
from hpcbench.rundir import PointPaths
from hpcbench.vocab import ENV_AXES_VAR, TORCH_BACKEND
from hpcbench.workloads.distenv import DistEnv, from_environ
from hpcbench.workloads.summary import lines as summary_lines


def require(framework: str, backend: str, device: str) -> None:
    """Fail fast, with the reason, before any collective could hang on a missing backend."""
    from hpcbench.workloads.capabilities import unavailable_here

    why = unavailable_here(framework, backend, device)
    if why:
        raise BackendUnavailable(why)


def versions() -> dict[str, str | None]:
    import torch

    out: dict[str, str | None] = {"hpcbench": __version__, "python": platform.python_version(),
                                  "torch": torch.__version__}
    for mod in ("torchvision", "horovod"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = None
    nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else (str(nccl) if nccl else None)
    return out


def init_process_group(backend: str, env: DistEnv, timeout_s: int) -> None:
    """torch.distributed over TCP rendezvous at the job's first node; a missing peer times out, never hangs."""
    import torch.distributed as dist

    dist.init_process_group(
        backend=TORCH_BACKEND.get(backend, backend),
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank, world_size=env.world_size, timeout=timedelta(seconds=timeout_s),
    )


def params_seen(cfg: Any) -> dict[str, Any]:
    """What a record keeps of its parameters: the rank config's, and, when the point varies environment
    variables ([matrix.env]), those variables as this rank saw them (under "env")."""
    params: dict[str, Any] = cfg.params()
    names = os.environ.get(ENV_AXES_VAR, "").split()
    if names:
        params["env"] = {name: os.environ.get(name) for name in names}
    return params


def rank_info(env: DistEnv) -> RankInfo:
    per_task = os.environ.get("SLURM_CPUS_PER_TASK", "")
    return RankInfo(rank=env.rank, local_rank=env.local_rank, hostname=socket.gethostname(),
                    slurm_node=os.environ.get("SLURMD_NODENAME"), pid=os.getpid(),
                    cpus=sorted(os.sched_getaffinity(0)), cpus_per_task=int(per_task) if per_task.isdigit() else None)


def check_world(env: DistEnv, nodes: int, ranks_per_node: int) -> None:
    if env.world_size != nodes * ranks_per_node:
        raise RuntimeError(
            f"the launcher started {env.world_size} ranks, but the point asks for "
            f"{nodes} x {ranks_per_node}; check --nodes/--ntasks-per-node"
        )


def write_error(out: str, point_id: str, rank: int, e: BaseException) -> None:
    lines = str(e).strip().splitlines()
    # Microseconds: the earliest failure across ranks is the root cause, the rest are its echoes.
    err = ErrorRecord(point_id=point_id, rank=max(rank, 0), hostname=socket.gethostname(),
                      error_type=type(e).__name__, message=lines[0] if lines else type(e).__name__,
                      traceback=traceback.format_exc(), time=utcnow("microseconds"))
    atomic_write_json(PointPaths(Path(out)).error(max(rank, 0)), err.to_dict())


def guarded_main(out: str, point_id: str, body: Callable[[DistEnv], int]) -> int:
    """Run ``body(env)`` for this rank; any failure leaves error-rank<N>.json with its reason, never just a dead job."""
    rank = -1
    try:
        env = from_environ()
        rank = env.rank
        return body(env)
    except Exception as e:  # noqa: BLE001 - whatever broke, the record must say so
        traceback.print_exc()
        write_error(out, point_id, rank, e)
        return 2 if isinstance(e, BackendUnavailable) else 1


def rank_main(cfg: Any, run: Callable[[Any, DistEnv], Any], summary: Callable[[Any], str]) -> int:
    """A workload's main: check the world size, run, and have rank 0 print ``hpcbench: <label>: <summary>``
    and its record (workloads/summary.py)."""

    def body(env: DistEnv) -> int:
        check_world(env, cfg.nodes, cfg.ranks_per_node)
        rec = run(cfg, env)
        if rec is not None:
            print("\n".join(summary_lines(cfg.label, summary(rec), rec.to_dict())), flush=True)
        return 0

    return guarded_main(cfg.out, cfg.point_id, body)
