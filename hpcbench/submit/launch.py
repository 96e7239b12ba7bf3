"""How a point's ranks start: one LaunchPlan per point, computed once by plan_launch.

The job script (render.py), the submitit backend and the local backend only render the plan: the launcher and
its words, the task layout, binding, the job's environment, each rank's environment, the working directory and
the rank command. A change here reaches all three; what a backend does differently is said in that backend.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from hpcbench.errors import ConfigError
from hpcbench.plan.checks import time_seconds
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SlurmSettings, SweepSpec
from hpcbench.vocab import HOROVOD_MAP
from hpcbench.workloads.config import CONFIGS, MODULE
from hpcbench.workloads.distenv import JOB_PORT_SHELL


class Shell(str):
    """A word the job's shell must expand (``"$HOSTS"``), so the renderer leaves it unquoted.

    Only hpcbench's own text is ever a Shell; user values stay plain strings and are quoted.
    """


@dataclass(frozen=True)
class EnvVar:
    """One variable of the job's environment: its value as the ranks see it and, where the job script takes it
    from the job's own variables instead (so that a hand-edited #SBATCH line still holds), that spelling."""

    name: str
    value: str
    shell: Shell | None = None


@dataclass(frozen=True)
class LauncherWords:
    """A launcher's own words for one point, each kind in a field of its own: nobody slices them by position."""

    argv: tuple[str, ...]  # the whole launcher prefix, as the job script writes it before the rank command
    # Where srun starts each rank as a task of its own (not torchrun's one task per node): srun's task counts, and
    # its options after them (--mpi, --cpu-bind, GPU binding, extras), which job steps and submitit's srun reuse.
    srun_tasks: tuple[str, ...] = ()
    srun_options: tuple[str, ...] = ()
    prelude: tuple[str, ...] = ()  # shell lines the launcher line needs first (hpcbench's own text)


