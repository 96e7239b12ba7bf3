"""Rank start-up: the command each rank runs, and the launcher line that starts them with binding."""

from __future__ import annotations

import shlex

from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SlurmSettings
from hpcbench.vocab import HOROVOD_MAP
from hpcbench.workloads.config import CONFIGS, MODULE
from hpcbench.workloads.distenv import JOB_PORT_SHELL


class Shell(str):
    """A launcher word the job's shell must expand (``"$HOSTS"``), so the renderer leaves it unquoted.

    Only hpcbench's own text is ever a Shell; user values stay plain strings and are quoted.
    """


def rank_argv(point: Point, point_dir: str, python: str) -> list[str]:
    """What every rank runs: identical under srun, mpirun and the local backend."""
    return [python, "-u", "-m", MODULE[point.kind], *rank_args(point, point_dir)]


def rank_args(point: Point, point_dir: str) -> list[str]:
    """The workload's own arguments: the rank config's command line (submitit passes these alone)."""
    return CONFIGS[point.kind].from_point(point, point_dir).to_argv()


def _srun(ntasks: int, per_node: int, cpu_bind: str, mpi: str | None) -> list[str]:
    argv = ["srun", f"--ntasks={ntasks}", f"--ntasks-per-node={per_node}"]
    if mpi:
        argv.append(f"--mpi={mpi}")
    return [*argv, f"--cpu-bind={cpu_bind}"]


def gpu_srun_args(point: Point, slurm: SlurmSettings) -> list[str]:
    """srun options that put each rank of a GPU point on the socket of its GPU; none for a CPU point.

    Slurm's default layout within a node is cyclic over the sockets, so with --cpu-bind=sockets local rank 1
    lands on socket 1 while GPU 1 of a 2-socket node hangs off socket 0. ``block`` numbers the ranks in
    blocks per socket, so local rank i (the workload's GPU i) sits with GPU i when the ranks fill the
    sockets evenly. ``closest`` lets Slurm pick each task's GPU from the task's own CPUs (gres.conf's
    Cores=): single:1 rather than closest, which may give a task every GPU of its NUMA node.
    """
    if not point.gpus_per_node or slurm.gpu_bind == "none":
        return []
    if slurm.gpu_bind == "closest":
        return ["--gpus-per-task=1", "--gpu-bind=single:1"]
    return ["--distribution=block:block"]


def mpi_map_args(point: Point, slurm: SlurmSettings) -> list[str]:
    """mpirun's mapping and binding. For a GPU point with gpu_bind = "block", ranks are spread over the
    sockets and numbered core by core (--rank-by core), so local ranks come in blocks per socket as the
    GPUs do; otherwise each rank is mapped and bound to the cpu_bind unit."""
    unit = slurm.cpu_bind.rstrip("s")  # sockets -> socket, cores -> core
    if point.gpus_per_node and slurm.gpu_bind == "block":
        return ["--map-by", "socket", "--rank-by", "core", "--bind-to", unit if slurm.cpu_bind != "none" else "none"]
    return ["--map-by", unit, "--bind-to", unit] if slurm.cpu_bind != "none" else []


def launcher_prelude(point: Point, slurm: SlurmSettings, python: str = "python3") -> list[str]:
    """Shell lines the launcher line needs first (hpcbench's own text, never user values)."""
    if slurm.launcher == "horovodrun":
        # horovodrun wants host:slots; Slurm gives a compressed node list.
        hosts = f'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/\\$/:{point.ranks_per_node}/" | paste -sd, -'
        return [f"HOSTS=$({hosts})"]
    if slurm.launcher == "torchrun":
        # The first node's address as the ranks themselves find it (DNS, else Slurm's NodeAddr).
        find = "from hpcbench.workloads.distenv import from_environ; print(from_environ().master_addr)"
        return [f"MASTER_ADDR=$({shlex.quote(python)} -c {shlex.quote(find)})",
                f"MASTER_PORT={JOB_PORT_SHELL}"]
    return []


def horovod_mpi(point: Point) -> bool:
    """Horovod on its MPI controller: its ranks need an MPI launcher (srun --mpi=pmix, or mpirun)."""
    return point.framework == "horovod" and HOROVOD_MAP.get(point.backend, ("",))[0] == "mpi"


def launcher_argv(point: Point, slurm: SlurmSettings, python: str = "python3") -> list[str]:
    """The launcher prefix inside an allocation: one rank per GPU (or per requested CPU rank), socket binding."""
    if slurm.launcher == "mpirun":
        return ["mpirun", "-np", str(point.world_size), *mpi_map_args(point, slurm), "-x", "NCCL_DEBUG",
                *slurm.launcher_args]
    if slurm.launcher == "horovodrun":
        # Over MPI so that mpirun (and its Slurm support) starts the remote ranks: no ssh between nodes.
        argv = ["horovodrun", "-np", str(point.world_size), "-H", Shell('"$HOSTS"'), "--mpi"]
        mapping = mpi_map_args(point, slurm)
        if mapping:
            argv += ["--mpi-args", " ".join(mapping)]
        return argv + list(slurm.launcher_args)
    if slurm.launcher == "torchrun":
        # One torchrun per node; it starts the node's ranks, so Slurm must not bind that one task.
        return [*_srun(point.nodes, 1, "none", slurm.mpi), *slurm.launcher_args, python, "-m", "torch.distributed.run",
                f"--nnodes={point.nodes}", f"--nproc-per-node={point.ranks_per_node}", "--rdzv-backend=c10d",
                Shell('--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"'), Shell('--rdzv-id="$SLURM_JOB_ID"'),
                "--no-python"]
    mpi = slurm.mpi
    if mpi is None and horovod_mpi(point):
        mpi = "pmix"  # Horovod's MPI controller: srun must wire up MPI (PMIx) for the ranks
    return [*_srun(point.world_size, point.ranks_per_node, slurm.cpu_bind, mpi), *gpu_srun_args(point, slurm),
            *slurm.launcher_args]
