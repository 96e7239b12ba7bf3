"""Rank start-up: the command each rank runs, and the launcher line that starts them with binding."""

from __future__ import annotations

from hpcbench.plan import Point
from hpcbench.spec import SlurmSettings
from hpcbench.workloads.config import TrainConfig
from hpcbench.workloads.frameworks import HOROVOD_MAP

WORKLOAD_MODULE = {"train": "hpcbench.workloads.train"}


def rank_argv(point: Point, point_dir: str, python: str) -> list[str]:
    """What every rank runs: identical under srun, mpirun and the local backend."""
    return [python, "-u", "-m", WORKLOAD_MODULE[point.kind], *TrainConfig.from_point(point, point_dir).to_argv()]


def launcher_argv(point: Point, slurm: SlurmSettings) -> list[str]:
    """The launcher prefix inside an allocation: one rank per GPU (or per requested CPU rank), socket binding."""
    if slurm.launcher == "mpirun":
        argv = ["mpirun", "-np", str(point.world_size)]
        if slurm.cpu_bind != "none":
            unit = slurm.cpu_bind.rstrip("s")  # sockets -> socket, cores -> core
            argv += ["--map-by", unit, "--bind-to", unit]
        return argv + ["-x", "NCCL_DEBUG"]
    argv = ["srun", f"--ntasks={point.world_size}", f"--ntasks-per-node={point.ranks_per_node}"]
    if point.framework == "horovod" and HOROVOD_MAP[point.backend][0] == "mpi":
        argv.append("--mpi=pmix")  # Horovod's MPI controller: srun must wire up MPI (PMIx) for the ranks
    argv.append(f"--cpu-bind={slurm.cpu_bind}")
    return argv
