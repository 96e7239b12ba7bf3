# Generated from hpcbench/plan/fields.py by `python -m hpcbench.plan.codegen`: do not edit; change the declaration
# there and run it again (tests/test_codegen.py checks that this file is what it gives).
"""The [sweep], [slurm] and [workload] settings and the Point, one field per declared parameter or setting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcbench.plan.point import PointMethods


@dataclass(frozen=True)
class SweepInfo:
    """[sweep]: the study's name, description and repeats."""

    name: str = ""
    description: str = ""
    repeats: int = 1
    order: str = "shuffled"
    seed: int = 1


@dataclass(frozen=True)
class SlurmSettings:
    """[slurm]: how each job is submitted (never in a point's id)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gres: str | None = None
    time: str = "00:30:00"
    cpus_per_task: int = 1
    mem: str | None = None
    launcher: str = "srun"
    mpi: str | None = None
    cpu_bind: str = "sockets"
    gpu_bind: str = "block"
    python: str | None = None
    module_use: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    sbatch_args: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    launcher_args: tuple[str, ...] = ()
    max_jobs_in_queue: int = 0
    pack: bool = False
    max_retries: int = 0


@dataclass(frozen=True)
class Workload:
    """[workload]: every rank's measurement parameters; the matrix defaults."""

    framework: str = "ddp"
    backend: str = "gloo"
    model: str = "mlp"
    batch_size: int = 32
    kind: str = "train"
    device: str = "cpu"
    data: str = "synthetic"
    steps: int = 20
    warmup_steps: int = 5
    lr: float = 0.01
    init_timeout_s: int = 600
    data_dir: str | None = None
    scaling: str = "weak"
    global_batch_size: int | None = None
    lr_scaling: bool = True
    checkpoint: bool = False
    timeline: bool = False
    comm_split: bool = True
    fail_rank: int = -1
    fail_step: int = 1
    slow_rank: int = -1
    slow_ms: int = 100
    min_bytes: int = 8
    max_bytes: int = 1073741824
    step_factor: int = 2
    dtype: str = "float32"
    warmup_iters: int = 5
    iters: int = 20
    collective: str = "all_reduce"


@dataclass(frozen=True)
class Point(PointMethods):
    """One job: a fully resolved set of measurement parameters (one field per declared parameter)."""

    id: str
    label: str
    framework: str = "ddp"
    backend: str = "gloo"
    model: str | None = "mlp"
    batch_size: int | None = 32
    nodes: int = 1
    ranks_per_node: int = 1
    gpus_per_node: int = 0
    kind: str = "train"
    device: str = "cpu"
    data: str | None = "synthetic"
    steps: int | None = 20
    warmup_steps: int | None = 5
    lr: float | None = 0.01
    repeat: int = 0
    init_timeout_s: int = 600
    data_dir: str | None = None
    scaling: str | None = "weak"
    global_batch_size: int | None = None
    lr_scaling: bool | None = True
    checkpoint: bool | None = False
    timeline: bool | None = False
    comm_split: bool | None = True
    fail_rank: int | None = -1
    fail_step: int | None = 1
    slow_rank: int | None = -1
    slow_ms: int | None = 100
    min_bytes: int | None = 8
    max_bytes: int | None = 1073741824
    step_factor: int | None = 2
    dtype: str | None = "float32"
    warmup_iters: int | None = 5
    iters: int | None = 20
    collective: str | None = "all_reduce"
    env: tuple[tuple[str, str], ...] = ()
    slurm: tuple[tuple[str, Any], ...] = ()
    job: tuple[tuple[str, Any], ...] = ()
