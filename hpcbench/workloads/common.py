"""Glue every workload shares: backend checks, process-group start-up, rank identity, error records.

One place, so that the training and allreduce workloads fail, time out and report the same way.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from hpcbench import __version__
from hpcbench.rundir import PointPaths, atomic_write_json, utcnow
from hpcbench.schema import ErrorRecord, RankInfo
from hpcbench.workloads.distenv import DistEnv, from_environ


class BackendUnavailable(RuntimeError):
    """The point asks for a framework/backend/device this node cannot provide (exit code 2)."""


def require(framework: str, backend: str, device: str) -> None:
    """Fail fast, with the reason, before any collective could hang on a missing backend."""
    from hpcbench.capabilities import unavailable

    why = unavailable(framework, backend, device)
    if why:
        raise BackendUnavailable(why)


def versions() -> dict[str, str | None]:
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


def init_process_group(backend: str, env: DistEnv, timeout_s: int) -> None:
    """torch.distributed over TCP rendezvous at the job's first node; a missing peer times out, never hangs."""
    import torch.distributed as dist

    from hpcbench.capabilities import TORCH_BACKEND

    dist.init_process_group(
        backend=TORCH_BACKEND.get(backend, backend),
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank, world_size=env.world_size, timeout=timedelta(seconds=timeout_s),
    )


def rank_info(env: DistEnv) -> RankInfo:
    return RankInfo(rank=env.rank, local_rank=env.local_rank, hostname=socket.gethostname(),
                    slurm_node=os.environ.get("SLURMD_NODENAME"), pid=os.getpid(),
                    cpus=sorted(os.sched_getaffinity(0)))


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


# --- Horovod -------------------------------------------------------------------------------------
# Sweep backend -> (variable, value): which Horovod operations carry the tensors. The controller
# (who coordinates) is MPI under mpirun and Gloo otherwise; see horovod_init.
HOROVOD_OPS_ENV = {"mpi": ("HOROVOD_CPU_OPERATIONS", "mpi"), "gloo": ("HOROVOD_CPU_OPERATIONS", "gloo"),
                   "oneccl": ("HOROVOD_CPU_OPERATIONS", "ccl"), "nccl": ("HOROVOD_GPU_OPERATIONS", "nccl")}
_KEEP: list[Any] = []  # the rendezvous store and server must outlive hvd.init on rank 0


def slot_plan(hosts: list[str]) -> list[Any]:
    """Horovod SlotInfo for each rank, given the node each rank runs on (ranks in order)."""
    from horovod.runner.common.util.hosts import SlotInfo

    local_size = {h: hosts.count(h) for h in hosts}
    order = list(dict.fromkeys(hosts))
    seen: dict[str, int] = {}
    plan = []
    for rank, h in enumerate(hosts):
        local = seen[h] = seen.get(h, -1) + 1
        peers = [n for n in order if local_size[n] > local]  # the nodes that have a rank with this local rank
        plan.append(SlotInfo(hostname=h, rank=rank, local_rank=local, cross_rank=peers.index(h), size=len(hosts),
                             local_size=local_size[h], cross_size=len(peers)))
    return plan


def _iface_for(addr: str) -> str | None:
    """The network interface this host uses to reach ``addr`` (Gloo needs a name, not an address)."""
    import psutil

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((addr, 9))  # no packet is sent: this only asks the kernel for the route
        local = s.getsockname()[0]
    return next((nic for nic, addrs in psutil.net_if_addrs().items() if any(a.address == local for a in addrs)), None)


def _gloo_rendezvous(env: DistEnv, timeout_s: int) -> None:
    """What ``horovodrun --gloo`` does, inside an allocation: rank 0 serves Horovod's HTTP rendezvous.

    The plan (which rank on which node) and the server's port travel over a torch TCPStore at
    MASTER_ADDR:MASTER_PORT, so every rank learns them without a fixed port or a shared file.
    """
    from torch.distributed import TCPStore

    store = TCPStore(env.master_addr, env.master_port, env.world_size, env.rank == 0,
                     timedelta(seconds=timeout_s), wait_for_workers=False)
    _KEEP.append(store)
    # Slurm node names, not host names: two slurmd on one host are still two nodes to Horovod.
    store.set(f"hvd/host/{env.rank}", os.environ.get("SLURMD_NODENAME") or socket.gethostname())
    if env.rank == 0:
        from horovod.runner.http.http_server import RendezvousServer

        hosts = [store.get(f"hvd/host/{r}").decode() for r in range(env.world_size)]
        plan = slot_plan(hosts)
        server = RendezvousServer()
        port = server.start()
        server.init(plan)
        _KEEP.append(server)
        for s in plan:
            store.set(f"hvd/slot/{s.rank}", json.dumps(s.__dict__))
        store.set("hvd/port", str(port))
    slot = json.loads(store.get(f"hvd/slot/{env.rank}").decode())
    os.environ.update({
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": env.master_addr, "HOROVOD_GLOO_RENDEZVOUS_PORT": store.get("hvd/port").decode(),
        "HOROVOD_GLOO_TIMEOUT_SECONDS": str(timeout_s), "HOROVOD_HOSTNAME": slot["hostname"],
        **{f"HOROVOD_{k.upper()}": str(slot[k]) for k in ("rank", "size", "local_rank", "local_size",
                                                          "cross_rank", "cross_size")},
    })
    iface = os.environ.get("HOROVOD_GLOO_IFACE") or _iface_for(env.master_addr)
    if iface:
        os.environ["HOROVOD_GLOO_IFACE"] = iface


def horovod_init(backend: str, env: DistEnv, timeout_s: int) -> Any:
    """Start Horovod for ``backend``: MPI controller under mpirun, else Gloo with our own rendezvous."""
    import horovod.torch as hvd

    mpi_launched = env.launcher in ("openmpi", "pmi")
    controller = "gloo" if backend == "gloo" or not mpi_launched else "mpi"
    if backend == "mpi" and not mpi_launched and env.world_size > 1:
        raise BackendUnavailable("Horovod backend 'mpi' needs ranks started by mpirun (MPI controller); "
                                 "these were started without an MPI launcher")
    var, value = HOROVOD_OPS_ENV[backend]
    os.environ.update({"HOROVOD_CONTROLLER": controller, var: value})
    if controller == "gloo":
        _gloo_rendezvous(env, timeout_s)
    hvd.init()
    if hvd.size() != env.world_size or hvd.rank() != env.rank:
        raise RuntimeError(f"Horovod sees rank {hvd.rank()} of {hvd.size()}, the launcher said "
                           f"{env.rank} of {env.world_size}")
    return hvd


def horovod_finish(hvd: Any, env: DistEnv, timeout_s: int) -> None:
    """Shut Horovod down; rank 0 keeps the rendezvous up until every rank has let go of it."""
    hvd.shutdown()
    store = next((k for k in _KEEP if hasattr(k, "wait")), None)
    if store is None:
        return
    store.set(f"hvd/done/{env.rank}", "1")
    if env.rank == 0:
        store.wait([f"hvd/done/{r}" for r in range(env.world_size)], timedelta(seconds=timeout_s))
        for k in _KEEP:
            if hasattr(k, "stop"):
                k.stop()
    _KEEP.clear()
