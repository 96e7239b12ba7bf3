"""The data-parallel frameworks a training point can use, behind one small interface.

- ``ddp``: torch DistributedDataParallel over gloo, nccl, mpi or oneccl (the "ccl" process group).
- ``horovod``: Horovod. The backend picks the controller and the tensor operations:

  ========  ==========  ======================  ==============================================
  backend   controller  HOROVOD_CPU_OPERATIONS  what the gradient allreduce runs on
  ========  ==========  ======================  ==============================================
  mpi       mpi         mpi                     MPI_Allreduce (host memory)
  gloo      gloo        gloo                    Gloo's ring allreduce over TCP (host memory)
  nccl      mpi         mpi                     NCCL on the GPU (the build's GPU operations)
  oneccl    mpi         ccl                     oneCCL (host memory; needs a CCL build)
  ========  ==========  ======================  ==============================================

  With GPU tensors and backend mpi or gloo, gradients are copied to host memory, averaged there
  in one fused buffer, and copied back ("host staging"): the comparison then measures what these
  libraries really do on a cluster without GPU-aware transports, instead of silently using NCCL.
  The Gloo controller needs no MPI: rank 0 serves Horovod's HTTP rendezvous (the one horovodrun
  would start) and every rank gets the HOROVOD_* variables horovodrun would set.
- ``none``: one process, no communication library: the ideal baseline.
"""

from __future__ import annotations

import copy
import os
import socket
import time
from typing import Any

from hpcbench.errors import BackendUnavailable
from hpcbench.vocab import HOROVOD_MAP
from hpcbench.workloads.common import init_process_group
from hpcbench.workloads.config import TrainConfig
from hpcbench.workloads.distenv import DistEnv, side_port


class Framework:
    name = "none"
    comm_method = "framework none: one process and no communication, so comm = 0 and compute = step time"

    def __init__(self, cfg: TrainConfig, env: DistEnv) -> None:
        self.cfg, self.env = cfg, env

    def wrap(self, model: Any, opt: Any) -> tuple[Any, Any]:
        """The model and optimizer the timed steps use (with gradient exchange)."""
        return model, opt

    def allgather(self, obj: Any) -> list[Any]:
        return [obj]

    def close(self) -> None:
        pass


class DDP(Framework):
    name = "ddp"
    comm_method = ("compute = the same steps on an unwrapped copy of the model (no DDP, so no gradient "
                   "allreduce or buffer broadcast), run on every rank after the timed steps; "
                   "comm = step - compute (the allreduce time not hidden behind backward, plus waiting)")

    def __init__(self, cfg: TrainConfig, env: DistEnv) -> None:
        super().__init__(cfg, env)
        import torch.distributed as dist

        if cfg.backend == "oneccl":
            import oneccl_bindings_for_pytorch  # noqa: F401  (registers the "ccl" process group)
        # Availability was checked by common.require(); a missing peer times out, never hangs.
        init_process_group(cfg.backend, env, cfg.init_timeout_s)
        self._dist = dist

    def wrap(self, model: Any, opt: Any) -> tuple[Any, Any]:
        import torch
        from torch.nn.parallel import DistributedDataParallel

        # DDP broadcasts rank 0's parameters and buffers at construction. The GPU is the one the rank chose
        # (placement.use_device), not its local rank: under gpu_bind = "closest" each task sees one GPU.
        ids = [torch.cuda.current_device()] if self.cfg.device == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids), opt

    def allgather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.env.world_size
        self._dist.all_gather_object(out, obj)
        return out

    def close(self) -> None:
        self._dist.destroy_process_group()