@dataclass(frozen=True)
class LaunchPlan:
    """How one point's ranks start, whichever backend starts them."""

    settings: SlurmSettings  # the point's own [slurm]: the sweep's, with its axes' values (Point.settings)
    nodes: int
    ranks_per_node: int
    gpus_per_node: int
    env: tuple[EnvVar, ...]  # the job's environment, in export order: NCCL_DEBUG, OMP_NUM_THREADS, [slurm.env], axes
    words: LauncherWords
    workdir: str
    python: str
    module: str  # the workload's module, run as ``python -u -m module``
    rank_args: tuple[str, ...]  # the workload's own arguments
    needs_mpi: bool  # Horovod's MPI controller: only an MPI launcher can wire its ranks up

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def time_limit_s(self) -> float:
        return time_seconds(self.settings.time)

    @property
    def srun_steps(self) -> bool:
        """Whether srun starts each rank as a task of its own: what job steps (pack) and submitit's srun need."""
        return bool(self.words.srun_tasks)

    @property
    def rank_argv(self) -> tuple[str, ...]:
        """What every rank runs: identical under srun, mpirun, submitit's srun and the local backend."""
        return (self.python, "-u", "-m", self.module, *self.rank_args)

    def job_environ(self) -> dict[str, str]:
        return {v.name: v.value for v in self.env}

    def step_env(self) -> dict[str, str]:
        """The job's environment and what srun (and sbatch) tell every task of a one-task-per-rank step alike."""
        nodes = str(self.nodes)
        return {**self.job_environ(), "SLURM_NTASKS": str(self.world_size), "SLURM_NNODES": nodes,
                "SLURM_JOB_NUM_NODES": nodes, "SLURM_NTASKS_PER_NODE": str(self.ranks_per_node),
                "SLURM_CPUS_PER_TASK": str(self.settings.cpus_per_task)}

    def rank_env(self, rank: int) -> dict[str, str]:
        """Rank ``rank``'s environment where one task per rank is started as srun starts it (block layout over the
        nodes). Under mpirun, horovodrun and torchrun the launcher tells the rank its place in variables of its own
        (OMPI_COMM_WORLD_*, RANK), which distenv reads first."""
        per = self.ranks_per_node
        return {**self.step_env(), "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank % per),
                "SLURM_NODEID": str(rank // per)}


def horovod_mpi(point: Point) -> bool:
    """Horovod on its MPI controller: its ranks need an MPI launcher (srun --mpi=pmix, or mpirun)."""
    return point.framework == "horovod" and HOROVOD_MAP.get(point.backend, ("",))[0] == "mpi"


def rank_args(point: Point, point_dir: str) -> list[str]:
    """The workload's own arguments: the rank config's command line."""
    return CONFIGS[point.kind].from_point(point, point_dir).to_argv()


@lru_cache(maxsize=256)
def job_env(slurm: SlurmSettings) -> tuple[EnvVar, ...]:
    """The job's environment for these settings (a point's own include its [matrix.env] values)."""
    return (EnvVar("NCCL_DEBUG", "INFO"),
            EnvVar("OMP_NUM_THREADS", str(slurm.cpus_per_task), Shell('"${SLURM_CPUS_PER_TASK:-1}"')),
            *(EnvVar(k, v) for k, v in slurm.env))


def gpu_srun_args(point: Point, slurm: SlurmSettings) -> tuple[str, ...]:
    """srun options that put each rank of a GPU point on the socket of its GPU; none for a CPU point.

    Slurm's default layout within a node is cyclic over the sockets, so with --cpu-bind=sockets local rank 1
    lands on socket 1 while GPU 1 of a 2-socket node hangs off socket 0. ``block`` numbers the ranks in
    blocks per socket, so local rank i (the workload's GPU i) sits with GPU i when the ranks fill the
    sockets evenly. ``closest`` lets Slurm pick each task's GPU from the task's own CPUs (gres.conf's
    Cores=): single:1 rather than closest, which may give a task every GPU of its NUMA node.
    """
    if not point.gpus_per_node or slurm.gpu_bind == "none":
        return ()
    if slurm.gpu_bind == "closest":
        return ("--gpus-per-task=1", "--gpu-bind=single:1")
    return ("--distribution=block:block",)


def mpi_map_args(point: Point, slurm: SlurmSettings) -> tuple[str, ...]:
    """mpirun's mapping and binding. For a GPU point with gpu_bind = "block", ranks are spread over the
    sockets and numbered core by core (--rank-by core), so local ranks come in blocks per socket as the
    GPUs do; otherwise each rank is mapped and bound to the cpu_bind unit."""
    unit = slurm.cpu_bind.rstrip("s")  # sockets -> socket, cores -> core
    if point.gpus_per_node and slurm.gpu_bind == "block":
        return ("--map-by", "socket", "--rank-by", "core", "--bind-to", unit if slurm.cpu_bind != "none" else "none")
    return ("--map-by", unit, "--bind-to", unit) if slurm.cpu_bind != "none" else ()


def _srun_words(tasks: int, per_node: int, cpu_bind: str, mpi: str | None,
                extra: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """srun's task counts, and its options after them."""
    return ((f"--ntasks={tasks}", f"--ntasks-per-node={per_node}"),
            (*((f"--mpi={mpi}",) if mpi else ()), f"--cpu-bind={cpu_bind}", *extra))


def _srun(point: Point, slurm: SlurmSettings, python: str) -> LauncherWords:
    """One srun task per rank, bound to its cpu_bind unit (and its GPU's socket)."""
    mpi = slurm.mpi
    if mpi is None and horovod_mpi(point):
        mpi = "pmix"  # Horovod's MPI controller: srun must wire up MPI (PMIx) for the ranks
    tasks, options = _srun_words(point.world_size, point.ranks_per_node, slurm.cpu_bind, mpi,
                                 (*gpu_srun_args(point, slurm), *slurm.launcher_args))
    return LauncherWords(("srun", *tasks, *options), tasks, options)


def _mpirun(point: Point, slurm: SlurmSettings, python: str) -> LauncherWords:
    argv = ("mpirun", "-np", str(point.world_size), *mpi_map_args(point, slurm), "-x", "NCCL_DEBUG",
            *slurm.launcher_args)
    return LauncherWords(argv)


def _horovodrun(point: Point, slurm: SlurmSettings, python: str) -> LauncherWords:
    # Over MPI so that mpirun (and its Slurm support) starts the remote ranks: no ssh between nodes.
    mapping = mpi_map_args(point, slurm)
    argv = ("horovodrun", "-np", str(point.world_size), "-H", Shell('"$HOSTS"'), "--mpi",
            *(("--mpi-args", " ".join(mapping)) if mapping else ()), *slurm.launcher_args)
    # horovodrun wants host:slots; Slurm gives a compressed node list.
    hosts = f'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/\\$/:{point.ranks_per_node}/" | paste -sd, -'
    return LauncherWords(argv, prelude=(f"HOSTS=$({hosts})",))


def _torchrun(point: Point, slurm: SlurmSettings, python: str) -> LauncherWords:
    # One torchrun per node; it starts the node's ranks, so Slurm must not bind that one task.
    tasks, options = _srun_words(point.nodes, 1, "none", slurm.mpi, slurm.launcher_args)
    argv = ("srun", *tasks, *options, python, "-m", "torch.distributed.run", f"--nnodes={point.nodes}",
            f"--nproc-per-node={point.ranks_per_node}", "--rdzv-backend=c10d",
            Shell('--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"'), Shell('--rdzv-id="$SLURM_JOB_ID"'), "--no-python")
    # The first node's address as the ranks themselves find it (DNS, else Slurm's NodeAddr).
    find = "from hpcbench.workloads.distenv import from_environ; print(from_environ().master_addr)"
    prelude = (f"MASTER_ADDR=$({shlex.quote(python)} -c {shlex.quote(find)})", f"MASTER_PORT={JOB_PORT_SHELL}")
    return LauncherWords(argv, prelude=prelude)


# One entry per launcher (vocab.LAUNCHERS): what it says to start the point's ranks inside the allocation.
LAUNCHERS: dict[str, Callable[[Point, SlurmSettings, str], LauncherWords]] = {
    "srun": _srun, "mpirun": _mpirun, "horovodrun": _horovodrun, "torchrun": _torchrun}


def plan_launch(spec: SweepSpec, point: Point, workdir: str, python: str) -> LaunchPlan:
    """The point's launch plan, with its own settings (the sweep's [slurm] and its axes' values)."""
    slurm = point.settings(spec.slurm)
    return LaunchPlan(
        settings=slurm, nodes=point.nodes, ranks_per_node=point.ranks_per_node, gpus_per_node=point.gpus_per_node,
        env=job_env(slurm), words=LAUNCHERS[slurm.launcher](point, slurm, python), workdir=workdir, python=python,
        module=MODULE[point.kind], rank_args=tuple(rank_args(point, workdir)), needs_mpi=horovod_mpi(point))


def need_srun_steps(spec: SweepSpec, plans: Iterable[LaunchPlan], what: str, hint: str) -> None:
    """Refuses, before anything runs, plans whose ranks srun does not start as tasks of their own: ``what`` (pack's
    job steps, submitit's srun line) starts them so."""
    for plan in plans:
        if not plan.srun_steps:
            where = spec.matrix.where("launcher") or "slurm.launcher"
            raise ConfigError(f"{spec.path}: {where}: {plan.settings.launcher!r} cannot be used with {what}, which "
                              "starts each rank as an srun task of its own", hint=hint)