class Horovod(Framework):
    name = "horovod"
    comm_method = ("compute = the same steps on a copy of the model with a plain optimizer (no Horovod "
                   "allreduce hooks), run on every rank after the timed steps; comm = step - compute "
                   "(allreduce time not overlapped with backward, plus waiting)")

    def __init__(self, cfg: TrainConfig, env: DistEnv, timeline: str | None = None) -> None:
        super().__init__(cfg, env)
        import horovod.torch as hvd  # its build flags were checked by common.require()

        backend = cfg.backend
        controller, cpu_ops = HOROVOD_MAP[backend]
        os.environ["HOROVOD_CONTROLLER"] = controller
        os.environ["HOROVOD_CPU_OPERATIONS"] = cpu_ops
        # Host staging (see the module doc) for GPU tensors over the CPU libraries.
        self.host_staged = cfg.device == "cuda" and backend in ("mpi", "gloo")
        if timeline:
            os.environ["HOROVOD_TIMELINE"] = timeline
        self._server = None
        if controller == "gloo":
            self._server = self._gloo_rendezvous()
        hvd.init()
        if hvd.size() != env.world_size:
            raise RuntimeError(f"horovod sees {hvd.size()} ranks, the launcher started {env.world_size}")
        if (controller == "mpi") != bool(hvd.mpi_enabled()):
            raise BackendUnavailable(f"backend {backend!r} needs Horovod's {controller} controller, but "
                                     f"horovod started with mpi_enabled={hvd.mpi_enabled()}")
        self.hvd = hvd

    def _gloo_rendezvous(self) -> Any:
        """Rank 0 serves the rendezvous that horovodrun would; the others wait for it (bounded)."""
        env, cfg = self.env, self.cfg
        port = side_port(env.master_port)
        local_size = cfg.ranks_per_node
        os.environ.update({
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": env.master_addr, "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
            "HOROVOD_GLOO_TIMEOUT_SECONDS": str(cfg.init_timeout_s),
            "HOROVOD_RANK": str(env.rank), "HOROVOD_SIZE": str(env.world_size),
            "HOROVOD_LOCAL_RANK": str(env.local_rank), "HOROVOD_LOCAL_SIZE": str(local_size),
            "HOROVOD_CROSS_RANK": str(env.node_rank), "HOROVOD_CROSS_SIZE": str(env.nnodes),
            # A scope key only: Slurm node names need not resolve, and slurmds may share a host.
            "HOROVOD_HOSTNAME": f"node{env.node_rank}",
        })
        if env.rank == 0:
            import threading

            from horovod.runner.common.util.hosts import SlotInfo
            from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

            server = RendezvousHTTPServer(("0.0.0.0", port), RendezvousHandler, 0)
            server.init([SlotInfo(f"node{r // local_size}", r, r % local_size, r // local_size,
                                  env.world_size, local_size, env.nnodes) for r in range(env.world_size)])
            threading.Thread(target=server.serve_forever, daemon=True, name="hvd-rendezvous").start()
            return server
        deadline = time.monotonic() + cfg.init_timeout_s
        while True:
            try:
                socket.create_connection((env.master_addr, port), timeout=5).close()
                return None
            except OSError as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no Horovod Gloo rendezvous at {env.master_addr}:{port} after "
                                       f"{cfg.init_timeout_s}s ({e}); did rank 0 start?") from None
                time.sleep(0.2)

    def wrap(self, model: Any, opt: Any) -> tuple[Any, Any]:
        hvd = self.hvd
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        if self.host_staged:
            return model, _HostStagedOptimizer(opt, hvd)
        return model, hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), op=hvd.Average)

    def allgather(self, obj: Any) -> list[Any]:
        return list(self.hvd.allgather_object(obj))

    def close(self) -> None:
        self.hvd.shutdown()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _HostStagedOptimizer:
    """Average the gradients through host memory in one fused buffer, then step."""

    def __init__(self, opt: Any, hvd: Any) -> None:
        self._opt, self._hvd = opt, hvd
        self.param_groups = opt.param_groups

    def zero_grad(self) -> None:
        self._opt.zero_grad()

    def state_dict(self) -> Any:
        return self._opt.state_dict()

    def load_state_dict(self, sd: Any) -> None:
        self._opt.load_state_dict(sd)

    @property
    def state(self) -> Any:
        return self._opt.state

    def step(self) -> None:
        import torch

        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads]).cpu()
        self._hvd.allreduce_(flat, op=self._hvd.Average, name="hpcbench.host_staged_grads")
        flat = flat.to(grads[0].device)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        self._opt.step()


def make(cfg: TrainConfig, env: DistEnv, timeline: str | None = None) -> Framework:
    if cfg.framework == "ddp":
        return DDP(cfg, env)
    if cfg.framework == "horovod":
        return Horovod(cfg, env, timeline)
    if env.world_size != 1:
        raise BackendUnavailable(f"framework 'none' runs one process; the launcher started {env.world_size}")
    return Framework(cfg, env)


def compute_only_copy(model: Any) -> Any:
    """A copy of the (unwrapped) model with no communication hooks, for the compute-only steps."""
    return copy.deepcopy(model)
